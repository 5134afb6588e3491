//! A Messages answer as a chat completion: text blocks joined as the content, `tool_use`
//! blocks as `tool_calls` (their input as the arguments' JSON), `stop_reason` as
//! `finish_reason`, and the usage's input and output tokens as prompt and completion tokens.
//! The input of the forced tool of a structured-output request is the content instead, as
//! JSON, and the finish reason `stop` (see [`structured`](super::structured)).

use serde_json::{Value, json};

/// `stop_reason` as `finish_reason`.
pub(super) fn finish_reason(stop_reason: Option<&str>) -> Option<&'static str> {
    Some(match stop_reason? {
        "max_tokens" | "model_context_window_exceeded" => "length",
        "tool_use" => "tool_calls",
        "refusal" => "content_filter",
        _ => "stop",
    })
}

/// Every input token the answer was billed for: fresh, written to and read from the cache.
pub(super) fn prompt_tokens(usage: &Value) -> u64 {
    [
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    ]
    .iter()
    .filter_map(|k| usage[*k].as_u64())
    .sum()
}

/// The OpenAI usage object of a Messages usage.
pub(super) fn usage(usage: &Value) -> Value {
    let prompt = prompt_tokens(usage);
    let completion = usage["output_tokens"].as_u64().unwrap_or(0);
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {
            "cached_tokens": usage["cache_read_input_tokens"].as_u64().unwrap_or(0),
        },
    })
}

/// Whether `block` is the call of the forced tool named `output_tool`.
pub(super) fn is_output(block: &Value, output_tool: Option<&str>) -> bool {
    output_tool.is_some_and(|name| block["type"] == "tool_use" && block["name"] == name)
}

/// A Messages answer's text: its text blocks, or the forced tool's input as JSON.
pub(super) fn answer_text(blocks: &[Value], output_tool: Option<&str>) -> String {
    match blocks.iter().find(|b| is_output(b, output_tool)) {
        Some(output) => output["input"].to_string(),
        None => blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect(),
    }
}

/// The stop reason with the forced tool's call taken for the end of the turn.
pub(super) fn stop_reason(stop_reason: Option<&str>, called_tools: bool) -> Option<&str> {
    match stop_reason {
        Some("tool_use") if !called_tools => Some("end_turn"),
        other => other,
    }
}

/// The chat completion for a Messages answer `message`; `output_tool` names the forced tool
/// of a structured-output request.
pub(crate) fn completion(message: &Value, created: i64, output_tool: Option<&str>) -> Value {
    let blocks = message["content"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let text = answer_text(blocks, output_tool);
    let calls: Vec<Value> = blocks
        .iter()
        .filter(|b| b["type"] == "tool_use" && !is_output(b, output_tool))
        .map(|b| {
            json!({
                "id": b["id"],
                "type": "function",
                "function": {"name": b["name"], "arguments": b["input"].to_string()},
            })
        })
        .collect();
    let has_calls = !calls.is_empty();
    let mut reply = json!({"role": "assistant", "content": null});
    if !text.is_empty() {
        reply["content"] = Value::String(text);
    }
    if !calls.is_empty() {
        reply["tool_calls"] = Value::Array(calls);
    }
    json!({
        "id": message["id"],
        "object": "chat.completion",
        "created": created,
        "model": message["model"],
        "choices": [{
            "index": 0,
            "message": reply,
            "finish_reason": finish_reason(stop_reason(message["stop_reason"].as_str(), has_calls))
                .unwrap_or("stop"),
        }],
        "usage": usage(&message["usage"]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_tool_use_become_a_chat_message() {
        let message = json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 7},
        });
        let chat = completion(&message, 1, None);
        assert_eq!(chat["choices"][0]["finish_reason"], "tool_calls");
        let reply = &chat["choices"][0]["message"];
        assert_eq!(reply["content"], "Let me look.");
        assert_eq!(reply["tool_calls"][0]["id"], "toolu_1");
        assert_eq!(
            reply["tool_calls"][0]["function"]["arguments"],
            r#"{"city":"Oslo"}"#
        );
        assert_eq!(
            chat["usage"],
            json!({"prompt_tokens": 15, "completion_tokens": 7, "total_tokens": 22,
                   "prompt_tokens_details": {"cached_tokens": 5}})
        );
    }

    #[test]
    fn the_forced_tools_input_is_the_answer() {
        let message = json!({
            "id": "msg_1", "model": "claude-x", "stop_reason": "tool_use",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "Person",
                         "input": {"name": "Ada"}}],
            "usage": {"input_tokens": 3, "output_tokens": 4},
        });
        let chat = completion(&message, 1, Some("Person"));
        assert_eq!(chat["choices"][0]["finish_reason"], "stop");
        let reply = &chat["choices"][0]["message"];
        assert_eq!(reply["content"], r#"{"name":"Ada"}"#);
        assert!(reply.get("tool_calls").is_none());
    }

    #[test]
    fn stop_reasons() {
        for (stop, finish) in [
            ("end_turn", "stop"),
            ("stop_sequence", "stop"),
            ("max_tokens", "length"),
            ("tool_use", "tool_calls"),
            ("refusal", "content_filter"),
        ] {
            assert_eq!(finish_reason(Some(stop)), Some(finish));
        }
        assert_eq!(finish_reason(None), None);
    }
}
