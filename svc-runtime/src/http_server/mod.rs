//! The one HTTP serve loop of every svc binary: hyper-util's automatic HTTP/1 and HTTP/2
//! connections with a timer, so a slow or idle client cannot hold a socket for ever.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `SVC_HTTP_HEADER_READ_TIMEOUT` | time a client has to send a request's headers, counted from accept for the first | 10s |
//! | `SVC_HTTP_IDLE_TIMEOUT` | a connection with no request in flight for this long is closed | 60s |
//! | `SVC_HTTP_MAX_CONNECTIONS` | connections served at once; past it, new ones wait in the backlog | 4096 |
//! | `SVC_MAX_CONNECTIONS_PER_ADDRESS` | connections from one client address; past it, new ones are closed at accept | 256 |
//! | `SVC_WRITE_TIMEOUT` | a response write, or a response whose next frame is not taken, blocked this long closes the connection | 30s |
//! | `SVC_BODY_READ_TIMEOUT` | a request body that sends nothing for this long is refused (the reader's business: see [`HttpSettings::body_read_timeout`]) | 30s |
//! | `SVC_SHUTDOWN_GRACE` | how long a shutdown waits for requests in flight | 10s |
//!
//! HTTP/1 waits for the next request on a kept-alive connection under the header-read
//! timeout, so such a connection closes after the shorter of the two. Every connection must
//! keep making progress: see the private `conn` module for what counts.
//!
//! ```
//! use std::time::Duration;
//! use svc_runtime::config::Vars;
//! use svc_runtime::http_server::HttpSettings;
//!
//! let vars = Vars::from_pairs([("SVC_HTTP_MAX_CONNECTIONS", "0")]);
//! let error = HttpSettings::from_vars(&vars).unwrap_err();
//! assert_eq!(error.variable, "SVC_HTTP_MAX_CONNECTIONS");
//!
//! for (variable, bad) in [
//!     ("SVC_WRITE_TIMEOUT", "30"),
//!     ("SVC_BODY_READ_TIMEOUT", "0s"),
//!     ("SVC_MAX_CONNECTIONS_PER_ADDRESS", "-1"),
//! ] {
//!     let error = HttpSettings::from_vars(&Vars::from_pairs([(variable, bad)])).unwrap_err();
//!     assert_eq!(error.variable, variable);
//! }
//!
//! let vars = Vars::from_pairs([("SVC_HTTP_IDLE_TIMEOUT", "5s")]);
//! let settings = HttpSettings::from_vars(&vars).unwrap();
//! assert_eq!(settings.idle_timeout, Duration::from_secs(5));
//! ```

mod address;
mod conn;
mod progress_io;
pub mod stalls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::{JoinHandle, JoinSet};

use crate::config::{ConfigError, Vars, parse_positive, parse_timeout};
use crate::shutdown::{Drain, Phase};

pub use address::{AddressSlot, PerAddress};
pub use conn::BoxError;
pub use progress_io::ProgressIo;

crate::variables! {
    /// Time a client has to send a request's headers, from accept for the first.
    SVC_HTTP_HEADER_READ_TIMEOUT;
    /// A connection with no request in flight for this long is closed.
    SVC_HTTP_IDLE_TIMEOUT;
    /// HTTP connections served at once; past it, new ones wait in the backlog.
    SVC_HTTP_MAX_CONNECTIONS;
    /// How long a shutdown waits for requests in flight.
    SVC_SHUTDOWN_GRACE;
    /// Connections from one client address; past it, new ones are closed at accept.
    SVC_MAX_CONNECTIONS_PER_ADDRESS;
    /// A write, or a stream the client does not move, blocked this long closes the connection.
    SVC_WRITE_TIMEOUT;
    /// A request body that sends nothing for this long is refused.
    SVC_BODY_READ_TIMEOUT;
}

/// Default `SVC_HTTP_HEADER_READ_TIMEOUT`.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `SVC_HTTP_IDLE_TIMEOUT`.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default `SVC_HTTP_MAX_CONNECTIONS`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// Default `SVC_SHUTDOWN_GRACE`.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// Default `SVC_MAX_CONNECTIONS_PER_ADDRESS`.
pub const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: usize = 256;
/// Default `SVC_WRITE_TIMEOUT`.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Default `SVC_BODY_READ_TIMEOUT`.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// After the deadline, how long the final events have to reach the clients before the
/// connections are dropped.
pub const FINAL_WRITE: Duration = Duration::from_secs(1);

/// How a listener treats its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpSettings {
    /// Time a client has to send a request's headers.
    pub header_read_timeout: Duration,
    /// A connection with nothing in flight for this long is closed.
    pub idle_timeout: Duration,
    /// Connections served at once.
    pub max_connections: usize,
    /// Connections from one client address at once.
    pub max_connections_per_address: usize,
    /// How long a write, or a response hyper does not take the next frame of, may block.
    pub write_timeout: Duration,
    /// How long a request body may send nothing. The serve loop does not read bodies: the
    /// service applies it (the gateway with tower-http's `RequestBodyTimeoutLayer`).
    pub body_read_timeout: Duration,
    /// How long a shutdown waits for requests in flight.
    pub shutdown_grace: Duration,
}

impl Default for HttpSettings {
    fn default() -> HttpSettings {
        HttpSettings {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_address: DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
        }
    }
}

impl HttpSettings {
    /// Reads the variables above.
    pub fn from_vars(vars: &Vars) -> Result<HttpSettings, ConfigError> {
        Ok(HttpSettings {
            header_read_timeout: vars.parse_or(
                SVC_HTTP_HEADER_READ_TIMEOUT,
                DEFAULT_HEADER_READ_TIMEOUT,
                parse_timeout,
            )?,
            idle_timeout: vars.parse_or(
                SVC_HTTP_IDLE_TIMEOUT,
                DEFAULT_IDLE_TIMEOUT,
                parse_timeout,
            )?,
            max_connections: vars.parse_or(
                SVC_HTTP_MAX_CONNECTIONS,
                DEFAULT_MAX_CONNECTIONS,
                parse_positive,
            )?,
            max_connections_per_address: vars.parse_or(
                SVC_MAX_CONNECTIONS_PER_ADDRESS,
                DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
                parse_positive,
            )?,
            write_timeout: vars.parse_or(
                SVC_WRITE_TIMEOUT,
                DEFAULT_WRITE_TIMEOUT,
                parse_timeout,
            )?,
            body_read_timeout: vars.parse_or(
                SVC_BODY_READ_TIMEOUT,
                DEFAULT_BODY_READ_TIMEOUT,
                parse_timeout,
            )?,
            shutdown_grace: vars.parse_or(
                SVC_SHUTDOWN_GRACE,
                DEFAULT_SHUTDOWN_GRACE,
                parse_timeout,
            )?,
        })
    }
}

/// What the loop serves: a cloneable tower service of hyper requests (an axum `Router`, say).
pub trait Handler:
    tower::Service<
        Request<Incoming>,
        Response = Response<Self::ResponseBody>,
        Error: Into<BoxError>,
        Future: Send + 'static,
    > + Clone
    + Send
    + Sync
    + 'static
{
    /// The body of its responses.
    type ResponseBody: http_body::Body<Data: Send, Error: Into<BoxError>> + Send + 'static;
}

impl<S, B> Handler for S
where
    S: tower::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: http_body::Body<Data: Send, Error: Into<BoxError>> + Send + 'static,
{
    type ResponseBody = B;
}

/// A listener being served. Dropping it leaves the loop running until the drain ends it.
#[derive(Debug)]
pub struct Serving {
    addr: SocketAddr,
    drain: Drain,
    task: JoinHandle<()>,
}

impl Serving {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The drain this listener follows.
    pub fn drain(&self) -> &Drain {
        &self.drain
    }

    /// Starts the drain (if nothing else did) and waits until every connection is closed:
    /// at the latest the grace period plus [`FINAL_WRITE`].
    pub async fn shutdown(self) {
        self.drain.start();
        let _ = self.task.await;
    }

    /// Waits until the loop ends, without starting a drain.
    pub async fn wait(self) {
        let _ = self.task.await;
    }
}

/// Serves `service` on `listener` until `drain` ends it; the peer's [`SocketAddr`] is in every
/// request's extensions. Call it inside a Tokio runtime.
pub fn serve<S: Handler>(
    listener: TcpListener,
    settings: HttpSettings,
    service: S,
    drain: Drain,
) -> std::io::Result<Serving> {
    let addr = listener.local_addr()?;
    let task = tokio::spawn(accept_loop(listener, settings, service, drain.clone()));
    Ok(Serving { addr, drain, task })
}

async fn accept_loop<S: Handler>(
    listener: TcpListener,
    settings: HttpSettings,
    service: S,
    drain: Drain,
) {
    let permits = Arc::new(Semaphore::new(settings.max_connections));
    let per_address = PerAddress::new(settings.max_connections_per_address);
    let mut connections = JoinSet::new();
    let mut phase = drain.subscribe();
    let grace = tokio::time::sleep(Duration::MAX);
    tokio::pin!(grace);
    let mut handled = Phase::Serving;
    loop {
        let now = *phase.borrow();
        if now > handled {
            // The grace period runs from the start of the drain; after the deadline, the final
            // events get FINAL_WRITE to go out.
            let wait = match now {
                Phase::Deadline => FINAL_WRITE,
                _ => settings.shutdown_grace,
            };
            grace.as_mut().reset(tokio::time::Instant::now() + wait);
            handled = now;
        }
        if now >= Phase::Draining && connections.is_empty() {
            // Nothing left in flight: the drain is done before its deadline.
            return;
        }
        // Past the cap the loop stops accepting: new connections wait in the kernel's backlog
        // while the ones being served keep working.
        let accept = async {
            let permit = permits.clone().acquire_owned().await;
            (permit, listener.accept().await)
        };
        tokio::select! {
            (permit, accepted) = accept, if now < Phase::Deadline => match (permit, accepted) {
                (Ok(permit), Ok((stream, peer))) => {
                    // Past its address's cap the connection is closed at once: dropping the
                    // stream is all a refusal costs.
                    if let Some(address) = per_address.admit(peer.ip()) {
                        let slots = conn::Slots { _listener: permit, _address: address };
                        let connection = conn::Connection::new(stream, peer, &settings, drain.subscribe());
                        connections.spawn(connection.serve(service.clone(), slots));
                    }
                }
                (_, Err(error)) => accept_failed(error).await,
                // The semaphore is never closed.
                (Err(_), _) => {}
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            changed = phase.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            () = &mut grace => {
                if handled == Phase::Deadline {
                    tracing::warn!(
                        connections = connections.len(),
                        "shutdown deadline: closing the connections left"
                    );
                    connections.abort_all();
                    while connections.join_next().await.is_some() {}
                    return;
                }
                drain.reach_deadline();
            }
        }
    }
}

/// Out of file descriptors and the like: logged, and retried after a pause instead of in a
/// hot loop. A reset before accept completed is the client's business.
async fn accept_failed(error: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionReset};
    if matches!(error.kind(), ConnectionAborted | ConnectionReset) {
        return;
    }
    tracing::warn!(error = %error, "accept failed");
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// Binds `addr` and serves on it (see [`serve`]).
pub async fn bind_and_serve<S: Handler>(
    addr: SocketAddr,
    settings: HttpSettings,
    service: S,
    drain: Drain,
) -> std::io::Result<Serving> {
    serve(TcpListener::bind(addr).await?, settings, service, drain)
}

/// TCP_NODELAY: without it a response written as head then body waits on the client's
/// delayed ACK, about 40 ms per request.
fn nodelay(stream: &TcpStream) {
    let _ = stream.set_nodelay(true);
}
