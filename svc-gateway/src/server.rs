//! Serving the router on a socket through svc-runtime's serve loop: header-read and idle
//! timeouts, a connection cap, and a drain bounded by the grace period.

use std::net::SocketAddr;

use axum::Router;
use svc_runtime::http_server::{self, HttpSettings, Serving};
use svc_runtime::shutdown::Drain;

use crate::session::WriterTask;

/// After the connections are closed, how long the checkpoints still queued have to be written.
pub const CHECKPOINT_FLUSH: std::time::Duration = std::time::Duration::from_secs(2);

/// A gateway serving on a socket. Dropping it starts the drain.
#[derive(Debug)]
pub struct Running {
    serving: Option<Serving>,
    addr: SocketAddr,
    writer: Option<WriterTask>,
}

impl Running {
    /// The bound address (the real port when the configuration asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `/ready` fails from now on, connections close after their current request, and this
    /// waits for them: at the latest the grace period, after which open streams end with
    /// their final error event.
    pub async fn shutdown(mut self) {
        if let Some(serving) = self.serving.take() {
            serving.shutdown().await;
        }
        if let Some(writer) = self.writer.take() {
            writer.flush(CHECKPOINT_FLUSH).await;
        }
    }

    /// Flushes `writer` at shutdown.
    pub(crate) fn with_writer(mut self, writer: Option<WriterTask>) -> Running {
        self.writer = writer;
        self
    }

    /// Waits until the server stops on its own (it only does once a drain has ended).
    pub async fn wait(mut self) {
        if let Some(serving) = self.serving.take() {
            serving.wait().await;
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(serving) = &self.serving {
            serving.drain().start();
        }
    }
}

/// Binds `listen` and serves `router` on a background task until `drain` ends it.
pub async fn serve(
    router: Router,
    listen: SocketAddr,
    settings: HttpSettings,
    drain: Drain,
) -> std::io::Result<Running> {
    // The peer's SocketAddr goes into every request's extensions: the client address
    // PatAuth's failure limit counts by.
    let serving = http_server::bind_and_serve(listen, settings, router, drain).await?;
    Ok(Running {
        addr: serving.addr(),
        serving: Some(serving),
        writer: None,
    })
}
