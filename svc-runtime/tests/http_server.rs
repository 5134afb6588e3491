//! The serve loop against raw TCP clients: half-sent requests are closed after the
//! header-read timeout, connections past the cap wait while the others keep working, and a
//! kept-alive connection is closed once idle.

#![cfg(feature = "http-server")]

use std::convert::Infallible;
use std::future::Ready;
use std::net::SocketAddr;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::{Request, Response};
use hyper::body::Incoming;
use svc_runtime::http_server::{FINAL_WRITE, HttpSettings, Serving, serve};
use svc_runtime::shutdown::Drain;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: test\r\n\r\n";
/// A generous bound for anything that should happen "soon" on a loaded machine.
const SOON: Duration = Duration::from_secs(10);

/// Answers `ok` to everything.
#[derive(Clone)]
struct Ok200;

impl tower::Service<Request<Incoming>> for Ok200 {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = Ready<Result<Response<String>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Incoming>) -> Self::Future {
        // The loop hands every request its peer's address.
        assert!(request.extensions().get::<SocketAddr>().is_some());
        std::future::ready(Ok(Response::new("ok".to_owned())))
    }
}

async fn start(settings: HttpSettings) -> Serving {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    serve(listener, settings, Ok200, Drain::new()).unwrap()
}

/// Sends one request and reads its whole answer (`ok` is the last thing in it).
async fn exchange(stream: &mut TcpStream) -> std::io::Result<()> {
    stream.write_all(REQUEST).await?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    while !answer.ends_with(b"\r\n\r\nok") {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        answer.extend_from_slice(&buf[..n]);
    }
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{answer:?}");
    Ok(())
}

/// Waits until the server closes `stream` (EOF or reset); false if it stays open past `within`.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 1024];
    let read_to_end = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(within, read_to_end).await.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_requests_are_closed_after_the_header_timeout() {
    let timeout = Duration::from_millis(500);
    let server = start(HttpSettings {
        header_read_timeout: timeout,
        ..HttpSettings::default()
    })
    .await;
    let started = Instant::now();
    let mut slow = Vec::new();
    for _ in 0..300 {
        let mut stream = TcpStream::connect(server.addr()).await.unwrap();
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: test\r\nX-Slow: ")
            .await
            .unwrap();
        slow.push(stream);
    }
    for stream in &mut slow {
        assert!(
            closed_within(stream, SOON).await,
            "a half-sent request stayed open"
        );
    }
    assert!(started.elapsed() >= timeout, "closed before the timeout");
    // The listener still serves whole requests.
    let mut stream = TcpStream::connect(server.addr()).await.unwrap();
    exchange(&mut stream).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_wait_while_the_others_keep_working() {
    let server = start(HttpSettings {
        max_connections: 2,
        ..HttpSettings::default()
    })
    .await;
    let mut first = TcpStream::connect(server.addr()).await.unwrap();
    let mut second = TcpStream::connect(server.addr()).await.unwrap();
    exchange(&mut first).await.unwrap();
    exchange(&mut second).await.unwrap();

    // The third connection is made (the kernel's backlog takes it) but not served.
    let mut third = TcpStream::connect(server.addr()).await.unwrap();
    let waiting = tokio::time::timeout(Duration::from_millis(500), exchange(&mut third)).await;
    assert!(waiting.is_err(), "a connection past the cap was served");

    // The two served connections keep working.
    exchange(&mut first).await.unwrap();
    exchange(&mut second).await.unwrap();

    // One leaves: the waiting connection is served (its request was already sent).
    drop(first);
    let mut buf = Vec::new();
    let answered = tokio::time::timeout(SOON, async {
        let mut chunk = [0u8; 1024];
        while !buf.ends_with(b"\r\n\r\nok") {
            let n = third.read(&mut chunk).await.unwrap();
            assert!(n > 0, "closed instead of served");
            buf.extend_from_slice(&chunk[..n]);
        }
    })
    .await;
    assert!(answered.is_ok(), "the waiting connection was never served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_kept_alive_connection_is_closed() {
    let idle = Duration::from_millis(500);
    let server = start(HttpSettings {
        idle_timeout: idle,
        header_read_timeout: Duration::from_secs(60),
        ..HttpSettings::default()
    })
    .await;
    let mut stream = TcpStream::connect(server.addr()).await.unwrap();
    exchange(&mut stream).await.unwrap();
    let answered = Instant::now();
    assert!(
        closed_within(&mut stream, SOON).await,
        "the idle connection stayed open"
    );
    assert!(answered.elapsed() >= idle, "closed before the idle timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_closes_idle_connections_and_ends() {
    let server = start(HttpSettings::default()).await;
    let mut stream = TcpStream::connect(server.addr()).await.unwrap();
    exchange(&mut stream).await.unwrap();
    let stopped = tokio::time::timeout(SOON, server.shutdown()).await;
    assert!(stopped.is_ok(), "the drain did not end");
    assert!(closed_within(&mut stream, SOON).await);
}

/// Answers with a body that never ends.
#[derive(Clone)]
struct Endless;

impl tower::Service<Request<Incoming>> for Endless {
    type Response = Response<
        http_body_util::StreamBody<
            futures_util::stream::Pending<Result<http_body::Frame<bytes::Bytes>, Infallible>>,
        >,
    >;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _request: Request<Incoming>) -> Self::Future {
        let body = http_body_util::StreamBody::new(futures_util::stream::pending());
        std::future::ready(Ok(Response::new(body)))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_still_open_at_the_deadline_is_cut_after_the_final_write() {
    let grace = Duration::from_secs(1);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let settings = HttpSettings {
        shutdown_grace: grace,
        // Far shorter than the grace period: it must not cut an answer in flight.
        header_read_timeout: Duration::from_millis(100),
        ..HttpSettings::default()
    };
    let drain = Drain::new();
    let server = serve(listener, settings, Endless, drain.clone()).unwrap();
    let mut stream = TcpStream::connect(server.addr()).await.unwrap();
    stream.write_all(REQUEST).await.unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");

    let started = Instant::now();
    let stopping = tokio::spawn(server.shutdown());
    assert!(
        !closed_within(&mut stream, grace - Duration::from_millis(300)).await,
        "an answer in flight was cut before the deadline"
    );
    drain.reached(svc_runtime::shutdown::Phase::Deadline).await;
    assert!(started.elapsed() >= grace - Duration::from_millis(50));
    assert!(closed_within(&mut stream, SOON).await);
    let stopped = tokio::time::timeout(SOON, stopping).await;
    assert!(stopped.is_ok(), "the drain did not end");
    // The connection was dropped FINAL_WRITE after the deadline.
    assert!(started.elapsed() >= grace + FINAL_WRITE - Duration::from_millis(50));
}
