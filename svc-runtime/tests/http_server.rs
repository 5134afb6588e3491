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

async fn start_with_header_timeout(timeout: Duration) -> Serving {
    start(HttpSettings {
        header_read_timeout: timeout,
        ..HttpSettings::default()
    })
    .await
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
    let server = start_with_header_timeout(timeout).await;
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

/// Answers every request with `size` bytes, as one frame, or as `chunks` frames `every` apart.
#[derive(Clone)]
struct Sized {
    size: usize,
    chunks: usize,
    every: Duration,
}

type Frames = std::pin::Pin<
    Box<dyn futures_util::Stream<Item = Result<http_body::Frame<bytes::Bytes>, Infallible>> + Send>,
>;

impl tower::Service<Request<Incoming>> for Sized {
    type Response = Response<http_body_util::StreamBody<Frames>>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _request: Request<Incoming>) -> Self::Future {
        let (chunk, every) = (self.size / self.chunks, self.every);
        let frames = futures_util::stream::unfold(self.chunks, move |left| async move {
            if left == 0 {
                return None;
            }
            tokio::time::sleep(every).await;
            let frame = http_body::Frame::data(bytes::Bytes::from(vec![b'x'; chunk]));
            Some((Ok(frame), left - 1))
        });
        let body = http_body_util::StreamBody::new(Box::pin(frames) as Frames);
        std::future::ready(Ok(Response::new(body)))
    }
}

const WRITE_TIMEOUT: Duration = Duration::from_millis(800);

async fn start_sized(sized: Sized, settings: HttpSettings) -> Serving {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    serve(listener, settings, sized, Drain::new()).unwrap()
}

fn slow_client_settings() -> HttpSettings {
    HttpSettings {
        write_timeout: WRITE_TIMEOUT,
        header_read_timeout: Duration::from_secs(60),
        ..HttpSettings::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_is_closed_the_header_timeout_after_accept() {
    let timeout = Duration::from_millis(500);
    let server = start_with_header_timeout(timeout).await;
    let started = Instant::now();
    let mut silent = TcpStream::connect(server.addr()).await.unwrap();
    assert!(
        closed_within(&mut silent, SOON).await,
        "a silent connection stayed open"
    );
    let held = started.elapsed();
    assert!(held >= timeout, "closed before the timeout");
    // Not the idle timeout (60 s): the header timeout, counted from accept.
    assert!(held < Duration::from_secs(5), "held {held:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http1_client_that_never_reads_is_closed_after_the_write_timeout() {
    let big = Sized {
        size: 32 << 20,
        chunks: 32,
        every: Duration::ZERO,
    };
    let server = start_sized(big, slow_client_settings()).await;
    let mut stream = TcpStream::connect(server.addr()).await.unwrap();
    stream.write_all(REQUEST).await.unwrap();
    let sent = Instant::now();
    // The socket buffers fill; then nothing moves until the server gives up.
    let mut probe = [0u8; 1];
    stream.read_exact(&mut probe).await.unwrap();
    tokio::time::sleep(WRITE_TIMEOUT * 2).await;
    assert!(
        closed_within(&mut stream, SOON).await,
        "the stalled connection stayed open"
    );
    assert!(sent.elapsed() >= WRITE_TIMEOUT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_stream_without_window_is_closed_after_the_write_timeout() {
    let small = Sized {
        size: 16,
        chunks: 1,
        every: Duration::ZERO,
    };
    let server = start_sized(small, slow_client_settings()).await;
    let tcp = TcpStream::connect(server.addr()).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .initial_stream_window_size(0)
            .handshake::<_, http_body_util::Empty<bytes::Bytes>>(hyper_util::rt::TokioIo::new(tcp))
            .await
            .unwrap();
    let connection = tokio::spawn(connection);
    let request = Request::get("http://test/")
        .body(Default::default())
        .unwrap();
    // The head is not flow-controlled: it arrives; the body never can.
    let response = sender.send_request(request).await.unwrap();
    let asked = Instant::now();
    assert_eq!(response.status(), 200);
    let ended = tokio::time::timeout(SOON, connection).await;
    assert!(ended.is_ok(), "the zero-window connection stayed open");
    let held = asked.elapsed();
    assert!(
        held >= WRITE_TIMEOUT - Duration::from_millis(50),
        "closed after {held:?}"
    );
    drop(response);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_whose_client_reads_outlives_the_write_timeout() {
    // Ten events, 200 ms apart: twice the write timeout in all, with the client reading.
    let events = Sized {
        size: 10,
        chunks: 10,
        every: Duration::from_millis(200),
    };
    let server = start_sized(events, slow_client_settings()).await;
    let mut stream = TcpStream::connect(server.addr()).await.unwrap();
    stream.write_all(REQUEST).await.unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    // Chunked encoding ends with an empty chunk.
    while !answer.ends_with(b"0\r\n\r\n") {
        let n = tokio::time::timeout(SOON, stream.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "closed mid-stream after {:?}", started.elapsed());
        answer.extend_from_slice(&buf[..n]);
    }
    assert!(started.elapsed() > WRITE_TIMEOUT);
    assert_eq!(answer.iter().filter(|&&b| b == b'x').count(), 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_address_cap_are_closed_at_accept() {
    let server = start(HttpSettings {
        max_connections_per_address: 3,
        ..HttpSettings::default()
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut stream = TcpStream::connect(server.addr()).await.unwrap();
        exchange(&mut stream).await.unwrap();
        held.push(stream);
    }
    let mut fourth = TcpStream::connect(server.addr()).await.unwrap();
    assert!(
        closed_within(&mut fourth, SOON).await,
        "a fourth connection was kept"
    );

    // Another address is counted apart (all of 127.0.0.0/8 is loopback).
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
    let mut other = socket.connect(server.addr()).await.unwrap();
    exchange(&mut other).await.unwrap();

    // One leaves: its address may connect again.
    held.pop();
    let mut again = None;
    for _ in 0..100 {
        let mut stream = TcpStream::connect(server.addr()).await.unwrap();
        if exchange(&mut stream).await.is_ok() {
            again = Some(stream);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        again.is_some(),
        "the address stayed at its cap after a connection left"
    );
}
