//! One accepted connection: served by hyper-util under the listener's timeouts, closed when it
//! idles or stalls, asked to close when the drain starts.
//!
//! A connection must keep making progress or it goes:
//! - no request within the header-read timeout of accept: dropped (a silent socket, or an
//!   HTTP/2 preface with nothing after it);
//! - a write to the socket blocked for the write timeout: the socket fails ([`ProgressIo`]);
//! - a response whose next frame hyper has not asked for within the write timeout (an HTTP/2
//!   stream the client grants no window, an HTTP/1 client that stopped reading): dropped.
//!   A stream waiting on its own source (an SSE stream between events) is not stalled: hyper
//!   is waiting for it, not the other way round.

use std::future::{Future, poll_fn};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, watch};
use tokio::time::Instant;

use super::address::AddressSlot;
use super::progress_io::ProgressIo;
use super::stalls::{Progress, Stalls};
use super::{Handler, HttpSettings};
use crate::shutdown::Phase;

/// The error type hyper accepts from a service or a body.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Requests in flight on a connection, and when the last one ended.
#[derive(Debug, Clone, Copy)]
struct Activity {
    in_flight: usize,
    started: u64,
    served: u64,
    last: Instant,
}

/// What a connection holds while it is served: a place under the listener's cap and one
/// under its address's.
pub(super) struct Slots {
    pub(super) _listener: OwnedSemaphorePermit,
    pub(super) _address: AddressSlot,
}

pub(super) struct Connection {
    stream: TcpStream,
    peer: SocketAddr,
    settings: HttpSettings,
    phase: watch::Receiver<Phase>,
    accepted: Instant,
}

impl Connection {
    pub(super) fn new(
        stream: TcpStream,
        peer: SocketAddr,
        settings: &HttpSettings,
        phase: watch::Receiver<Phase>,
    ) -> Connection {
        super::nodelay(&stream);
        Connection {
            stream,
            peer,
            settings: *settings,
            phase,
            accepted: Instant::now(),
        }
    }

    pub(super) async fn serve<S: Handler>(mut self, service: S, slots: Slots) {
        let (activity, mut watched) = watch::channel(Activity {
            in_flight: 0,
            started: 0,
            served: 0,
            last: self.accepted,
        });
        let first_request_by = self.accepted + self.settings.header_read_timeout;
        let write_timeout = self.settings.write_timeout;
        let responses = Arc::new(Stalls::new());
        let started = watched.clone();
        // A connection accepted while draining serves one request: the client (a load
        // balancer's probe, say) gets its answer, not a reset.
        let mut draining = *self.phase.borrow_and_update() >= Phase::Draining;
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(self.settings.header_read_timeout)
            .keep_alive(!draining);
        builder.http2().timer(TokioTimer::new());
        let service = Tracked {
            inner: service,
            peer: self.peer,
            activity,
            responses: responses.clone(),
        };
        let connection = builder.serve_connection(
            TokioIo::new(ProgressIo::new(self.stream, write_timeout)),
            hyper_util::service::TowerToHyperService::new(service),
        );
        tokio::pin!(connection);
        let mut closing = false;
        loop {
            let idle_after = match (draining, closing) {
                // Asked to close: hyper ends it once the requests in flight are answered. One
                // that lingers with nothing in flight for another header-read timeout (a peer
                // that ignores GOAWAY, say) is dropped; a long answer is left to the drain's
                // deadline.
                (_, true) => {
                    let quiet = self.settings.header_read_timeout;
                    tokio::select! {
                        _ = connection.as_mut() => break,
                        () = idle(&mut watched, quiet, false) => break,
                        () = responses.stalled(write_timeout) => break,
                    }
                }
                (true, false) => Duration::ZERO,
                (false, false) => self.settings.idle_timeout,
            };
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(error) = result {
                        tracing::debug!(error = %error, "connection ended with an error");
                    }
                    break;
                }
                () = idle(&mut watched, idle_after, draining) => {
                    connection.as_mut().graceful_shutdown();
                    closing = true;
                }
                () = no_request_by(&started, first_request_by) => {
                    tracing::debug!("no request within the header-read timeout of accept");
                    break;
                }
                () = responses.stalled(write_timeout) => {
                    tracing::debug!("a response made no progress for the write timeout");
                    break;
                }
                changed = self.phase.changed(), if !draining => {
                    if changed.is_err() || *self.phase.borrow() >= Phase::Draining {
                        draining = true;
                        connection.as_mut().graceful_shutdown();
                        closing = true;
                    }
                }
            }
        }
        drop(slots);
    }
}

/// Completes at `deadline` if no request has started by then; never otherwise.
async fn no_request_by(watched: &watch::Receiver<Activity>, deadline: Instant) {
    tokio::time::sleep_until(deadline).await;
    if watched.borrow().started > 0 {
        std::future::pending::<()>().await;
    }
}

/// Completes when nothing has been in flight for `timeout`; when draining, only after at
/// least one request was served.
async fn idle(watched: &mut watch::Receiver<Activity>, timeout: Duration, draining: bool) {
    loop {
        let now = *watched.borrow_and_update();
        let quiet = now.in_flight == 0 && (!draining || now.served > 0);
        if quiet {
            tokio::select! {
                () = tokio::time::sleep_until(now.last + timeout) => return,
                changed = watched.changed() => if changed.is_err() { return },
            }
        } else if watched.changed().await.is_err() {
            return;
        }
    }
}

/// The service with the peer address in each request and every request counted from its
/// start until its response body is dropped.
#[derive(Clone)]
struct Tracked<S> {
    inner: S,
    peer: SocketAddr,
    activity: watch::Sender<Activity>,
    responses: Arc<Stalls>,
}

/// Counts one request in flight until dropped.
struct InFlight(watch::Sender<Activity>);

impl InFlight {
    fn start(activity: &watch::Sender<Activity>) -> InFlight {
        activity.send_modify(|a| {
            a.in_flight += 1;
            a.started += 1;
        });
        InFlight(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|a| {
            a.in_flight -= 1;
            a.served += 1;
            a.last = Instant::now();
        });
    }
}

impl<S: Handler> tower::Service<Request<Incoming>> for Tracked<S> {
    type Response = Response<Progress<S::ResponseBody, InFlight>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Incoming>) -> Self::Future {
        crate::runtime::busy();
        request.extensions_mut().insert(self.peer);
        let guard = InFlight::start(&self.activity);
        let mut inner = self.inner.clone();
        let responses = self.responses.clone();
        Box::pin(async move {
            poll_fn(|cx| inner.poll_ready(cx))
                .await
                .map_err(Into::into)?;
            let response = inner.call(request).await.map_err(Into::into)?;
            // From here on hyper owes the response its writes.
            Ok(response.map(|body| responses.response_holding(body, guard)))
        })
    }
}
