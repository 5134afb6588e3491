//! Chat completions: a text answer (an instance of `response_format`'s schema when one is
//! asked for), or one tool call; as JSON or as chunks.

use bytes::Bytes;
use serde_json::{Value, json};

use super::{
    Call, fresh_id, json_reply, now, pieces, prompt_tokens, reply_text, stream_reply, tokens,
    tool_to_call,
};
use crate::provider::ProviderReply;
use crate::request::ApiRequest;

/// What the mock says: text, or a call of a tool.
enum Turn<'a> {
    Text(String),
    Call { id: String, call: Call<'a> },
}

impl Turn<'_> {
    fn completion_tokens(&self) -> u64 {
        match self {
            Turn::Text(text) => tokens(text),
            Turn::Call { call, .. } => call.completion_tokens(),
        }
    }
}

pub(super) fn answer(request: &ApiRequest) -> ProviderReply {
    let last_role = request
        .json
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.last())
        .and_then(|m| m.get("role"))
        .and_then(Value::as_str);
    let turn = match tool_to_call(&request.json, last_role) {
        Some(call) => Turn::Call {
            id: fresh_id("call_"),
            call,
        },
        None => Turn::Text(reply_text(request.json.get("response_format"))),
    };
    let prompt = prompt_tokens(request);
    let completion = turn.completion_tokens();
    let usage = json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    });
    let id = fresh_id("chatcmpl-");
    let created = now();
    if request.stream {
        // The body sent upstream always asks for usage in a stream (see
        // `ApiRequest::upstream_body`): the mock answers what it was sent, as OpenAI would.
        return stream_reply(chunks(&id, created, &request.model, &turn, &usage));
    }
    let (message, finish) = match &turn {
        Turn::Text(text) => (json!({"role": "assistant", "content": text}), "stop"),
        Turn::Call { id, call } => (
            json!({
                "role": "assistant",
                "content": null,
                "tool_calls": [{
                    "id": id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments.to_string()},
                }],
            }),
            "tool_calls",
        ),
    };
    json_reply(json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": request.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }))
}

/// The SSE frames of a streamed answer in OpenAI's shape with usage: the role, the text (or
/// the tool call's arguments) in pieces, the finish, a usage chunk with empty `choices`,
/// `[DONE]`. Every chunk before the usage chunk carries `"usage": null`, as OpenAI's do.
fn chunks(id: &str, created: i64, model: &str, turn: &Turn<'_>, usage: &Value) -> Vec<Bytes> {
    let frame = |choices: Value, usage: &Value| {
        let event = json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": choices,
            "usage": usage,
        });
        Bytes::from(format!("data: {event}\n\n"))
    };
    let chunk = |delta: Value, finish: Option<&str>| {
        frame(
            json!([{"index": 0, "delta": delta, "finish_reason": finish}]),
            &Value::Null,
        )
    };
    let mut events = Vec::new();
    match turn {
        Turn::Text(text) => {
            events.push(chunk(json!({"role": "assistant", "content": ""}), None));
            events.extend(
                pieces(text)
                    .into_iter()
                    .map(|w| chunk(json!({"content": w}), None)),
            );
            events.push(chunk(json!({}), Some("stop")));
        }
        Turn::Call { id, call } => {
            events.push(chunk(
                json!({"role": "assistant", "content": null, "tool_calls": [{
                    "index": 0, "id": id, "type": "function",
                    "function": {"name": call.name, "arguments": ""},
                }]}),
                None,
            ));
            let arguments = call.arguments.to_string();
            events.extend(pieces(&arguments).into_iter().map(|piece| {
                chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
                    None,
                )
            }));
            events.push(chunk(json!({}), Some("tool_calls")));
        }
    }
    events.push(frame(json!([]), usage));
    events.push(Bytes::from_static(b"data: [DONE]\n\n"));
    events
}
