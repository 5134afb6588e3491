//! The gRPC listener's connections: TCP_NODELAY and TCP keepalive on each, and at most
//! `SVC_HTTP_MAX_CONNECTIONS` served at once. Past the cap the listener stops accepting, so
//! new connections wait in the kernel's backlog while the ones being served keep working.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::transport::server::{Connected, TcpIncoming};

/// TCP keepalive on accepted gRPC connections: a gateway that vanished without a reset is
/// noticed by the kernel, not held for ever.
pub(crate) const TCP_KEEPALIVE: Duration = Duration::from_secs(60);

/// A connection holding one of the listener's permits until it is dropped.
#[derive(Debug)]
pub(crate) struct Capped {
    stream: TcpStream,
    _permit: OwnedSemaphorePermit,
}

/// Accepted connections, at most `max` at once.
pub(crate) fn capped(
    listener: TcpListener,
    max: usize,
) -> Pin<Box<dyn Stream<Item = std::io::Result<Capped>> + Send>> {
    let incoming = TcpIncoming::from(listener)
        .with_nodelay(Some(true))
        .with_keepalive(Some(TCP_KEEPALIVE));
    let permits = Arc::new(Semaphore::new(max));
    Box::pin(futures_util::stream::unfold(
        (incoming, permits),
        |(mut incoming, permits)| async move {
            // The permit first: without one, the listener is not polled at all.
            let permit = permits.clone().acquire_owned().await.ok()?;
            let accepted = incoming.next().await?;
            let item = accepted.map(|stream| Capped {
                stream,
                _permit: permit,
            });
            Some((item, (incoming, permits)))
        },
    ))
}

impl Connected for Capped {
    type ConnectInfo = <TcpStream as Connected>::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for Capped {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Capped {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
