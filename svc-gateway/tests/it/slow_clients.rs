//! Slow and silent clients cannot hold the door: thousands of HTTP/2 connections that grant no
//! window, HTTP/1 connections that never read, and silent TCP connections to the auth server's
//! gRPC port, while a normal client's `/health`, chat call and ValidateToken each answer within
//! a second, and every held connection is closed within the (shortened) write or handshake
//! timeout.
//!
//! The attackers come from their own loopback addresses (all of 127.0.0.0/8 is loopback), the
//! normal client from 127.0.0.1, as on a real network where the attacker is one host among many.

use crate::support;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Request;
use http_body_util::Empty;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::json;
use support::stack::{Stack, body};
use support::{LIVE_MODEL, Script, client, completion, send};
use svc_proto::v1::ValidateTokenRequest;
use svc_proto::v1::auth_service_client::AuthServiceClient;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

/// Slow-read connections against the gateway, half HTTP/2 and half HTTP/1, as in the report.
const SLOW_READERS: usize = 4_100;
/// Silent connections against the gRPC port.
const SILENT: usize = 4_100;
/// The shortened timeouts the servers run with here.
const WRITE_TIMEOUT: Duration = Duration::from_secs(6);
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(6);
/// What a loaded two-core machine may add to a timeout before the close is seen.
const SLACK: Duration = Duration::from_secs(3);
/// What a normal client's call may take while the attack is held.
const NORMAL: Duration = Duration::from_secs(1);
/// Connection attempts in flight at once: the listen backlog is 1024.
const CONNECTING: usize = 256;
/// The per-address cap the servers run with (the default).
const PER_ADDRESS: usize = 256;

const H2_FROM: [Ipv4Addr; 2] = [Ipv4Addr::new(127, 0, 0, 2), Ipv4Addr::new(127, 0, 0, 3)];
const H1_FROM: [Ipv4Addr; 2] = [Ipv4Addr::new(127, 0, 0, 4), Ipv4Addr::new(127, 0, 0, 5)];
const GRPC_FROM: [Ipv4Addr; 2] = [Ipv4Addr::new(127, 0, 0, 6), Ipv4Addr::new(127, 0, 0, 7)];

/// Four requests for the largest document the gateway serves (350 KB of answers), sent at
/// once by a client that then reads nothing. Whether the server's socket buffer takes it all
/// (the connection then waits for a next request under the header-read timeout) or the write
/// blocks (the write timeout), the connection must go within the shortened timeouts.
fn pipelined() -> Vec<u8> {
    b"GET /openapi.json HTTP/1.1\r\nHost: gateway\r\n\r\n".repeat(4)
}

/// What became of one attacking connection.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    /// Closed at accept (its address was over the cap).
    Refused,
    /// Served, then closed this long after the server was left waiting.
    Closed(Duration),
    /// Still open at the end of the bound.
    Open,
}

/// Counts the connections of one kind the servers hold right now, and the most at once.
#[derive(Default)]
struct Held {
    now: AtomicUsize,
    peak: AtomicUsize,
}

impl Held {
    fn enter(&self) {
        let now = self.now.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }
    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::Relaxed);
    }
    fn now(&self) -> usize {
        self.now.load(Ordering::Relaxed)
    }
    fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }
}

#[derive(Default)]
struct HeldByKind {
    h2: Arc<Held>,
    h1: Arc<Held>,
    grpc: Arc<Held>,
}

impl HeldByKind {
    fn now(&self) -> usize {
        self.h2.now() + self.h1.now() + self.grpc.now()
    }
}

/// Raises the soft file-descriptor limit to what the attack needs (or the hard limit).
fn raise_fd_limit(needed: u64) -> u64 {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let current = limit.current.unwrap_or(u64::MAX);
    if current >= needed {
        return current;
    }
    let raised = limit.maximum.map_or(needed, |hard| hard.min(needed));
    let _ = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(raised),
            maximum: limit.maximum,
        },
    );
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

async fn connect_from(
    from: Ipv4Addr,
    to: SocketAddr,
    recv_buffer: Option<u32>,
) -> Option<TcpStream> {
    let socket = TcpSocket::new_v4().ok()?;
    if let Some(size) = recv_buffer {
        socket.set_recv_buffer_size(size).ok()?;
    }
    socket.bind(SocketAddr::new(IpAddr::V4(from), 0)).ok()?;
    tokio::time::timeout(Duration::from_secs(10), socket.connect(to))
        .await
        .ok()?
        .ok()
}

/// An HTTP/2 client that asks `/health` and grants the answer no window.
async fn zero_window(
    from: Ipv4Addr,
    to: SocketAddr,
    held: Arc<Held>,
    connecting: OwnedSemaphorePermit,
) -> Outcome {
    let Some(tcp) = connect_from(from, to, None).await else {
        return Outcome::Refused;
    };
    let Ok((mut sender, connection)) =
        hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .initial_stream_window_size(0)
            .handshake::<_, Empty<Bytes>>(TokioIo::new(tcp))
            .await
    else {
        return Outcome::Refused;
    };
    let mut connection = tokio::spawn(connection);
    let request = Request::get("http://gateway/health")
        .body(Empty::new())
        .unwrap();
    let asked = tokio::select! {
        response = sender.send_request(request) => response.ok(),
        _ = &mut connection => None,
    };
    // The head is not flow-controlled; a refused connection never gets one.
    let Some(response) = asked else {
        return Outcome::Refused;
    };
    let since = Instant::now();
    held.enter();
    drop(connecting);
    let closed = tokio::time::timeout(WRITE_TIMEOUT + SLACK, connection).await;
    held.leave();
    drop(response);
    match closed {
        Ok(_) => Outcome::Closed(since.elapsed()),
        Err(_) => Outcome::Open,
    }
}

/// An HTTP/1 client that pipelines large requests and never reads, until the bound; then it
/// reads, and the connection must already be closed (an open one would now be answered and
/// kept alive).
async fn never_reads(
    from: Ipv4Addr,
    to: SocketAddr,
    held: Arc<Held>,
    connecting: OwnedSemaphorePermit,
) -> Outcome {
    let Some(mut tcp) = connect_from(from, to, Some(4096)).await else {
        return Outcome::Refused;
    };
    if tcp.write_all(&pipelined()).await.is_err() {
        return Outcome::Refused;
    }
    // A served connection starts answering; a refused one ends. `peek` reads nothing away.
    let mut first = [0u8; 1];
    match tokio::time::timeout(Duration::from_secs(10), tcp.peek(&mut first)).await {
        Ok(Ok(n)) if n > 0 => {}
        _ => return Outcome::Refused,
    }
    let since = Instant::now();
    held.enter();
    drop(connecting);
    tokio::time::sleep(WRITE_TIMEOUT + SLACK).await;
    held.leave();
    let mut buf = vec![0u8; 64 * 1024];
    let drained = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    match drained {
        // Closed by the server before the client read again.
        Ok(()) => Outcome::Closed(since.elapsed().min(WRITE_TIMEOUT + SLACK)),
        Err(_) => Outcome::Open,
    }
}

/// A TCP connection to the gRPC port that never sends a byte.
async fn silent(
    from: Ipv4Addr,
    to: SocketAddr,
    held: Arc<Held>,
    connecting: OwnedSemaphorePermit,
) -> Outcome {
    let Some(mut tcp) = connect_from(from, to, None).await else {
        return Outcome::Refused;
    };
    let since = Instant::now();
    // An HTTP/2 server speaks first (its SETTINGS); a refused connection just ends.
    let mut buf = [0u8; 1024];
    match tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut buf)).await {
        Ok(Ok(n)) if n > 0 => {}
        _ => return Outcome::Refused,
    }
    held.enter();
    drop(connecting);
    let closed = tokio::time::timeout(HANDSHAKE_TIMEOUT + SLACK, async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    held.leave();
    match closed {
        Ok(()) => Outcome::Closed(since.elapsed()),
        Err(_) => Outcome::Open,
    }
}

#[derive(Debug, Default)]
struct Tally {
    refused: usize,
    closed: usize,
    open: usize,
    longest: Duration,
}

fn tally(outcomes: &[Outcome]) -> Tally {
    let mut tally = Tally::default();
    for outcome in outcomes {
        match outcome {
            Outcome::Refused => tally.refused += 1,
            Outcome::Closed(after) => {
                tally.closed += 1;
                tally.longest = tally.longest.max(*after);
            }
            Outcome::Open => tally.open += 1,
        }
    }
    tally
}

async fn within<T>(what: &str, call: impl std::future::Future<Output = T>) -> (T, Duration) {
    let started = Instant::now();
    let result = tokio::time::timeout(NORMAL, call)
        .await
        .unwrap_or_else(|_| panic!("{what} took more than {NORMAL:?} during the attack"));
    (result, started.elapsed())
}

// The peaks are counted from the clients' side, where a close is seen a little late, and the
// cap is reached exactly: beside other tests of the binary, on two cores, the late closes
// overlap the next connections and the count runs past the cap. `scripts/test` runs it alone:
// `cargo test -p svc-gateway --test it -- --ignored --test-threads=1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run alone: a flood at the connection caps, counted from the clients' side"]
async fn slow_and_silent_clients_cannot_lock_out_a_normal_client() {
    let limit = raise_fd_limit(((SLOW_READERS + SILENT) * 2 + 2_000) as u64);
    eprintln!("file descriptor limit: {limit}");

    let write_timeout = format!("{}s", WRITE_TIMEOUT.as_secs());
    let stack = Stack::start_tuned(Script::Json(200, completion("hi"), vec![]), |config| {
        config.http.write_timeout = WRITE_TIMEOUT;
        config.grpc_listener.handshake_timeout = HANDSHAKE_TIMEOUT;
    })
    .await;
    let gateway = stack
        .gateway(&[
            ("SVC_WRITE_TIMEOUT", write_timeout.as_str()),
            ("SVC_HTTP_HEADER_READ_TIMEOUT", write_timeout.as_str()),
        ])
        .await;
    let gateway_addr = gateway.addr();
    let grpc_addr = stack.auth.grpc_addr;

    // The normal client has used the gateway before: its token is verified, the gateway's
    // pools are warm. What the attack must not take away is the next call.
    let http = client();
    let chat_body = json!({"model": LIVE_MODEL, "messages": [{"role": "user", "content": "hi"}]});
    let warm = send(&http, stack.chat(&gateway).body(body(&chat_body)).unwrap()).await;
    assert_eq!(warm.status, 200);

    let held = HeldByKind::default();
    let connecting = Arc::new(Semaphore::new(CONNECTING));
    let mut attack: JoinSet<(&str, Outcome)> = JoinSet::new();
    let started = Instant::now();
    for i in 0..SILENT.max(SLOW_READERS) {
        if i < SILENT {
            let permit = connecting.clone().acquire_owned().await.unwrap();
            let held = held.grpc.clone();
            attack.spawn(async move {
                (
                    "grpc",
                    silent(GRPC_FROM[i % 2], grpc_addr, held, permit).await,
                )
            });
        }
        if i < SLOW_READERS {
            let permit = connecting.clone().acquire_owned().await.unwrap();
            let from = i / 2 % 2;
            if i % 2 == 0 {
                let held = held.h2.clone();
                attack.spawn(async move {
                    let outcome = zero_window(H2_FROM[from], gateway_addr, held, permit);
                    ("h2", outcome.await)
                });
            } else {
                let held = held.h1.clone();
                attack.spawn(async move {
                    let outcome = never_reads(H1_FROM[from], gateway_addr, held, permit);
                    ("h1", outcome.await)
                });
            }
        }
    }
    // Every attacker has connected once every connecting slot is free again.
    let all = connecting
        .acquire_many(CONNECTING as u32)
        .await
        .expect("semaphore open");
    drop(all);
    let opened_in = started.elapsed();
    let held_during = held.now();
    assert!(held_during > 0, "no attacking connection was held");

    // A normal client, from 127.0.0.1, while the attack is held.
    let (health, health_took) = within(
        "GET /health",
        send(
            &http,
            Request::get(format!("{}/health", gateway.url()))
                .body(Default::default())
                .unwrap(),
        ),
    )
    .await;
    assert_eq!(health.status, 200);
    let (chat, chat_took) = within(
        "a chat call",
        send(&http, stack.chat(&gateway).body(body(&chat_body)).unwrap()),
    )
    .await;
    assert_eq!(
        chat.status,
        200,
        "{:?}",
        String::from_utf8_lossy(&chat.body)
    );
    let (validated, validate_took) = within("ValidateToken on a new connection", async {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{grpc_addr}"))?
            .connect()
            .await?;
        let mut auth = AuthServiceClient::new(channel);
        auth.validate_token(ValidateTokenRequest {
            access_token: stack.seed.chat_token.clone(),
            agent_id: None,
        })
        .await
        .map_err(Into::<Box<dyn std::error::Error + Send + Sync>>::into)
    })
    .await;
    let validated = validated.expect("ValidateToken answers");
    assert_eq!(validated.into_inner().org_id, stack.seed.org_id.to_string());
    let held_after_checks = held.now();

    let mut outcomes: std::collections::HashMap<&str, Vec<Outcome>> = Default::default();
    let bound = WRITE_TIMEOUT.max(HANDSHAKE_TIMEOUT) + SLACK * 4;
    while let Some(joined) = tokio::time::timeout(bound, attack.join_next())
        .await
        .expect("the attackers finish within their bound")
    {
        let (kind, outcome) = joined.expect("attacker task");
        outcomes.entry(kind).or_default().push(outcome);
    }
    let (h2, h1, grpc) = (
        tally(&outcomes["h2"]),
        tally(&outcomes["h1"]),
        tally(&outcomes["grpc"]),
    );
    eprintln!(
        "opened {} slow readers and {} silent gRPC connections in {opened_in:?}; held then: \
         {held_during}, after the normal calls: {held_after_checks}; /health {health_took:?}, \
         chat {chat_took:?}, ValidateToken {validate_took:?}\nh2 {h2:?}\nh1 {h1:?}\ngrpc {grpc:?}",
        SLOW_READERS, SILENT
    );
    // An HTTP/1 client sees its connection close only when it reads again, so its count of
    // held connections runs late: only the others bound the connections held at once.
    for (name, tally, peak, from, timeout) in [
        (
            "HTTP/2 zero-window",
            &h2,
            Some(held.h2.peak()),
            H2_FROM.len(),
            WRITE_TIMEOUT,
        ),
        ("HTTP/1 never-read", &h1, None, H1_FROM.len(), WRITE_TIMEOUT),
        (
            "silent gRPC",
            &grpc,
            Some(held.grpc.peak()),
            GRPC_FROM.len(),
            HANDSHAKE_TIMEOUT,
        ),
    ] {
        eprintln!("{name}: at most {peak:?} held at once");
        assert_eq!(
            tally.open, 0,
            "{name}: connections still open past the timeout"
        );
        assert!(tally.closed > 0, "{name}: none was served");
        // The cap bounds connections at once: one closed frees its place for another.
        assert!(
            peak.is_none_or(|peak| peak <= from * PER_ADDRESS),
            "{name}: {peak:?} held at once from {from} addresses"
        );
        assert!(
            tally.refused > 0,
            "{name}: none refused at its address's cap"
        );
        assert!(
            tally.longest <= timeout + SLACK,
            "{name}: one was held {:?}",
            tally.longest
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_body_that_stalls_answers_408_in_the_envelope() {
    let stall = Duration::from_millis(500);
    let env = support::Env::mock(&[("SVC_BODY_READ_TIMEOUT", "500ms")]).await;
    let mut tcp = TcpStream::connect(env.gateway.addr()).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer {}\r\n\
         X-SVC-Agent-ID: {}\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n\
         {{\"model\": \"svc-mock-1\",",
        env.world.chat_token, env.world.agent_id
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    let sent = Instant::now();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "the stalled request was neither answered nor closed"
    );
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains(r#""code":"REQUEST_TIMEOUT""#), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("x-request-id"),
        "{answer}"
    );
    assert!(sent.elapsed() >= stall, "answered before the body timeout");
}
