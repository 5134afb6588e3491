//! A Messages request as a chat completions request.
//!
//! `system` (a string or text blocks) and the `system` turns among the messages
//! ([`fold`](crate::provider::system_turns::fold)ed into it) become one system message. User
//! and assistant turns keep their role: text blocks become text, image blocks (base64 or URL)
//! `image_url` parts, an assistant's `tool_use` blocks its `tool_calls` (the input as the
//! arguments' JSON), and a user's `tool_result` blocks `tool` messages, sent before the rest of
//! the turn as the chat API wants them right after the calls (a result's images, which a tool
//! message cannot hold, go with the rest of the turn). Tools (`input_schema` as
//! `parameters`), `tool_choice` (`auto`, `any` as `required`, `tool` as a named function,
//! `none`), `disable_parallel_tool_use`, `max_tokens` (as `max_completion_tokens`),
//! `stop_sequences`, `temperature`, `top_p` and `stream` (with `stream_options.include_usage`,
//! so the usage comes back) carry over; `output_config.format` (or the beta's `output_format`)
//! becomes `response_format`.
//!
//! Hints the chat API has no place for and whose absence leaves the answer's shape as the
//! client expects (`cache_control`, `metadata`, `thinking`, `context_management`,
//! `service_tier`, `output_config.effort`) are not sent. What would change the answer and
//! cannot be sent is refused with a field error naming it: server tools (`web_search`, `bash`,
//! ...), `mcp_servers`, `container`, `top_k`, documents, search results, thinking blocks and
//! server tool blocks in the turns.

use serde_json::{Map, Value, json};

use crate::provider::ProviderError;
use crate::provider::system_turns::fold;
use crate::provider::translate::{refuse_set, tool_fields};
use crate::request::ApiRequest;

/// Fields that ask for what only Anthropic's API does.
const REFUSED: [&str; 3] = ["mcp_servers", "container", "top_k"];

/// The chat completions body for a Messages `request` (its model already the upstream's).
pub(crate) fn body(request: &ApiRequest) -> Result<Value, ProviderError> {
    let json = fold(&request.json).map_err(ProviderError::Untranslatable)?;
    refuse_set(&json, &REFUSED)?;
    let mut messages = Vec::new();
    let system = text(json.get("system").unwrap_or(&Value::Null), "system")?;
    if !system.is_empty() {
        messages.push(json!({"role": "system", "content": system}));
    }
    for (i, turn) in json
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("messages[{i}]");
        match turn["role"].as_str() {
            Some("assistant") => messages.push(assistant(&turn["content"], &at)?),
            _ => messages.extend(user(&turn["content"], &at)?),
        }
    }
    let mut out = Map::new();
    out.insert("model".into(), json!(request.model));
    out.insert("messages".into(), Value::Array(messages));
    if let Some(cap) = request.max_tokens {
        out.insert("max_completion_tokens".into(), json!(cap));
    }
    for field in ["temperature", "top_p"] {
        if let Some(value) = json.get(field).filter(|v| !v.is_null()) {
            out.insert(field.into(), value.clone());
        }
    }
    if let Some(stops) = json.get("stop_sequences").and_then(Value::as_array)
        && !stops.is_empty()
    {
        out.insert("stop".into(), Value::Array(stops.clone()));
    }
    if let Some(tools) = json.get("tools").and_then(Value::as_array) {
        let tools = tools
            .iter()
            .enumerate()
            .map(|(i, t)| tool(t, &format!("tools[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        if !tools.is_empty() {
            out.insert("tools".into(), Value::Array(tools));
        }
    }
    // The chat API refuses a choice without tools.
    if let Some(choice) = json.get("tool_choice").filter(|c| c.is_object())
        && out.contains_key("tools")
    {
        tool_choice(choice, &mut out)?;
    }
    // The structured-output format: `output_config.format`, or the beta's `output_format`.
    let formats = [
        (
            json.get("output_config").and_then(|c| c.get("format")),
            "output_config.format",
        ),
        (json.get("output_format"), "output_format"),
    ];
    for (format, field) in formats {
        if let Some(format) = format.filter(|f| !f.is_null()) {
            out.insert("response_format".into(), response_format(format, field)?);
        }
    }
    if request.stream {
        out.insert("stream".into(), Value::Bool(true));
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Ok(Value::Object(out))
}

/// The text of a string or of text blocks, joined; any other block is refused.
fn text(content: &Value, at: &str) -> Result<String, ProviderError> {
    match content {
        Value::String(text) => Ok(text.clone()),
        Value::Array(blocks) => {
            let mut texts = Vec::with_capacity(blocks.len());
            for (j, block) in blocks.iter().enumerate() {
                if block["type"] != "text" {
                    return Err(refused(&format!("{at}[{j}]")));
                }
                texts.extend(block["text"].as_str());
            }
            Ok(texts.join("\n"))
        }
        _ => Ok(String::new()),
    }
}

/// The refusal of the block at `at`.
fn refused(at: &str) -> ProviderError {
    ProviderError::untranslatable(
        format!("{at}.type"),
        "this block cannot be sent to this model",
    )
}

/// A user turn: a `tool` message per `tool_result`, then a user message with the rest.
fn user(content: &Value, at: &str) -> Result<Vec<Value>, ProviderError> {
    let Value::Array(blocks) = content else {
        return Ok(vec![json!({"role": "user", "content": content})]);
    };
    let mut messages = Vec::new();
    let mut parts = Vec::new();
    for (j, block) in blocks.iter().enumerate() {
        let at = format!("{at}.content[{j}]");
        match block["type"].as_str() {
            Some("text") => parts.push(json!({"type": "text", "text": block["text"]})),
            Some("image") => parts.push(image(block, &at)?),
            Some("tool_result") => {
                let (mut output, images) = tool_output(&block["content"], &at)?;
                // A tool message holds text only: the result's images follow in the user
                // message after the tool messages.
                parts.extend(images);
                if block["is_error"] == true {
                    output = format!("Error: {output}");
                }
                messages.push(json!({"role": "tool", "tool_call_id": block["tool_use_id"],
                                     "content": output}));
            }
            _ => return Err(refused(&at)),
        }
    }
    if !parts.is_empty() {
        messages.push(json!({"role": "user", "content": parts}));
    }
    Ok(messages)
}

/// A `tool_result`'s content: its text, and its images as `image_url` parts.
fn tool_output(content: &Value, at: &str) -> Result<(String, Vec<Value>), ProviderError> {
    let Value::Array(blocks) = content else {
        return Ok((text(content, at)?, Vec::new()));
    };
    let mut texts = Vec::with_capacity(blocks.len());
    let mut images = Vec::new();
    for (k, block) in blocks.iter().enumerate() {
        let at = format!("{at}.content[{k}]");
        match block["type"].as_str() {
            Some("text") => texts.extend(block["text"].as_str()),
            Some("image") => images.push(image(block, &at)?),
            _ => return Err(refused(&at)),
        }
    }
    Ok((texts.join("\n"), images))
}

/// An image block as an `image_url` part: base64 as a data URL, a URL as itself.
fn image(block: &Value, at: &str) -> Result<Value, ProviderError> {
    let source = &block["source"];
    let url = match source["type"].as_str() {
        Some("base64") => format!(
            "data:{};base64,{}",
            source["media_type"].as_str().unwrap_or_default(),
            source["data"].as_str().unwrap_or_default()
        ),
        Some("url") => source["url"].as_str().unwrap_or_default().to_owned(),
        _ => {
            return Err(ProviderError::untranslatable(
                format!("{at}.source.type"),
                "an image for this model must be base64 or a URL",
            ));
        }
    };
    Ok(json!({"type": "image_url", "image_url": {"url": url}}))
}

/// An assistant turn: its text as the content, its `tool_use` blocks as `tool_calls`.
fn assistant(content: &Value, at: &str) -> Result<Value, ProviderError> {
    let Value::Array(blocks) = content else {
        return Ok(json!({"role": "assistant", "content": content}));
    };
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    for (j, block) in blocks.iter().enumerate() {
        match block["type"].as_str() {
            Some("text") => texts.extend(block["text"].as_str()),
            Some("tool_use") => calls.push(json!({
                "id": block["id"],
                "type": "function",
                "function": {"name": block["name"], "arguments": block["input"].to_string()},
            })),
            _ => return Err(refused(&format!("{at}.content[{j}]"))),
        }
    }
    let mut message = json!({"role": "assistant", "content": texts.concat()});
    if !calls.is_empty() {
        if texts.is_empty() {
            message["content"] = Value::Null;
        }
        message["tool_calls"] = Value::Array(calls);
    }
    Ok(message)
}

/// A client tool as a function; a server tool (one with a versioned `type`) is refused.
fn tool(tool: &Value, at: &str) -> Result<Value, ProviderError> {
    if tool
        .get("type")
        .is_some_and(|t| t != "custom" && !t.is_null())
    {
        return Err(ProviderError::untranslatable(
            format!("{at}.type"),
            "server tools cannot be sent to this model",
        ));
    }
    let function = tool_fields(tool, "input_schema", "parameters").ok_or_else(|| {
        ProviderError::untranslatable(format!("{at}.name"), "a tool needs a name")
    })?;
    Ok(json!({"type": "function", "function": function}))
}

fn tool_choice(choice: &Value, out: &mut Map<String, Value>) -> Result<(), ProviderError> {
    let mapped = match choice["type"].as_str() {
        Some("auto") => json!("auto"),
        Some("any") => json!("required"),
        Some("none") => json!("none"),
        Some("tool") => json!({"type": "function", "function": {"name": choice["name"]}}),
        _ => {
            return Err(ProviderError::untranslatable(
                "tool_choice.type",
                "this tool choice cannot be sent to this model",
            ));
        }
    };
    if choice["disable_parallel_tool_use"] == true {
        out.insert("parallel_tool_calls".into(), Value::Bool(false));
    }
    out.insert("tool_choice".into(), mapped);
    Ok(())
}

/// A structured-output format at `field` (`{"type": "json_schema", "schema": ...}`) as
/// `response_format`.
fn response_format(format: &Value, field: &str) -> Result<Value, ProviderError> {
    if format["type"] != "json_schema" {
        return Err(ProviderError::untranslatable(
            format!("{field}.type"),
            "this format cannot be sent to this model",
        ));
    }
    Ok(json!({"type": "json_schema", "json_schema": {
        "name": format.get("name").cloned().unwrap_or_else(|| json!("output")),
        "schema": format["schema"],
        "strict": true,
    }}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::translate::{refused_field, request};
    use crate::request::Endpoint;

    fn translate(body: Value) -> Result<Value, ProviderError> {
        super::body(&request(Endpoint::Messages, body))
    }

    #[test]
    fn a_tool_conversation_becomes_a_chat_request() {
        let sent = translate(json!({
            "model": "m", "max_tokens": 100, "stream": true,
            "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}},
                    {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
                ]},
                {"role": "system", "content": "Use tools."},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "look", "input": {"x": 1}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a cat"},
                    {"type": "text", "text": "And?"},
                ]},
            ],
            "tools": [{"name": "look", "description": "Looks", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
            "stop_sequences": ["END"],
            "temperature": 0.3,
            "thinking": {"type": "enabled", "budget_tokens": 10},
        }))
        .unwrap();
        assert_eq!(
            sent,
            json!({
                "model": "claude-x",
                "messages": [
                    {"role": "system", "content": "Be brief.\nUse tools."},
                    {"role": "user", "content": [
                        {"type": "text", "text": "What is this?"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
                        {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
                    ]},
                    {"role": "assistant", "content": "Looking.", "tool_calls": [
                        {"id": "toolu_1", "type": "function",
                         "function": {"name": "look", "arguments": "{\"x\":1}"}},
                    ]},
                    {"role": "tool", "tool_call_id": "toolu_1", "content": "a cat"},
                    {"role": "user", "content": [{"type": "text", "text": "And?"}]},
                ],
                "max_completion_tokens": 100,
                "temperature": 0.3,
                "stop": ["END"],
                "tools": [{"type": "function", "function": {"name": "look",
                    "description": "Looks", "parameters": {"type": "object"}}}],
                "parallel_tool_calls": false,
                "tool_choice": "required",
                "stream": true,
                "stream_options": {"include_usage": true},
            })
        );
    }

    #[test]
    fn a_tool_results_image_follows_the_tool_message() {
        let image = json!({"type": "image", "source": {"type": "url", "url": "https://x/y.png"}});
        let sent = translate(
            json!({"max_tokens": 1, "messages": [{"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t", "is_error": true,
                 "content": [{"type": "text", "text": "see"}, image]},
            ]}]}),
        )
        .unwrap();
        assert_eq!(
            sent["messages"],
            json!([
                {"role": "tool", "tool_call_id": "t", "content": "Error: see"},
                {"role": "user", "content": [
                    {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]},
            ])
        );
    }

    #[test]
    fn tool_choices_map() {
        let body = |choice: Value| {
            json!({"max_tokens": 1, "messages": [{"role": "user", "content": "hi"}],
                   "tools": [{"name": "f", "input_schema": {"type": "object"}}],
                   "tool_choice": choice})
        };
        for (choice, mapped) in [
            (json!({"type": "auto"}), json!("auto")),
            (json!({"type": "none"}), json!("none")),
            (
                json!({"type": "tool", "name": "f"}),
                json!({"type": "function", "function": {"name": "f"}}),
            ),
        ] {
            assert_eq!(translate(body(choice)).unwrap()["tool_choice"], mapped);
        }
        let mut toolless = body(json!({"type": "auto"}));
        toolless.as_object_mut().unwrap().remove("tools");
        assert!(translate(toolless).unwrap().get("tool_choice").is_none());
    }

    #[test]
    fn what_only_anthropic_does_is_named() {
        let turn = |content: Value| json!({"max_tokens": 1, "messages": [{"role": "user", "content": content}]});
        let cases = [
            (
                turn(json!([{"type": "document", "source": {"type": "text", "data": "x"}}])),
                "messages[0].content[0].type",
            ),
            (
                json!({"max_tokens": 1, "messages": [{"role": "user", "content": "hi"}],
                       "tools": [{"type": "web_search_20250305", "name": "web_search"}]}),
                "tools[0].type",
            ),
            (
                json!({"max_tokens": 1, "messages": [{"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "x", "signature": "s"}]}]}),
                "messages[0].content[0].type",
            ),
            (
                json!({"max_tokens": 1, "messages": [{"role": "system", "content": [
                    {"type": "image", "source": {}}]}]}),
                "messages[0].content[0].type",
            ),
            (
                json!({"max_tokens": 1, "top_k": 5, "messages": []}),
                "top_k",
            ),
            (
                turn(
                    json!([{"type": "tool_result", "tool_use_id": "t", "content": [
                    {"type": "document", "source": {}}]}]),
                ),
                "messages[0].content[0].content[0].type",
            ),
        ];
        for (body, field) in cases {
            assert_eq!(refused_field(translate(body)), field);
        }
    }

    #[test]
    fn an_output_format_is_a_response_format() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let sent = translate(json!({"max_tokens": 1, "messages": [],
            "output_config": {"format": {"type": "json_schema", "schema": schema}}}))
        .unwrap();
        let beta = translate(json!({"max_tokens": 1, "messages": [],
            "output_format": {"type": "json_schema", "schema": schema}}))
        .unwrap();
        assert_eq!(beta["response_format"], sent["response_format"]);
        assert_eq!(
            sent["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "output", "schema": schema,
                   "strict": true}})
        );
    }
}
