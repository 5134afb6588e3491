//! A plain HTTP/1 client for talking to a gateway on loopback.

use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

pub fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// A client whose connections come from `local` (any 127/8 address is this host's).
pub fn client_from(local: std::net::IpAddr) -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_local_address(Some(local));
    Client::builder(TokioExecutor::new()).build(connector)
}

/// A finished response: status, headers and the whole body.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The envelope's error code.
    pub fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

pub async fn send(client: &HttpClient, request: Request<Full<Bytes>>) -> Reply {
    let response = client.request(request).await.expect("gateway reachable");
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("whole body").to_bytes();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

/// Sends and returns the response with its body still streaming.
pub async fn open(client: &HttpClient, request: Request<Full<Bytes>>) -> http::Response<Incoming> {
    client.request(request).await.expect("gateway reachable")
}

/// The next data frame of a streaming body, skipping trailers.
pub async fn next_data(body: &mut Incoming) -> Option<Bytes> {
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.expect("stream frame").into_data() {
            return Some(data);
        }
    }
    None
}
