//! ValidateToken's answers on the wire, from a client speaking HTTP/2 by hand: the plain call
//! (answered in front of tonic's routes) has tonic's shape, and every call that is not plain
//! (a split, compressed, oversized or undecodable message) gets tonic's own answer.

use std::convert::Infallible;
use std::net::SocketAddr;

use crate::common::*;
use bytes::Bytes;
use http::HeaderMap;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message;
use svc_proto::v1;

type Body = BoxBody<Bytes, Infallible>;

/// What came back: the head's headers, the DATA, and the trailers.
struct Answer {
    headers: HeaderMap,
    data: Bytes,
    trailers: Option<HeaderMap>,
}

impl Answer {
    /// `grpc-status`, from the trailers or, for a trailers-only answer, the head.
    fn code(&self) -> String {
        let status = match &self.trailers {
            Some(trailers) => trailers.get("grpc-status"),
            None => self.headers.get("grpc-status"),
        };
        status.unwrap().to_str().unwrap().to_owned()
    }
}

/// One ValidateToken whose body is `frames`, sent as separate DATA frames.
async fn call(addr: SocketAddr, extra: &[(&str, &str)], frames: Vec<Bytes>) -> Answer {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .handshake::<_, Body>(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(connection);
    let frames = frames.into_iter().map(|data| Ok(Frame::data(data)));
    let body = BodyExt::boxed(StreamBody::new(futures_util::stream::iter(frames)));
    let mut request = http::Request::post(format!(
        "http://{addr}/svc.auth.v1.AuthService/ValidateToken"
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers");
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let response = sender
        .send_request(request.body(body).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let (head, body) = response.into_parts();
    let collected = body.collect().await.unwrap();
    let trailers = collected.trailers().cloned();
    Answer {
        headers: head.headers,
        data: collected.to_bytes(),
        trailers,
    }
}

/// The one message of a successful answer.
fn answered(answer: &Answer) -> v1::ValidateTokenResponse {
    assert_eq!(answer.code(), "0");
    assert_eq!(answer.data[0], 0, "uncompressed");
    let length = u32::from_be_bytes(answer.data[1..5].try_into().unwrap());
    assert_eq!(answer.data.len(), 5 + length as usize, "one message");
    v1::ValidateTokenResponse::decode(&answer.data[5..]).unwrap()
}

#[tokio::test]
async fn a_plain_call_is_answered_in_tonics_shape() {
    let h = start().await;
    let addr = h.server.grpc_addr;
    let answer = call(
        addr,
        &[],
        vec![grpc_message(0, &validate_request(&h.seed.chat_token))],
    )
    .await;
    assert_eq!(answer.headers["content-type"], "application/grpc");
    assert!(answer.headers.get("grpc-status").is_none());
    let trailers = answer.trailers.as_ref().expect("trailers");
    assert_eq!(trailers.len(), 1, "{trailers:?}");
    assert_eq!(answered(&answer).org_id, h.seed.org_id.to_string());

    // A refusal is trailers-only: the status in the head, no message.
    let refused = call(
        addr,
        &[],
        vec![grpc_message(0, &validate_request("svc_pat_garbage"))],
    )
    .await;
    assert_eq!(refused.code(), "16");
    assert!(refused.trailers.is_none());
    assert!(refused.data.is_empty());
    assert_eq!(refused.headers["content-type"], "application/grpc");
}

#[tokio::test]
async fn calls_that_are_not_plain_get_tonics_answers() {
    let h = start().await;
    let addr = h.server.grpc_addr;
    let message = grpc_message(0, &validate_request(&h.seed.chat_token));

    // The message over two DATA frames, and an empty frame after a whole one.
    let split = call(addr, &[], vec![message.slice(..7), message.slice(7..)]).await;
    assert_eq!(answered(&split).org_id, h.seed.org_id.to_string());
    let trailing = call(addr, &[], vec![message.clone(), Bytes::new()]).await;
    assert_eq!(answered(&trailing).org_id, h.seed.org_id.to_string());
    let identity = call(addr, &[("grpc-encoding", "identity")], vec![message]).await;
    assert_eq!(answered(&identity).org_id, h.seed.org_id.to_string());

    // An encoding the server does not speak: Unimplemented.
    let gzip = grpc_message(1, &validate_request(&h.seed.chat_token));
    let answer = call(addr, &[("grpc-encoding", "gzip")], vec![gzip.clone()]).await;
    assert_eq!(answer.code(), "12");
    // The compressed flag with no encoding named, bytes that are no message, no message at
    // all, a length past tonic's 4 MiB: tonic's own errors.
    assert_eq!(call(addr, &[], vec![gzip]).await.code(), "13");
    assert_eq!(
        call(addr, &[], vec![grpc_message(0, &[0xff, 0xff])])
            .await
            .code(),
        "13"
    );
    assert_eq!(call(addr, &[], vec![]).await.code(), "13");
    let mut too_long = vec![0u8];
    too_long.extend_from_slice(&(4 * 1024 * 1024 + 1u32).to_be_bytes());
    assert_eq!(
        call(addr, &[], vec![Bytes::from(too_long)]).await.code(),
        "11"
    );
}
