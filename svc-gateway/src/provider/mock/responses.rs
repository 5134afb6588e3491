//! The Responses API: one output item (a message, or a function call), as a response object or
//! as its typed events (`event:` lines included, as OpenAI sends them). The message is an
//! instance of `text.format`'s schema when one is asked for.

use bytes::Bytes;
use serde_json::{Value, json};

use super::{
    fresh_id, json_reply, now, pieces, prompt_tokens, reply_text, stream_reply, tokens,
    tool_to_call,
};
use crate::provider::ProviderReply;
use crate::request::ApiRequest;

pub(super) fn answer(request: &ApiRequest) -> ProviderReply {
    let last_role = match request.json.get("input") {
        Some(Value::String(_)) => Some("user"),
        Some(Value::Array(items)) => items
            .last()
            .and_then(|i| i.get("role"))
            .and_then(Value::as_str),
        _ => None,
    };
    let call = tool_to_call(&request.json, last_role);
    let text = reply_text(request.json.get("text").and_then(|t| t.get("format")));
    let prompt = prompt_tokens(request);
    let completion = call
        .as_ref()
        .map_or_else(|| tokens(&text), |call| call.completion_tokens());
    let usage = json!({
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    });
    let item = match call {
        Some(call) => json!({
            "type": "function_call",
            "id": fresh_id("fc_"),
            "call_id": fresh_id("call_"),
            "name": call.name,
            "arguments": call.arguments.to_string(),
            "status": "completed",
        }),
        None => json!({
            "type": "message",
            "id": fresh_id("msg_"),
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }),
    };
    let done = response(
        request,
        &fresh_id("resp_"),
        "completed",
        vec![item.clone()],
        usage,
    );
    if request.stream {
        return stream_reply(events(done, item));
    }
    json_reply(done)
}

fn response(
    request: &ApiRequest,
    id: &str,
    status: &str,
    output: Vec<Value>,
    usage: Value,
) -> Value {
    let echo = |field: &str, default: Value| request.json.get(field).cloned().unwrap_or(default);
    json!({
        "id": id,
        "object": "response",
        "created_at": now(),
        "status": status,
        "model": request.model,
        "output": output,
        "usage": usage,
        "error": null,
        "incomplete_details": null,
        "instructions": echo("instructions", Value::Null),
        "metadata": echo("metadata", json!({})),
        "parallel_tool_calls": echo("parallel_tool_calls", json!(true)),
        "temperature": echo("temperature", json!(1.0)),
        "tool_choice": echo("tool_choice", json!("auto")),
        "tools": echo("tools", json!([])),
        "top_p": echo("top_p", json!(1.0)),
        "text": echo("text", json!({"format": {"type": "text"}})),
        "truncation": "disabled",
    })
}

/// The events of a streamed response: created, in progress, the item (its text word by word),
/// completed.
fn events(done: Value, item: Value) -> Vec<Bytes> {
    let mut sequence = 0;
    let mut out = Vec::new();
    let mut emit = |kind: &str, mut data: Value| {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(sequence);
        sequence += 1;
        out.push(Bytes::from(format!("event: {kind}\ndata: {data}\n\n")));
    };
    let mut pending = done.clone();
    pending["status"] = json!("in_progress");
    pending["output"] = json!([]);
    pending["usage"] = Value::Null;
    emit("response.created", json!({"response": pending}));
    emit("response.in_progress", json!({"response": pending}));
    let item_id = item["id"].clone();
    let mut added = item.clone();
    added["status"] = json!("in_progress");
    if item["type"] == "message" {
        added["content"] = json!([]);
        emit(
            "response.output_item.added",
            json!({"output_index": 0, "item": added}),
        );
        let empty = json!({"type": "output_text", "text": "", "annotations": []});
        let at = json!({"item_id": item_id, "output_index": 0, "content_index": 0});
        let with = |extra: Value| {
            let mut data = at.clone();
            if let (Some(data), Some(extra)) = (data.as_object_mut(), extra.as_object()) {
                data.extend(extra.clone());
            }
            data
        };
        emit("response.content_part.added", with(json!({"part": empty})));
        let text = item["content"][0]["text"].as_str().unwrap_or_default();
        for word in pieces(text) {
            emit(
                "response.output_text.delta",
                with(json!({"delta": word, "logprobs": []})),
            );
        }
        emit(
            "response.output_text.done",
            with(json!({"text": text, "logprobs": []})),
        );
        emit(
            "response.content_part.done",
            with(json!({"part": item["content"][0]})),
        );
    } else {
        added["arguments"] = json!("");
        emit(
            "response.output_item.added",
            json!({"output_index": 0, "item": added}),
        );
        let arguments = item["arguments"].as_str().unwrap_or_default();
        for piece in pieces(arguments) {
            emit(
                "response.function_call_arguments.delta",
                json!({"item_id": item_id, "output_index": 0, "delta": piece}),
            );
        }
        emit(
            "response.function_call_arguments.done",
            json!({"item_id": item_id, "output_index": 0, "arguments": item["arguments"]}),
        );
    }
    emit(
        "response.output_item.done",
        json!({"output_index": 0, "item": item}),
    );
    emit("response.completed", json!({"response": done}));
    out
}
