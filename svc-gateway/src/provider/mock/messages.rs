//! Anthropic's Messages API: a text answer, or one `tool_use`; as JSON or as the named SSE
//! events the Anthropic SDKs read (`message_start` … `message_stop`).
//!
//! A tool is called when tools the client runs (those with an `input_schema`) are offered,
//! `tool_choice` is not `none`, and the last turn (`system` turns aside) is the user's and
//! carries no `tool_result` (in this API tool results come back as user turns). A request with structured output (`output_format`,
//! or `output_config.format`) gets an instance of its schema as the text.

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::{
    Call, Pick, call_among, fresh_id, json_reply, pieces, prompt_tokens, reply_text, stream_reply,
    tokens,
};
use crate::provider::ProviderReply;
use crate::request::ApiRequest;

/// The tool the mock calls, when it calls one: the one `tool_choice` names, else the first
/// with an input schema (server tools, such as web search, have none) at the user's turn, or
/// the last after a tool's result when `tool_choice` is `any`.
fn tool_to_call(json: &Map<String, Value>) -> Option<Call<'_>> {
    let tools = json.get("tools")?.as_array()?;
    // System turns among the messages (as Claude Code sends them) are not the conversation's.
    let last = json
        .get("messages")?
        .as_array()?
        .iter()
        .rfind(|m| m["role"] != "system")?;
    let answered = last["content"]
        .as_array()
        .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"));
    let choice = json.get("tool_choice").and_then(|c| c["type"].as_str());
    let named = match choice {
        Some("none") => return None,
        Some("tool") => json["tool_choice"]["name"].as_str(),
        _ => None,
    };
    let users_turn = last["role"] == "user" && !answered;
    call_among(
        tools,
        Pick::of(named, choice == Some("any"), users_turn)?,
        |t| t.get("input_schema").is_some(),
        |t| t.get("name").and_then(Value::as_str),
        |t| t.get("input_schema"),
    )
}

pub(super) fn answer(request: &ApiRequest) -> ProviderReply {
    let id = fresh_id("msg_");
    let input = prompt_tokens(request);
    let (block, stop, output) = match tool_to_call(&request.json) {
        Some(call) => (
            json!({"type": "tool_use", "id": fresh_id("toolu_"), "name": call.name,
                   "input": call.arguments}),
            "tool_use",
            call.completion_tokens(),
        ),
        None => {
            let format = request
                .json
                .get("output_format")
                .or_else(|| request.json.get("output_config")?.get("format"));
            let text = reply_text(format);
            let output = tokens(&text);
            (json!({"type": "text", "text": text}), "end_turn", output)
        }
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
        // The block starts with an empty input, which the deltas then spell out.
        let input = block["input"].to_string();
        let mut start = block;
        start["input"] = json!({});
        events.push(event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": start}),
        ));
        events.extend(
            pieces(&input)
                .into_iter()
                .map(|piece| delta(json!({"type": "input_json_delta", "partial_json": piece}))),
        );
    } else {
        events.push(event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ));
        let text = block["text"].as_str().unwrap_or_default();
        events.extend(
            pieces(text)
                .into_iter()
                .map(|w| delta(json!({"type": "text_delta", "text": w}))),
        );
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
