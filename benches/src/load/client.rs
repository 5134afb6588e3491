//! The load generator: a fixed number of HTTP/1.1 keep-alive connections to one loopback
//! target, each with one request in flight, sharing a bounded pool of request tickets.
//!
//! A closed loop (each connection sends its next request once the previous answer is read)
//! measures latency without piling up a queue the target never asked for; the ticket counter
//! and the deadline bound the run in count and in time.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HOST};
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::report::PhaseStats;
use super::upstream::CHAT_PATH;

/// The request body of every call, direct or through the gateway: a small chat completion.
pub const BODY: &str = r#"{"model":"svc-load-1","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello."}],"temperature":0.2,"max_tokens":16}"#;
/// One request (connect, send, read the whole answer) never takes longer than this.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of an unexpected answer a startup check quotes.
const QUOTE_BYTES: usize = 300;

/// Where requests go, and the headers that authenticate them there.
#[derive(Debug, Clone)]
pub struct Target {
    /// `direct` or `gateway`, for the report.
    pub name: &'static str,
    /// A loopback address.
    pub addr: SocketAddr,
    /// Sent on every request, besides the host, content type and length.
    pub headers: HeaderMap,
}

/// How many requests a phase sends, how, and until when at the latest.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Requests to send.
    pub requests: usize,
    /// Connections, each with one request in flight.
    pub concurrency: usize,
    /// A fresh `Idempotency-Key` on every request.
    pub idempotency: bool,
    /// No request starts after this instant.
    pub deadline: Instant,
}

/// What one connection's loop saw.
#[derive(Debug, Default)]
struct Tally {
    sent: usize,
    latencies: Vec<Duration>,
    failures: BTreeMap<String, usize>,
}

impl Tally {
    fn fail(&mut self, cause: impl Into<String>) {
        *self.failures.entry(cause.into()).or_default() += 1;
    }
}

/// Runs `plan` against `target` and summarises it.
pub async fn run(target: &Target, plan: Plan) -> PhaseStats {
    let tickets = Arc::new(AtomicUsize::new(0));
    let target = Arc::new(target.clone());
    let started = Instant::now();
    let workers: Vec<_> = (0..plan.concurrency.max(1))
        .map(|_| tokio::spawn(worker(target.clone(), tickets.clone(), plan)))
        .collect();
    let mut total = Tally::default();
    for worker in workers {
        match worker.await {
            Ok(tally) => {
                total.sent += tally.sent;
                total.latencies.extend(tally.latencies);
                for (cause, count) in tally.failures {
                    *total.failures.entry(cause).or_default() += count;
                }
            }
            Err(_) => total.fail("client task ended abnormally"),
        }
    }
    PhaseStats::new(
        target.name,
        total.sent,
        total.latencies,
        total.failures,
        started.elapsed(),
    )
}

async fn worker(target: Arc<Target>, tickets: Arc<AtomicUsize>, plan: Plan) -> Tally {
    let mut tally = Tally::default();
    let mut connection: Option<SendRequest<Full<Bytes>>> = None;
    while tickets.fetch_add(1, Ordering::Relaxed) < plan.requests && Instant::now() < plan.deadline
    {
        tally.sent += 1;
        let request = request(&target, plan.idempotency);
        let started = Instant::now();
        let outcome = tokio::time::timeout(REQUEST_TIMEOUT, async {
            let sender = match connection.take() {
                Some(sender) if !sender.is_closed() => connection.insert(sender),
                _ => connection.insert(connect(target.addr).await.map_err(|_| "connect")?),
            };
            exchange(sender, request).await.map_err(|_| "transport")
        })
        .await;
        match outcome {
            Ok(Ok((StatusCode::OK, _))) => tally.latencies.push(started.elapsed()),
            Ok(Ok((status, _))) => tally.fail(format!("status {}", status.as_u16())),
            Ok(Err(cause)) => {
                connection = None;
                tally.fail(cause);
            }
            Err(_) => {
                // The connection may still carry the late answer: never reuse it.
                connection = None;
                tally.fail("timeout");
            }
        }
    }
    tally
}

/// Sends requests whose bearer token comes from `bearer` back to back on one connection until
/// `stop`, counting the answers in `answered`. Answers are read, not judged: a flood expects
/// refusals.
pub async fn flood(
    target: Target,
    bearer: impl Fn() -> String,
    stop: Arc<AtomicBool>,
    answered: Arc<AtomicUsize>,
) {
    let mut connection: Option<SendRequest<Full<Bytes>>> = None;
    while !stop.load(Ordering::Relaxed) {
        let mut request = request(&target, false);
        if let Ok(value) = HeaderValue::from_str(&format!("Bearer {}", bearer())) {
            request.headers_mut().insert(AUTHORIZATION, value);
        }
        let sender = match connection.take() {
            Some(sender) if !sender.is_closed() => connection.insert(sender),
            _ => match connect(target.addr).await {
                Ok(sender) => connection.insert(sender),
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        match tokio::time::timeout(REQUEST_TIMEOUT, exchange(sender, request)).await {
            Ok(Ok(_)) => {
                answered.fetch_add(1, Ordering::Relaxed);
            }
            _ => connection = None,
        }
    }
}

/// One chat completion to `target`, as a client sends it.
pub fn request(target: &Target, idempotency: bool) -> Request<Full<Bytes>> {
    let mut request = Request::new(Full::new(Bytes::from_static(BODY.as_bytes())));
    *request.method_mut() = Method::POST;
    *request.uri_mut() = Uri::from_static(CHAT_PATH);
    let headers = request.headers_mut();
    headers.extend(target.headers.clone());
    if let Ok(host) = HeaderValue::from_str(&target.addr.to_string()) {
        headers.insert(HOST, host);
    }
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CONTENT_LENGTH, HeaderValue::from(BODY.len()));
    if idempotency {
        let key = format!("svc-load-{}", uuid::Uuid::new_v4().simple());
        if let Ok(key) = HeaderValue::from_str(&key) {
            headers.insert("idempotency-key", key);
        }
    }
    request
}

/// A keep-alive HTTP/1.1 connection to `addr`, its driver spawned.
pub async fn connect(addr: SocketAddr) -> std::io::Result<SendRequest<Full<Bytes>>> {
    let stream = TcpStream::connect(addr).await?;
    // The request head and body go out as two writes; without NODELAY the second waits on
    // the server's delayed ACK and every request gains about 40 ms.
    stream.set_nodelay(true)?;
    let (sender, connection) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

/// Sends `request` on `sender` and reads the whole answer.
async fn exchange(
    sender: &mut SendRequest<Full<Bytes>>,
    request: Request<Full<Bytes>>,
) -> Result<(StatusCode, Bytes), hyper::Error> {
    sender.ready().await?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, body))
}

/// Sends one request on a new connection and returns a one-line reason unless it succeeds,
/// so a misconfigured stack is named before any load is sent.
pub async fn check(target: &Target, idempotency: bool) -> Result<(), String> {
    let answer = tokio::time::timeout(REQUEST_TIMEOUT, async {
        let mut sender = connect(target.addr)
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        exchange(&mut sender, request(target, idempotency))
            .await
            .map_err(|e| format!("no answer: {e}"))
    })
    .await
    .map_err(|_| format!("no answer within {REQUEST_TIMEOUT:?}"))??;
    match answer {
        (StatusCode::OK, _) => Ok(()),
        (status, body) => {
            let quoted = String::from_utf8_lossy(&body[..body.len().min(QUOTE_BYTES)]).into_owned();
            Err(format!("answered {status}: {quoted}"))
        }
    }
}
