//! Chat completions: a text answer, or one tool call; as JSON or as chunks.

use bytes::Bytes;
use serde_json::{Value, json};

use super::{
    MOCK_REPLY, fresh_id, json_reply, now, prompt_tokens, reply_words, stream_reply, tokens,
    tool_to_call,
};
use crate::provider::ProviderReply;
use crate::request::ApiRequest;

/// What the mock says: text, or a call of the named tool.
enum Turn<'a> {
    Text,
    Call { id: String, name: &'a str },
}

impl Turn<'_> {
    fn completion_tokens(&self) -> u64 {
        match self {
            Turn::Text => tokens(MOCK_REPLY),
            Turn::Call { name, .. } => tokens(name) + 1,
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
        Some(name) => Turn::Call {
            id: fresh_id("call_"),
            name,
        },
        None => Turn::Text,
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
        Turn::Text => (json!({"role": "assistant", "content": MOCK_REPLY}), "stop"),
        Turn::Call { id, name } => (
            json!({
                "role": "assistant",
                "content": null,
                "tool_calls": [{
                    "id": id,
                    "type": "function",
                    "function": {"name": name, "arguments": "{}"},
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

/// The SSE frames of a streamed answer in OpenAI's shape with usage: the role, one chunk per
/// word (or the tool call in two), the finish, a usage chunk with empty `choices`, `[DONE]`.
/// Every chunk before the usage chunk carries `"usage": null`, as OpenAI's do.
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
        Turn::Text => {
            events.push(chunk(json!({"role": "assistant", "content": ""}), None));
            events.extend(reply_words().map(|w| chunk(json!({"content": w}), None)));
            events.push(chunk(json!({}), Some("stop")));
        }
        Turn::Call { id, name } => {
            events.push(chunk(
                json!({"role": "assistant", "content": null, "tool_calls": [{
                    "index": 0, "id": id, "type": "function",
                    "function": {"name": name, "arguments": ""},
                }]}),
                None,
            ));
            events.push(chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}),
                None,
            ));
            events.push(chunk(json!({}), Some("tool_calls")));
        }
    }
    events.push(frame(json!([]), usage));
    events.push(Bytes::from_static(b"data: [DONE]\n\n"));
    events
}
