//! Anthropic's Messages API: a text answer, or one `tool_use`; as JSON or as the named SSE
//! events the Anthropic SDKs read (`message_start` … `message_stop`).
//!
//! A tool is called when tools are offered, `tool_choice` is not `none`, and the last user
//! turn carries no `tool_result` (in this API tool results come back as user turns).

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::{MOCK_REPLY, fresh_id, json_reply, prompt_tokens, reply_words, stream_reply, tokens};
use crate::provider::ProviderReply;
use crate::request::ApiRequest;

/// The tool the mock calls, when it calls one.
fn tool_to_call(json: &Map<String, Value>) -> Option<&str> {
    let tools = json.get("tools")?.as_array()?;
    let last = json.get("messages")?.as_array()?.last()?;
    let answered = last["content"]
        .as_array()
        .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"));
    if last["role"] != "user" || answered {
        return None;
    }
    match json.get("tool_choice").and_then(|c| c["type"].as_str()) {
        Some("none") => None,
        Some("tool") => json["tool_choice"]["name"].as_str(),
        _ => tools.iter().find_map(|t| t["name"].as_str()),
    }
}

pub(super) fn answer(request: &ApiRequest) -> ProviderReply {
    let id = fresh_id("msg_");
    let tool = tool_to_call(&request.json);
    let input = prompt_tokens(request);
    let (block, stop, output) = match tool {
        Some(name) => (
            json!({"type": "tool_use", "id": fresh_id("toolu_"), "name": name, "input": {}}),
            "tool_use",
            tokens(name) + 1,
        ),
        None => (
            json!({"type": "text", "text": MOCK_REPLY}),
            "end_turn",
            tokens(MOCK_REPLY),
        ),
    };
    if request.stream {
        return stream_reply(events(&id, &request.model, block, stop, input, output));
    }
    json_reply(json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": request.model,
        "content": [block],
        "stop_reason": stop,
        "stop_sequence": null,
        "usage": {"input_tokens": input, "output_tokens": output},
    }))
}

fn event(name: &str, data: Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

fn events(id: &str, model: &str, block: Value, stop: &str, input: u64, output: u64) -> Vec<Bytes> {
    let mut events = vec![event(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input, "output_tokens": 1},
        }}),
    )];
    let delta = |delta: Value| {
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        )
    };
    if block["type"] == "tool_use" {
        events.push(event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": block}),
        ));
        events.push(delta(
            json!({"type": "input_json_delta", "partial_json": "{}"}),
        ));
    } else {
        events.push(event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ));
        events.extend(reply_words().map(|w| delta(json!({"type": "text_delta", "text": w}))));
    }
    events.push(event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push(event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
               "usage": {"output_tokens": output}}),
    ));
    events.push(event("message_stop", json!({"type": "message_stop"})));
    events
}
