//! A scripted LLM upstream on loopback that speaks both protocols: OpenAI's chat completions
//! and responses, and Anthropic's messages (and `count_tokens`), as JSON or SSE.
//!
//! It answers what the gateway's mock provider answers, so its answers fit the request: a tool
//! call whose arguments are an instance of the tool's schema while the last turn is the
//! user's, then text (an instance of the requested output schema, if any) once the tool's
//! result is back; agent loops run to their end. Each request is first checked with the
//! gateway's own validator, so a translated request must be a valid one of its protocol.
//! Two things are scripted: which tools to call when offered ([`Upstream::prefer`]: a client
//! offers dozens, some of which would spawn more agents), and a stream cut: a streamed request
//! at the user's turn whose body holds [`CUT_MARKER`] gets its first events, then the
//! connection breaks.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::response::Response;
use axum::routing::post;
use futures_util::StreamExt;
use serde_json::{Value, json};
use svc_gateway::provider::mock::MockProvider;
use svc_gateway::provider::{CallInfo, Provider, ProviderReply};
use svc_gateway::request::Endpoint;
use tokio::net::TcpListener;

/// A streamed request whose body holds this is cut after its first events.
pub(crate) const CUT_MARKER: &str = "CUT-THE-STREAM-NOW";
/// How many events of a cut stream go out before the break.
const EVENTS_BEFORE_CUT: usize = 3;
/// What `count_tokens` answers.
pub(crate) const COUNTED: u64 = 42;

/// One request as the upstream saw it, and how it answered.
#[derive(Clone, Debug)]
pub(crate) struct Exchange {
    pub(crate) path: String,
    pub(crate) body: Value,
    pub(crate) status: u16,
    pub(crate) cut: bool,
}

impl Exchange {
    /// The model the request named.
    pub(crate) fn model(&self) -> &str {
        self.body["model"].as_str().unwrap_or_default()
    }

    /// Whether the request carries the result of a tool call (any protocol).
    pub(crate) fn has_tool_result(&self) -> bool {
        let text = self.body.to_string();
        [
            "\"tool_result\"",
            "\"function_call_output\"",
            "\"role\":\"tool\"",
        ]
        .iter()
        .any(|sign| text.contains(sign))
    }
}

#[derive(Default)]
struct Inner {
    prefer: Mutex<Vec<String>>,
    seen: Mutex<Vec<Exchange>>,
}

#[derive(Clone)]
pub(crate) struct Upstream {
    addr: SocketAddr,
    inner: Arc<Inner>,
}

impl Upstream {
    pub(crate) async fn start() -> Upstream {
        let inner = Arc::new(Inner::default());
        let app = Router::new()
            .route("/v1/chat/completions", post(answer))
            .route("/v1/responses", post(answer))
            .route("/v1/messages", post(answer))
            .route("/v1/messages/count_tokens", post(answer))
            .with_state(inner.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Upstream { addr, inner }
    }

    /// The base URL both provider kinds are configured with.
    pub(crate) fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Calls the first of `tools` a request offers, when it offers one of them (else the mock's
    /// choice: the first tool).
    pub(crate) fn prefer(&self, tools: &[&str]) {
        *self.inner.prefer.lock().unwrap() = tools.iter().map(|t| (*t).to_owned()).collect();
    }

    pub(crate) fn seen(&self) -> Vec<Exchange> {
        self.inner.seen.lock().unwrap().clone()
    }

    /// One line per request so far: path, model, stream, tools offered, tool choice, status.
    pub(crate) fn summary(&self) -> String {
        self.seen()
            .iter()
            .map(|e| {
                // Each tool's name, with its type when it is not a function.
                let tools: Vec<String> = e.body["tools"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|t| match t["type"].as_str() {
                        Some("function") | None => tool_names(&json!({"tools": [t]})).concat(),
                        Some(kind) => {
                            format!("{}:{kind}", tool_names(&json!({"tools": [t]})).concat())
                        }
                    })
                    .collect();
                format!(
                    "{} {} stream={} tools={tools:?} choice={} result={} status={} cut={}\n",
                    e.path,
                    e.model(),
                    e.body["stream"],
                    e.body["tool_choice"],
                    e.has_tool_result(),
                    e.status,
                    e.cut
                )
            })
            .collect()
    }

    /// The requests to `path` for a model starting with `model`.
    pub(crate) fn seen_at(&self, path: &str, model: &str) -> Vec<Exchange> {
        self.seen()
            .into_iter()
            .filter(|e| e.path == path && e.model().starts_with(model))
            .collect()
    }
}

fn endpoint(path: &str) -> Endpoint {
    match path {
        "/v1/chat/completions" => Endpoint::ChatCompletions,
        "/v1/responses" => Endpoint::Responses,
        "/v1/messages/count_tokens" => Endpoint::CountTokens,
        _ => Endpoint::Messages,
    }
}

/// The names of the tools a request offers (chat nests them under `function`).
fn tool_names(body: &Value) -> Vec<&str> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.pointer("/function/name").or_else(|| t.get("name")))
        .filter_map(Value::as_str)
        .collect()
}

/// Whether the user has the turn (rather than a tool's result), `system` turns aside.
fn users_turn(body: &Value, endpoint: Endpoint) -> bool {
    let turns = match endpoint {
        Endpoint::Responses if body["input"].is_string() => return true,
        Endpoint::Responses => &body["input"],
        _ => &body["messages"],
    };
    let last = turns.as_array().and_then(|t| {
        t.iter()
            .rfind(|m| !["system", "developer"].contains(&m["role"].as_str().unwrap_or_default()))
    });
    last.is_some_and(|m| {
        m["role"] == "user"
            && !m["content"]
                .as_array()
                .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"))
    })
}

/// Names the preferred tool in `tool_choice`, in the request's own protocol, when the mock
/// would call a tool anyway (the user's turn, no choice made yet).
fn choose_tool(body: &mut Value, endpoint: Endpoint, prefer: &[String]) {
    let offered = tool_names(body);
    let Some(name) = prefer.iter().find(|p| offered.contains(&p.as_str())) else {
        return;
    };
    if !users_turn(body, endpoint) {
        return;
    }
    let choice = &body["tool_choice"];
    let open = choice.is_null()
        || ["auto", "required", "any"]
            .iter()
            .any(|c| choice == c || choice["type"] == *c);
    if !open {
        return;
    }
    body["tool_choice"] = match endpoint {
        Endpoint::ChatCompletions => json!({"type": "function", "function": {"name": name}}),
        Endpoint::Responses => json!({"type": "function", "name": name}),
        _ => json!({"type": "tool", "name": name}),
    };
}

async fn answer(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let path = parts.uri.path().to_owned();
    let endpoint = endpoint(&path);
    let mut json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let recorded = json.clone();
    let cut = json["stream"] == true
        && users_turn(&json, endpoint)
        && body
            .windows(CUT_MARKER.len())
            .any(|w| w == CUT_MARKER.as_bytes());
    let (status, content_type, answer) = if endpoint == Endpoint::CountTokens {
        let counted = json!({ "input_tokens": COUNTED });
        (200, "application/json", Body::from(counted.to_string()))
    } else {
        choose_tool(&mut json, endpoint, &inner.prefer.lock().unwrap());
        let rewritten = Bytes::from(json.to_string());
        match svc_gateway::validate::request(endpoint, &parts.headers, rewritten) {
            Err(rejection) => {
                let message = format!("not a valid request: {:?}", rejection.field_errors());
                let error = match endpoint {
                    Endpoint::Messages => json!({"type": "error", "error": {
                        "type": "invalid_request_error", "message": message}}),
                    _ => json!({"error": {"type": "invalid_request_error", "message": message}}),
                };
                (400, "application/json", Body::from(error.to_string()))
            }
            Ok(request) => match MockProvider::new()
                .complete(&request, &CallInfo::default())
                .await
                .unwrap()
            {
                ProviderReply::Json { body, .. } => (200, "application/json", Body::from(body)),
                ProviderReply::Stream { events, .. } if cut => {
                    let first = events
                        .take(EVENTS_BEFORE_CUT)
                        .chain(futures_util::stream::once(async {
                            // Pending once: the server flushes the events before it breaks
                            // the connection, so the gateway has begun answering.
                            tokio::task::yield_now().await;
                            Err(svc_gateway::provider::ProviderError::Unavailable {
                                reason: "the scripted upstream cut the stream",
                            })
                        }))
                        .map(|event| event.map_err(|e| std::io::Error::other(e.to_string())));
                    (200, "text/event-stream", Body::from_stream(first))
                }
                ProviderReply::Stream { events, .. } => {
                    let events =
                        events.map(|e| e.map_err(|e| std::io::Error::other(e.to_string())));
                    (200, "text/event-stream", Body::from_stream(events))
                }
            },
        }
    };
    inner.seen.lock().unwrap().push(Exchange {
        path,
        body: recorded,
        status,
        cut,
    });
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(answer)
        .unwrap()
}
