//! A Sentry stand-in on loopback: records every envelope POSTed to `/api/<project>/envelope/`.
//! Its [`SentrySink::dsn`] is what `SENTRY_DSN` names in the tests.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::routing::post;

#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<Bytes>>>);

/// The sink, serving until dropped.
pub struct SentrySink {
    addr: SocketAddr,
    received: Received,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for SentrySink {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl SentrySink {
    pub async fn start() -> SentrySink {
        let received = Received::default();
        let app = Router::new()
            .route("/api/{project}/envelope/", post(record))
            .with_state(received.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        SentrySink {
            addr,
            received,
            server,
        }
    }

    /// A DSN for project 42 at the sink, plain HTTP.
    pub fn dsn(&self) -> String {
        format!("http://0123456789abcdef0123456789abcdef@{}/42", self.addr)
    }

    /// Every envelope body received, as sent.
    pub fn bodies(&self) -> Vec<Bytes> {
        self.received.0.lock().unwrap().clone()
    }

    /// Every event received: the payloads of the envelopes' `event` items.
    pub fn events(&self) -> Vec<serde_json::Value> {
        self.bodies().iter().flat_map(|body| events(body)).collect()
    }

    /// The events tagged with `request_id`.
    pub fn events_of(&self, request_id: &str) -> Vec<serde_json::Value> {
        self.events()
            .into_iter()
            .filter(|event| tag(event, "request_id") == Some(request_id))
            .collect()
    }
}

async fn record(State(received): State<Received>, Path(project): Path<String>, body: Bytes) {
    assert_eq!(project, "42", "the DSN's project");
    received.0.lock().unwrap().push(body);
}

/// An envelope is a header line, then for each item a header line and its payload (one line
/// for JSON payloads without an explicit length).
fn events(body: &[u8]) -> Vec<serde_json::Value> {
    let mut lines = body.split(|&b| b == b'\n').skip(1);
    let mut events = Vec::new();
    while let Some(header) = lines.next() {
        if header.is_empty() {
            continue;
        }
        let header: serde_json::Value = serde_json::from_slice(header).expect("item header");
        let payload = lines.next().unwrap_or_default();
        if header["type"] == "event" {
            events.push(serde_json::from_slice(payload).expect("event payload"));
        }
    }
    events
}

/// An event's tag, in either of the shapes the protocol allows.
pub fn tag<'a>(event: &'a serde_json::Value, key: &str) -> Option<&'a str> {
    match &event["tags"] {
        serde_json::Value::Object(tags) => tags.get(key).and_then(|v| v.as_str()),
        serde_json::Value::Array(pairs) => pairs
            .iter()
            .find(|pair| pair[0] == key)
            .and_then(|pair| pair[1].as_str()),
        _ => None,
    }
}
