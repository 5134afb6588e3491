//! Shared by the example tests: an app on a fresh loopback port, one request over real HTTP,
//! and its reply read whole.

// Each test binary compiles this module and uses only part of it.
#![allow(dead_code)]

use std::error::Error;
use std::future::Future;
use std::net::SocketAddr;

use http::{HeaderMap, Request, StatusCode};
use http_body::Body;
use http_body_util::BodyExt;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::net::TcpListener;

/// Runs `serve` on a fresh loopback listener for the rest of the test; returns its address.
pub(crate) async fn start<F, Fut>(serve: F) -> SocketAddr
where
    F: FnOnce(TcpListener) -> Fut,
    Fut: Future + Send + 'static,
    Fut::Output: Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener));
    addr
}

/// A reply read whole; a body that is not JSON reads as `null`.
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) json: serde_json::Value,
}

impl Reply {
    /// The envelope's error code, if the reply is an error envelope.
    pub(crate) fn code(&self) -> Option<&str> {
        self.json["error"]["code"].as_str()
    }

    /// The envelope names the same request id as the header.
    pub(crate) fn assert_envelope(&self, status: StatusCode, code: &str) {
        assert_eq!(self.status, status, "{}", self.json);
        assert_eq!(self.code(), Some(code));
        assert_eq!(self.headers["content-type"], "application/json");
        let request_id = self.headers["x-request-id"].to_str().unwrap();
        assert_eq!(self.json["error"]["request_id"], request_id);
        assert!(self.json["error"]["message"].is_string());
        assert!(self.json["error"]["timestamp"].is_string());
    }
}

/// Sends `request` (with an absolute `http://` URI) on a fresh client and reads the reply.
pub(crate) async fn send<B>(request: Request<B>) -> Reply
where
    B: Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn Error + Send + Sync>>,
{
    let client = Client::builder(TokioExecutor::new()).build_http();
    let response = client.request(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    Reply {
        status,
        headers,
        json,
    }
}
