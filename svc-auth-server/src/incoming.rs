//! The gRPC listener's connections: TCP_NODELAY and TCP keepalive on each, at most
//! `SVC_GRPC_MAX_CONNECTIONS` served at once and `SVC_MAX_CONNECTIONS_PER_ADDRESS` from one
//! client address, and each must make progress: the HTTP/2 preface (or the start of TLS)
//! within `SVC_GRPC_HANDSHAKE_TIMEOUT` of accept, and no write blocked for
//! `SVC_WRITE_TIMEOUT`.
//!
//! Past the listener's cap it stops accepting, so new connections wait in the kernel's backlog
//! while the ones being served keep working; past an address's cap a new connection is closed
//! at once. After the handshake, a peer that stops answering is found by the HTTP/2 keepalive
//! pings (see [`crate::server`]); one that answers pings but leaves a stream waiting on it (a
//! request it never finishes sending, a response it grants no window) for `SVC_WRITE_TIMEOUT`
//! loses the connection: [`StallLayer`] stamps each call's bodies in the connection's
//! [`Stalls`], and the connection fails its next read once one is due.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::{Stream, StreamExt};
use svc_runtime::http_server::stalls::{Progress, Stalls};
use svc_runtime::http_server::{AddressSlot, PerAddress, ProgressIo};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::transport::server::{Connected, TcpConnectInfo, TcpIncoming};
use tower::{Layer, Service};

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

/// A connection holding its places under the caps until it is dropped, failing its reads once
/// one of its streams has waited on the client for the write timeout.
pub(crate) struct Capped {
    stream: ProgressIo<TcpStream>,
    stalls: Arc<Stalls>,
    stalled: Option<BoxFuture<'static, ()>>,
    _permit: OwnedSemaphorePermit,
    _address: AddressSlot,
}

/// What each call learns of its connection: the peer, and where its streams' waits go.
#[derive(Debug, Clone)]
pub(crate) struct GrpcConnectInfo {
    /// The TCP peer.
    pub(crate) tcp: TcpConnectInfo,
    stalls: Arc<Stalls>,
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
                let stalls = Arc::new(Stalls::new());
                let watched = stalls.clone();
                let write_timeout = limits.write_timeout;
                let capped = Capped {
                    stream,
                    stalls,
                    stalled: Some(Box::pin(
                        async move { watched.stalled(write_timeout).await },
                    )),
                    _permit: permit,
                    _address: address,
                };
                return Some((Ok(capped), (incoming, permits, per_address)));
            }
        },
    ))
}

impl Connected for Capped {
    type ConnectInfo = GrpcConnectInfo;

    fn connect_info(&self) -> GrpcConnectInfo {
        GrpcConnectInfo {
            tcp: self.stream.get_ref().connect_info(),
            stalls: self.stalls.clone(),
        }
    }
}

impl AsyncRead for Capped {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        // hyper reads for as long as it serves the connection, so the check rides on reads.
        if let Some(stalled) = &mut this.stalled
            && stalled.as_mut().poll(cx).is_ready()
        {
            this.stalled = None;
            tracing::debug!("a gRPC stream made no progress for the write timeout");
        }
        if this.stalled.is_none() {
            return Poll::Ready(Err(std::io::ErrorKind::TimedOut.into()));
        }
        Pin::new(&mut this.stream).poll_read(cx, buf)
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

/// Stamps each call's request and response bodies in its connection's [`Stalls`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StallLayer;

impl<S> Layer<S> for StallLayer {
    type Service = StallWatch<S>;

    fn layer(&self, inner: S) -> StallWatch<S> {
        StallWatch { inner }
    }
}

/// The service [`StallLayer`] makes.
#[derive(Debug, Clone)]
pub(crate) struct StallWatch<S> {
    inner: S,
}

impl<S, R> Service<http::Request<tonic::body::Body>> for StallWatch<S>
where
    S: Service<http::Request<tonic::body::Body>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Progress<R>>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<tonic::body::Body>) -> Self::Future {
        // Every connection is a `Capped` one; a call without its info is watched by nobody.
        let stalls = match request.extensions().get::<GrpcConnectInfo>().cloned() {
            Some(info) => {
                // What `tonic::Request::remote_addr` looks for.
                request.extensions_mut().insert(info.tcp);
                info.stalls
            }
            None => Arc::new(Stalls::new()),
        };
        let request = request.map(|body| tonic::body::Body::new(stalls.request(body)));
        let answer = self.inner.call(request);
        Box::pin(async move { Ok(answer.await?.map(|body| stalls.response(body))) })
    }
}
