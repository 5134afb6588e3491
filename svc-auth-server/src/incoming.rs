//! The gRPC listener's connections: TCP_NODELAY and TCP keepalive on each, at most
//! `SVC_GRPC_MAX_CONNECTIONS` served at once and `SVC_MAX_CONNECTIONS_PER_ADDRESS` from one
//! client address, and each must make progress: the HTTP/2 preface (or the start of TLS)
//! within `SVC_GRPC_HANDSHAKE_TIMEOUT` of accept, and no write blocked for
//! `SVC_WRITE_TIMEOUT`.
//!
//! Past the listener's cap it stops accepting, so new connections wait in the kernel's backlog
//! while the ones being served keep working; past an address's cap a new connection is closed
//! at once. After the handshake, a peer that stops answering is found by the HTTP/2 keepalive
//! pings (see [`crate::server`]).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use svc_runtime::http_server::{AddressSlot, PerAddress, ProgressIo};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::transport::server::{Connected, TcpIncoming};

/// TCP keepalive on accepted gRPC connections: a gateway that vanished without a reset is
/// noticed by the kernel, not held for ever.
pub(crate) const TCP_KEEPALIVE: Duration = Duration::from_secs(60);

/// `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`: what a gRPC client sends first. Under TLS, the same
/// count of the client's hello.
const PREFACE_LEN: usize = 24;

/// How the listener treats its connections.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Connections served at once.
    pub(crate) max_connections: usize,
    /// Connections from one client address.
    pub(crate) per_address: usize,
    /// Time from accept to the end of the preface.
    pub(crate) handshake_timeout: Duration,
    /// How long one write may block.
    pub(crate) write_timeout: Duration,
}

/// A connection holding its places under the caps until it is dropped.
#[derive(Debug)]
pub(crate) struct Capped {
    stream: ProgressIo<TcpStream>,
    _permit: OwnedSemaphorePermit,
    _address: AddressSlot,
}

/// Accepted connections within `limits`.
pub(crate) fn capped(
    listener: TcpListener,
    limits: Limits,
) -> Pin<Box<dyn Stream<Item = std::io::Result<Capped>> + Send>> {
    let incoming = TcpIncoming::from(listener)
        .with_nodelay(Some(true))
        .with_keepalive(Some(TCP_KEEPALIVE));
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let per_address = PerAddress::new(limits.per_address);
    Box::pin(futures_util::stream::unfold(
        (incoming, permits, per_address),
        move |(mut incoming, permits, per_address)| async move {
            loop {
                // The permit first: without one, the listener is not polled at all.
                let permit = permits.clone().acquire_owned().await.ok()?;
                let stream = match incoming.next().await? {
                    Ok(stream) => stream,
                    Err(error) => return Some((Err(error), (incoming, permits, per_address))),
                };
                let Some(address) = stream
                    .peer_addr()
                    .ok()
                    .and_then(|peer| per_address.admit(peer.ip()))
                else {
                    // Over its address's cap: closed by the drop.
                    continue;
                };
                let stream = ProgressIo::new(stream, limits.write_timeout)
                    .handshake(PREFACE_LEN, limits.handshake_timeout);
                let capped = Capped {
                    stream,
                    _permit: permit,
                    _address: address,
                };
                return Some((Ok(capped), (incoming, permits, per_address)));
            }
        },
    ))
}

impl Connected for Capped {
    type ConnectInfo = <TcpStream as Connected>::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.get_ref().connect_info()
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
