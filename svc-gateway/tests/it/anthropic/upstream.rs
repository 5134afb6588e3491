//! A fake Anthropic Messages API on loopback, which also speaks OpenAI's chat completions. It
//! checks each request with the gateway's own validator of the route (so a translated request
//! must be a valid Messages or chat request), answers what the mock provider answers (JSON, or
//! SSE events), records what it was sent and what it answered, and can be told to fail with a
//! status instead. A Messages request whose `tool_choice` makes the model call a tool (`tool`,
//! `any`) is answered with a call whose input is made from the tool's schema. Its
//! `/v1/messages/count_tokens` answers `{"input_tokens": 42}`.
// Each test file that mounts it uses a part.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::response::Response;
use axum::routing::post;
use futures_util::StreamExt;
use http::HeaderMap;
use serde_json::{Value, json};
use svc_gateway::provider::mock::MockProvider;
use svc_gateway::provider::{CallInfo, Provider, ProviderReply};
use svc_gateway::request::Endpoint;
use tokio::net::TcpListener;

/// One exchange as the upstream saw it.
#[derive(Clone, Debug)]
pub(crate) struct Exchange {
    pub(crate) path: String,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    pub(crate) answer: Bytes,
}

#[derive(Default)]
struct Inner {
    /// A status and an Anthropic error type to fail with, instead of answering.
    failure: Mutex<Option<(u16, &'static str)>>,
    seen: Mutex<Vec<Exchange>>,
}

#[derive(Clone)]
pub(crate) struct Anthropic {
    pub(crate) addr: SocketAddr,
    inner: Arc<Inner>,
}

impl Anthropic {
    pub(crate) async fn start() -> Anthropic {
        let inner = Arc::new(Inner::default());
        let app = Router::new()
            .route("/v1/messages", post(answer))
            .route("/v1/chat/completions", post(answer))
            .route("/v1/messages/count_tokens", post(count))
            .with_state(inner.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Anthropic { addr, inner }
    }

    pub(crate) fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub(crate) fn fail_with(&self, status: u16, kind: &'static str) {
        *self.inner.failure.lock().unwrap() = Some((status, kind));
    }

    pub(crate) fn seen(&self) -> Vec<Exchange> {
        self.inner.seen.lock().unwrap().clone()
    }

    /// The JSON of the last request body.
    pub(crate) fn last_body(&self) -> Value {
        serde_json::from_slice(&self.seen().last().expect("a request").body).unwrap()
    }
}

/// What the fake's counter answers.
pub(crate) const COUNTED: u64 = 42;

async fn count(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let answer = Bytes::from(json!({ "input_tokens": COUNTED }).to_string());
    record(&inner, parts, body, 200, "application/json", answer)
}

/// Keeps the exchange and answers.
fn record(
    inner: &Inner,
    parts: http::request::Parts,
    body: Bytes,
    status: u16,
    content_type: &str,
    answer: Bytes,
) -> Response {
    inner.seen.lock().unwrap().push(Exchange {
        path: parts.uri.path().to_owned(),
        headers: parts.headers,
        body,
        answer: answer.clone(),
    });
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Body::from(answer))
        .unwrap()
}

async fn answer(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let failure = *inner.failure.lock().unwrap();
    let (status, content_type, answer) = if let Some((status, kind)) = failure {
        let error =
            json!({"type": "error", "error": {"type": kind, "message": "the fake says no"}});
        (status, "application/json", Bytes::from(error.to_string()))
    } else {
        let endpoint = match parts.uri.path() {
            "/v1/chat/completions" => Endpoint::ChatCompletions,
            _ => Endpoint::Messages,
        };
        match svc_gateway::validate::request(endpoint, &parts.headers, body.clone()) {
            Err(rejection) => {
                let error = json!({"type": "error", "error": {"type": "invalid_request_error",
                    "message": format!("not a Messages request: {:?}", rejection.field_errors())}});
                (400, "application/json", Bytes::from(error.to_string()))
            }
            Ok(request) => match forced(endpoint, &request.json) {
                Some(message) if request.stream => (200, "text/event-stream", events_of(&message)),
                Some(message) => (200, "application/json", Bytes::from(message.to_string())),
                None => match MockProvider::new()
                    .complete(&request, &CallInfo::default())
                    .await
                    .unwrap()
                {
                    ProviderReply::Json { body, .. } => (200, "application/json", body),
                    ProviderReply::Stream { events, .. } => {
                        let frames: Vec<_> = events.map(Result::unwrap).collect().await;
                        (200, "text/event-stream", Bytes::from(frames.concat()))
                    }
                },
            },
        }
    };
    record(&inner, parts, body, status, content_type, answer)
}

/// The Messages answer to a request whose `tool_choice` makes the model call a tool: the
/// named tool, or for `any` the first tool (the last once a tool's result came back, as a model
/// done with its tools calls the one left: a forced answer tool is appended last), with an
/// input made from the tool's schema.
fn forced(endpoint: Endpoint, request: &serde_json::Map<String, Value>) -> Option<Value> {
    if endpoint != Endpoint::Messages {
        return None;
    }
    let tools = request.get("tools")?.as_array()?;
    let choice = request.get("tool_choice")?;
    let after_result = request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_array())
        .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"));
    let tool = match choice["type"].as_str()? {
        "tool" => tools.iter().find(|t| t["name"] == choice["name"])?,
        "any" if after_result => tools.last()?,
        "any" => tools.first()?,
        _ => return None,
    };
    Some(json!({
        "id": "msg_forced", "type": "message", "role": "assistant", "model": request["model"],
        "content": [{"type": "tool_use", "id": "toolu_forced", "name": tool["name"],
                     "input": example(&tool["input_schema"])}],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }))
}

/// A one-`tool_use` Messages answer as Anthropic's events, its input in two pieces.
fn events_of(message: &Value) -> Bytes {
    let block = &message["content"][0];
    let input = block["input"].to_string();
    let (head, tail) = input.split_at(input.len() / 2);
    let mut start = message.clone();
    start["content"] = json!([]);
    start["usage"]["output_tokens"] = json!(1);
    let events = [
        json!({"type": "message_start", "message": start}),
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"],
                                 "input": {}}}),
        json!({"type": "content_block_delta", "index": 0,
               "delta": {"type": "input_json_delta", "partial_json": head}}),
        json!({"type": "content_block_delta", "index": 0,
               "delta": {"type": "input_json_delta", "partial_json": tail}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
               "usage": {"output_tokens": 5}}),
        json!({"type": "message_stop"}),
    ];
    let text: String = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect();
    Bytes::from(text)
}

/// A value valid against a simple JSON schema.
pub(crate) fn example(schema: &Value) -> Value {
    if let Some(first) = schema["enum"].get(0) {
        return first.clone();
    }
    match schema["type"].as_str() {
        Some("string") => json!("Ada"),
        Some("integer") => json!(36),
        Some("number") => json!(1.5),
        Some("boolean") => json!(true),
        Some("array") => json!([example(&schema["items"])]),
        _ => Value::Object(
            schema["properties"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(name, property)| (name.clone(), example(property)))
                .collect(),
        ),
    }
}
