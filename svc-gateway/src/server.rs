//! Serving the router on a socket: TCP_NODELAY on every accepted connection, graceful stop.

use std::net::SocketAddr;

use axum::Router;
use axum::serve::ListenerExt;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A gateway serving on a socket. Dropping it stops accepting connections.
#[derive(Debug)]
pub struct Running {
    addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
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

    /// Stops accepting, lets in-flight requests finish, and waits for them.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// Waits until the server stops on its own (it only does on a fatal accept error).
    pub async fn wait(mut self) {
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// Binds `listen` and serves `router` on a background task.
pub async fn serve(router: Router, listen: SocketAddr) -> std::io::Result<Running> {
    let listener = TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        // Without TCP_NODELAY a response written as head then body waits on the client's
        // delayed ACK, about 40 ms per request.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let shutdown = async {
            let _ = rx.await;
        };
        // ConnectInfo: the client address PatAuth's failure limit counts by.
        let service = router.into_make_service_with_connect_info::<SocketAddr>();
        if let Err(error) = axum::serve(listener, service)
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::error!(error = %error, "server stopped");
        }
    });
    Ok(Running {
        addr,
        shutdown: Some(tx),
        task: Some(task),
    })
}
