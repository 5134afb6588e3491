//! A fake OpenAI on loopback that answers like the real one: chat completions (text, tool
//! calls, JSON-schema output; JSON or SSE, usage chunk only when `stream_options.include_usage`
//! asks), embeddings (float or base64) and the Responses API (JSON or SSE with `event:`
//! lines). It records every request it received.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::response::Response;
use axum::routing::post;
use base64::Engine;
use http::HeaderMap;
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// The text of every plain answer.
pub(crate) const UPSTREAM_REPLY: &str = "Hello from the upstream model.";
/// The arguments of every tool call.
pub(crate) const TOOL_ARGUMENTS: &str = r#"{"city": "Paris"}"#;
/// The content of an answer asked for a JSON schema.
pub(crate) const JSON_REPLY: &str = r#"{"city": "Paris", "temperature_c": 21}"#;
/// The length of an embedding unless `dimensions` says otherwise.
pub(crate) const DIMENSIONS: usize = 8;
const CREATED: i64 = 1_700_000_000;

/// One request as the upstream saw it.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub(crate) path: String,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

/// A running fake upstream.
#[derive(Clone)]
pub(crate) struct OpenAi {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl OpenAi {
    pub(crate) async fn start() -> OpenAi {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new()
            .route("/v1/chat/completions", post(answer))
            .route("/v1/embeddings", post(answer))
            .route("/v1/responses", post(answer))
            .with_state(seen.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        OpenAi { addr, seen }
    }

    /// The base URL the gateway is configured with.
    pub(crate) fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn answer(State(seen): State<Arc<Mutex<Vec<Seen>>>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let path = parts.uri.path().to_owned();
    seen.lock().unwrap().push(Seen {
        path: path.clone(),
        headers: parts.headers,
        body: body.clone(),
    });
    let Ok(json) = serde_json::from_slice::<Value>(&body) else {
        let error = json!({"error": {"message": "We could not parse the JSON body of your request.", "type": "invalid_request_error", "param": null, "code": null}});
        return reply(400, "application/json", error.to_string());
    };
    let stream = json["stream"] == true;
    match (path.as_str(), stream) {
        ("/v1/chat/completions", false) => reply(200, "application/json", chat(&json)),
        ("/v1/chat/completions", true) => reply(200, "text/event-stream", chat_stream(&json)),
        ("/v1/embeddings", _) => reply(200, "application/json", embeddings(&json).to_string()),
        ("/v1/responses", false) => reply(200, "application/json", response(&json).to_string()),
        (_, _) => reply(200, "text/event-stream", response_stream(&json)),
    }
}

fn reply(status: u16, content_type: &str, body: String) -> Response {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .header("openai-processing-ms", "12")
        .header("x-request-id", "req_upstream")
        .body(Body::from(body))
        .unwrap()
}

/// What a chat request gets: a tool call, JSON, or text.
enum Turn {
    Call(String),
    Json,
    Text,
}

impl Turn {
    fn of(json: &Value) -> Turn {
        let last_role = json["messages"]
            .as_array()
            .and_then(|m| m.last())
            .map(|m| &m["role"]);
        let tool = json["tool_choice"]["function"]["name"]
            .as_str()
            .or_else(|| json["tools"][0]["function"]["name"].as_str());
        match tool {
            Some(name) if last_role == Some(&json!("user")) && json["tool_choice"] != "none" => {
                Turn::Call(name.to_owned())
            }
            _ if json["response_format"]["type"] == "json_schema" => Turn::Json,
            _ => Turn::Text,
        }
    }

    fn text(&self) -> &'static str {
        match self {
            Turn::Json => JSON_REPLY,
            _ => UPSTREAM_REPLY,
        }
    }
}

/// Rough token counts, as a tokenizer would give.
fn tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4).max(1)
}

fn chat_usage(json: &Value, completion: &str) -> Value {
    let prompt = tokens(&json["messages"].to_string());
    let completion = tokens(completion);
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
    })
}

fn chat(json: &Value) -> String {
    let turn = Turn::of(json);
    let (message, finish) = match &turn {
        Turn::Call(name) => (
            json!({"role": "assistant", "content": null, "refusal": null, "annotations": [], "tool_calls": [{
                "id": "call_upstream_1", "type": "function",
                "function": {"name": name, "arguments": TOOL_ARGUMENTS},
            }]}),
            "tool_calls",
        ),
        _ => (
            json!({"role": "assistant", "content": turn.text(), "refusal": null, "annotations": []}),
            "stop",
        ),
    };
    json!({
        "id": "chatcmpl-upstream-1",
        "object": "chat.completion",
        "created": CREATED,
        "model": json["model"],
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": chat_usage(json, TOOL_ARGUMENTS),
        "service_tier": "default",
        "system_fingerprint": "fp_upstream",
    })
    .to_string()
}

fn chat_stream(json: &Value) -> String {
    let turn = Turn::of(json);
    let event = |choices: Value, usage: Option<Value>| {
        let mut chunk = json!({
            "id": "chatcmpl-upstream-1",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": json["model"],
            "service_tier": "default",
            "system_fingerprint": "fp_upstream",
            "choices": choices,
        });
        if json["stream_options"]["include_usage"] == true {
            chunk["usage"] = usage.unwrap_or(Value::Null);
        }
        format!("data: {chunk}\n\n")
    };
    let delta = |delta: Value, finish: Value| {
        event(
            json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]),
            None,
        )
    };
    let mut out = String::new();
    let finish = match &turn {
        Turn::Call(name) => {
            out += &delta(
                json!({"role": "assistant", "content": null, "refusal": null, "tool_calls": [{
                    "index": 0, "id": "call_upstream_1", "type": "function",
                    "function": {"name": name, "arguments": ""},
                }]}),
                Value::Null,
            );
            for piece in TOOL_ARGUMENTS.split_inclusive(' ') {
                out += &delta(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
                    Value::Null,
                );
            }
            "tool_calls"
        }
        _ => {
            out += &delta(
                json!({"role": "assistant", "content": "", "refusal": null}),
                Value::Null,
            );
            for word in turn.text().split_inclusive(' ') {
                out += &delta(json!({"content": word}), Value::Null);
            }
            "stop"
        }
    };
    out += &delta(json!({}), json!(finish));
    if json["stream_options"]["include_usage"] == true {
        out += &event(json!([]), Some(chat_usage(json, turn.text())));
    }
    out + "data: [DONE]\n\n"
}

/// A unit vector that depends only on `input` and `dimensions`.
fn vector(input: &str, dimensions: usize) -> Vec<f32> {
    let seed: f32 = input.bytes().map(f32::from).sum();
    let raw: Vec<f32> = (0..dimensions)
        .map(|i| (seed + 1.7 * i as f32).sin())
        .collect();
    let norm = raw.iter().map(|x| x * x).sum::<f32>().sqrt();
    raw.into_iter().map(|x| x / norm).collect()
}

/// A vector as `encoding_format` asks: JSON numbers, or base64 of little-endian f32s.
fn encoded(vector: &[f32], format: &Value) -> Value {
    if format != "base64" {
        return json!(vector);
    }
    let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
    json!(base64::engine::general_purpose::STANDARD.encode(bytes))
}

fn embeddings(json: &Value) -> Value {
    let dimensions = json["dimensions"]
        .as_u64()
        .map_or(DIMENSIONS, |d| d as usize);
    let inputs = match &json["input"] {
        Value::Array(items) => items.clone(),
        other => vec![other.clone()],
    };
    let mut data = Vec::new();
    let mut prompt = 0;
    for (index, input) in inputs.iter().enumerate() {
        let text = input.to_string();
        prompt += tokens(&text);
        let embedding = encoded(&vector(&text, dimensions), &json["encoding_format"]);
        data.push(json!({"object": "embedding", "index": index, "embedding": embedding}));
    }
    json!({
        "object": "list",
        "data": data,
        "model": json["model"],
        "usage": {"prompt_tokens": prompt, "total_tokens": prompt},
    })
}

fn response_usage(json: &Value) -> Value {
    let input = tokens(&json["input"].to_string()) + tokens(&json["instructions"].to_string());
    let output = tokens(UPSTREAM_REPLY);
    json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + output,
    })
}

fn message_item(status: &str, content: Value) -> Value {
    json!({"id": "msg_upstream_1", "type": "message", "status": status, "role": "assistant", "content": content})
}

fn output_text(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

fn response(json: &Value) -> Value {
    json!({
        "id": "resp_upstream_1",
        "object": "response",
        "created_at": CREATED,
        "status": "completed",
        "background": false,
        "error": null,
        "incomplete_details": null,
        "instructions": json["instructions"],
        "max_output_tokens": json["max_output_tokens"],
        "model": json["model"],
        "output": [message_item("completed", json!([output_text(UPSTREAM_REPLY)]))],
        "parallel_tool_calls": true,
        "previous_response_id": null,
        "reasoning": {"effort": null, "summary": null},
        "store": true,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": response_usage(json),
        "user": null,
        "metadata": {},
    })
}

fn response_stream(json: &Value) -> String {
    let done = response(json);
    let mut pending = done.clone();
    pending["status"] = json!("in_progress");
    pending["output"] = json!([]);
    pending["usage"] = Value::Null;
    let item = |status: &str, text: Option<&str>| {
        message_item(
            status,
            json!(text.map(output_text).into_iter().collect::<Vec<_>>()),
        )
    };
    let at = json!({"item_id": "msg_upstream_1", "output_index": 0, "content_index": 0});
    let with = |extra: Value| {
        let mut event = at.clone();
        event
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        event
    };
    let mut events = vec![
        ("response.created", json!({"response": pending})),
        ("response.in_progress", json!({"response": pending})),
        (
            "response.output_item.added",
            json!({"output_index": 0, "item": item("in_progress", None)}),
        ),
        (
            "response.content_part.added",
            with(json!({"part": output_text("")})),
        ),
    ];
    for word in UPSTREAM_REPLY.split_inclusive(' ') {
        events.push((
            "response.output_text.delta",
            with(json!({"delta": word, "logprobs": []})),
        ));
    }
    events.extend([
        (
            "response.output_text.done",
            with(json!({"text": UPSTREAM_REPLY, "logprobs": []})),
        ),
        (
            "response.content_part.done",
            with(json!({"part": output_text(UPSTREAM_REPLY)})),
        ),
        (
            "response.output_item.done",
            json!({"output_index": 0, "item": item("completed", Some(UPSTREAM_REPLY))}),
        ),
        ("response.completed", json!({"response": done})),
    ]);
    events
        .into_iter()
        .enumerate()
        .map(|(sequence, (kind, mut data))| {
            data["type"] = json!(kind);
            data["sequence_number"] = json!(sequence);
            format!("event: {kind}\ndata: {data}\n\n")
        })
        .collect()
}
