//! A Messages answer as a Responses object: the text as one `message` output item with an
//! `output_text` part (the forced tool's input instead, as JSON, for a `text.format` schema),
//! each `tool_use` block as a `function_call` item (a `custom_tool_call` item for a custom
//! tool, its text as the input), the stop reason as `status` and
//! `incomplete_details`, and the usage in input and output tokens.

use serde_json::{Value, json};

use super::super::response::{answer_text, is_output};
use super::{Echo, custom_input, item_id, object, status, usage};

/// A `message` output item holding `text`, done.
pub(super) fn message_item(id: &str, text: &str) -> Value {
    json!({
        "type": "message",
        "id": id,
        "status": "completed",
        "role": "assistant",
        "content": [output_text(text)],
    })
}

/// An `output_text` content part.
pub(super) fn output_text(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": []})
}

/// A `function_call` output item.
pub(super) fn function_call(id: &str, block: &Value, arguments: &str, status: &str) -> Value {
    json!({
        "type": "function_call",
        "id": id,
        "call_id": block["id"],
        "name": block["name"],
        "arguments": arguments,
        "status": status,
    })
}

/// A `custom_tool_call` output item.
pub(super) fn custom_tool_call(id: &str, block: &Value, input: &str, status: &str) -> Value {
    json!({
        "type": "custom_tool_call",
        "id": id,
        "call_id": block["id"],
        "name": block["name"],
        "input": input,
        "status": status,
    })
}

/// The Responses object for a Messages answer `message`.
pub(crate) fn response(message: &Value, echo: &Echo) -> Value {
    let blocks = message["content"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let output_tool = echo.output_tool.as_deref();
    let mut output = Vec::new();
    let text = answer_text(blocks, output_tool);
    if !text.is_empty() {
        output.push(message_item(&item_id("msg", message, 0), &text));
    }
    for (i, block) in blocks.iter().enumerate() {
        if block["type"] != "tool_use" || is_output(block, output_tool) {
            continue;
        }
        if echo.is_custom(block) {
            let id = item_id("ctc", message, i);
            let input = custom_input(&block["input"]);
            output.push(echo.with_namespace(custom_tool_call(&id, block, input, "completed")));
        } else {
            let arguments = block["input"].to_string();
            let id = item_id("fc", message, i);
            output.push(echo.with_namespace(function_call(&id, block, &arguments, "completed")));
        }
    }
    let (status, incomplete) = status(message["stop_reason"].as_str());
    object(
        echo,
        message,
        status,
        incomplete,
        output,
        usage(&message["usage"]),
    )
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::provider::translate::request;
    use crate::request::Endpoint;

    pub(crate) fn echo(body: Value, output_tool: Option<&str>) -> Echo {
        let request = request(Endpoint::Responses, body);
        Echo::of(&request, 7, output_tool.map(str::to_owned))
    }

    #[test]
    fn a_namespaced_call_names_its_namespace() {
        let body = json!({"model": "m", "input": "hi", "tools": [
            {"type": "namespace", "name": "agents", "tools": [{"type": "function", "name": "spawn"}]}]});
        let message = json!({
            "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "agents__spawn", "input": {}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1},
        });
        let output = &response(&message, &echo(body, None))["output"];
        assert_eq!(output[0]["name"], "spawn");
        assert_eq!(output[0]["namespace"], "agents");
    }

    #[test]
    fn text_and_tool_use_become_output_items() {
        let message = json!({
            "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 7},
        });
        let response = response(&message, &echo(json!({"instructions": "Be brief."}), None));
        assert_eq!(response["object"], "response");
        assert_eq!(response["id"], "resp_01");
        assert_eq!(response["status"], "completed");
        assert_eq!(response["created_at"], 7);
        assert_eq!(response["instructions"], "Be brief.");
        assert_eq!(response["tool_choice"], "auto");
        let output = response["output"].as_array().unwrap();
        assert_eq!(output[0]["type"], "message");
        assert_eq!(output[0]["content"][0]["text"], "Let me look.");
        assert_eq!(output[1]["type"], "function_call");
        assert_eq!(output[1]["call_id"], "toolu_1");
        assert_eq!(output[1]["arguments"], r#"{"city":"Oslo"}"#);
        assert_eq!(
            response["usage"],
            json!({"input_tokens": 15, "input_tokens_details": {"cached_tokens": 5},
                   "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 0},
                   "total_tokens": 22})
        );
    }

    #[test]
    fn a_custom_tools_call_is_a_custom_tool_call() {
        let message = json!({
            "id": "msg_03", "model": "claude-x", "stop_reason": "tool_use",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "apply_patch",
                         "input": {"input": "*** Begin Patch"}}],
            "usage": {"input_tokens": 1, "output_tokens": 2},
        });
        let tools = json!({"tools": [{"type": "custom", "name": "apply_patch"}]});
        let response = response(&message, &echo(tools, None));
        assert_eq!(
            response["output"][0],
            json!({"type": "custom_tool_call", "id": "ctc_03_0", "call_id": "toolu_1",
                   "name": "apply_patch", "input": "*** Begin Patch", "status": "completed"})
        );
    }

    #[test]
    fn a_cut_answer_is_incomplete_and_a_schema_answer_is_text() {
        let message = json!({
            "id": "msg_02", "model": "claude-x", "stop_reason": "max_tokens",
            "content": [{"type": "tool_use", "id": "t", "name": "Answer", "input": {"a": 1}}],
            "usage": {"input_tokens": 1, "output_tokens": 2},
        });
        let response = response(&message, &echo(json!({}), Some("Answer")));
        assert_eq!(response["status"], "incomplete");
        assert_eq!(
            response["incomplete_details"],
            json!({"reason": "max_output_tokens"})
        );
        let output = response["output"].as_array().unwrap();
        assert_eq!(output.len(), 1);
        assert_eq!(output[0]["content"][0]["text"], r#"{"a":1}"#);
    }
}
