//! A chat completion as a Messages answer: the content (or a refusal) as a text block, each
//! tool call as a `tool_use` block with its arguments parsed as the input, `finish_reason` as
//! `stop_reason`, and the prompt and completion tokens as input and output tokens.

use serde_json::{Value, json};

/// `finish_reason` as `stop_reason`.
pub(super) fn stop_reason(finish_reason: Option<&str>) -> &'static str {
    match finish_reason {
        Some("length") => "max_tokens",
        Some("tool_calls" | "function_call") => "tool_use",
        Some("content_filter") => "refusal",
        _ => "end_turn",
    }
}

/// A Messages id for a chat completion's id.
pub(super) fn message_id(id: &Value) -> String {
    let id = id.as_str().unwrap_or_default();
    if id.starts_with("msg_") {
        id.to_owned()
    } else {
        format!("msg_{id}")
    }
}

/// The Messages usage of a chat usage: every prompt token is an input token.
pub(super) fn usage(usage: &Value) -> Value {
    json!({
        "input_tokens": usage["prompt_tokens"].as_u64().unwrap_or(0),
        "output_tokens": usage["completion_tokens"].as_u64().unwrap_or(0),
    })
}

/// A tool call's arguments as a `tool_use` input: the JSON object the model wrote, or `{}`
/// when it wrote none.
pub(super) fn input(arguments: &str) -> Value {
    serde_json::from_str(arguments)
        .ok()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}))
}

/// The Messages answer for a chat completion `chat`.
pub(crate) fn message(chat: &Value) -> Value {
    let choice = &chat["choices"][0];
    let reply = &choice["message"];
    let mut content = Vec::new();
    for text in [&reply["content"], &reply["refusal"]] {
        if let Some(text) = text.as_str().filter(|t| !t.is_empty()) {
            content.push(json!({"type": "text", "text": text}));
        }
    }
    for call in reply["tool_calls"].as_array().into_iter().flatten() {
        let arguments = call["function"]["arguments"].as_str().unwrap_or_default();
        content.push(json!({
            "type": "tool_use",
            "id": call["id"],
            "name": call["function"]["name"],
            "input": input(arguments),
        }));
    }
    let stop_reason = if reply["refusal"].is_string() {
        "refusal"
    } else {
        stop_reason(choice["finish_reason"].as_str())
    };
    json!({
        "id": message_id(&chat["id"]),
        "type": "message",
        "role": "assistant",
        "model": chat["model"],
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": usage(&chat["usage"]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_tool_calls_become_blocks() {
        let chat = json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-x",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "Looking.",
                "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "look", "arguments": "{\"x\":1}"}}],
            }}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15},
        });
        assert_eq!(
            message(&chat),
            json!({
                "id": "msg_chatcmpl-1", "type": "message", "role": "assistant", "model": "gpt-x",
                "content": [
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "call_1", "name": "look", "input": {"x": 1}},
                ],
                "stop_reason": "tool_use", "stop_sequence": null,
                "usage": {"input_tokens": 11, "output_tokens": 4},
            })
        );
    }

    #[test]
    fn stop_reasons() {
        for (finish, stop) in [
            (Some("stop"), "end_turn"),
            (Some("length"), "max_tokens"),
            (Some("tool_calls"), "tool_use"),
            (Some("content_filter"), "refusal"),
            (None, "end_turn"),
        ] {
            assert_eq!(stop_reason(finish), stop);
        }
        let refused = json!({"choices": [{"finish_reason": "stop",
            "message": {"role": "assistant", "content": null, "refusal": "No."}}]});
        let answer = message(&refused);
        assert_eq!(answer["stop_reason"], "refusal");
        assert_eq!(answer["content"][0]["text"], "No.");
    }
}
