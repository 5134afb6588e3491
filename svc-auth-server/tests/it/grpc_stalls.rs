//! The real binary's gRPC port closes a connection whose streams wait on the client for
//! `SVC_WRITE_TIMEOUT`: a call whose request never finishes, and a call whose answer gets no
//! window. The client answers every keepalive ping, so only the streams' stall can close it.
//! Meanwhile a normal ValidateToken answers, and its long-lived connection outlives the stalls.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::common::*;
use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::{TokioExecutor, TokioIo};
use svc_auth_server::config::Config;

/// The write timeout the server runs with.
const WRITE_TIMEOUT: Duration = Duration::from_secs(1);
/// Bound on a stalled connection's close, past the write timeout (the check's granularity and
/// a loaded machine).
const SLACK: Duration = Duration::from_secs(4);
/// Bound on a normal call while the stalls are held.
const ANSWERED_WITHIN: Duration = Duration::from_secs(1);
/// Stalled connections of each kind.
const STALLED: usize = 8;

type Body = BoxBody<Bytes, Infallible>;

/// ValidateToken of `token` as a gRPC request body: one uncompressed length-prefixed message.
fn validate_frame(token: &str) -> Bytes {
    grpc_message(0, &validate_request(token))
}

/// Opens an HTTP/2 connection (`window` for each stream's answers), sends one ValidateToken
/// with `body`, and returns the connection's task once the call is sent.
async fn stalled_call(
    addr: SocketAddr,
    window: u32,
    body: Body,
) -> tokio::task::JoinHandle<Result<(), hyper::Error>> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .initial_stream_window_size(window)
        .handshake::<_, Body>(TokioIo::new(tcp))
        .await
        .unwrap();
    let connection = tokio::spawn(connection);
    let request = http::Request::post(format!(
        "http://{addr}/svc.auth.v1.AuthService/ValidateToken"
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .body(body)
    .unwrap();
    // The answer, if any, is left unread: its head is not flow-controlled, its body is.
    tokio::spawn(async move {
        let _answer = sender.send_request(request).await;
        std::future::pending::<()>().await;
    });
    connection
}

/// A request body that sends its first bytes and then nothing, never ending.
fn never_finished(token: &str) -> Body {
    let first = validate_frame(token).slice(..8);
    let frames =
        futures_util::stream::iter([Ok(Frame::data(first))]).chain(futures_util::stream::pending());
    BodyExt::boxed(StreamBody::new(frames))
}

#[tokio::test]
async fn streams_waiting_on_the_client_lose_their_connection() {
    let db = migrated_db().await;
    let seed = seed_org(&Config::local(db.url()), None).await;
    let write_timeout = format!("{}s", WRITE_TIMEOUT.as_secs());
    let serving = serve_binary(&[
        ("POSTGRES_DSN", db.url()),
        ("SVC_WRITE_TIMEOUT", &write_timeout),
    ])
    .await;
    let addr = serving.grpc_addr;
    let mut client = connect(addr).await;
    validate(&mut client, &seed.chat_token).await.unwrap();

    let opened = Instant::now();
    let mut stalled = Vec::new();
    for _ in 0..STALLED {
        let unfinished = stalled_call(addr, 65_535, never_finished(&seed.chat_token)).await;
        stalled.push(("request never finished", unfinished));
        let full = BodyExt::boxed(Full::new(validate_frame(&seed.chat_token)));
        stalled.push(("answer given no window", stalled_call(addr, 0, full).await));
    }

    // While they are held, a normal call answers promptly.
    let started = Instant::now();
    let answered = tokio::time::timeout(ANSWERED_WITHIN, validate(&mut client, &seed.chat_token))
        .await
        .expect("ValidateToken answers while streams are stalled");
    answered.unwrap();
    assert!(started.elapsed() < ANSWERED_WITHIN);

    for (kind, connection) in stalled {
        let bound = (opened + WRITE_TIMEOUT + SLACK).saturating_duration_since(Instant::now());
        tokio::time::timeout(bound, connection)
            .await
            .unwrap_or_else(|_| panic!("{kind}: the connection is still open"))
            .unwrap()
            .ok();
    }
    // Closing them took the write timeout, not less: the server waited for progress first.
    assert!(opened.elapsed() >= WRITE_TIMEOUT);

    // The normal client's connection, idle between calls all along, was left alone.
    validate(&mut client, &seed.chat_token).await.unwrap();
    drop(serving);
}
