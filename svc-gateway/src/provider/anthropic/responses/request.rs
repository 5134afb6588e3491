//! A Responses API request as a Messages request.
//!
//! `instructions`, and `system` and `developer` messages, become `system`; `input` as a string
//! is one user turn; message items keep their role, with `input_text` and `output_text` parts
//! as text blocks and `input_image` parts as image blocks; a `function_call` item becomes an
//! assistant `tool_use` block (its `call_id` the block id) and a `function_call_output` a user
//! turn's `tool_result`. A custom tool (free-form text input) is a tool whose input is one
//! string, [`CUSTOM_INPUT`], and its calls and outputs go as a function's do. Function tools, `tool_choice`, `parallel_tool_calls`,
//! `max_output_tokens`, `temperature`, `top_p` and `stream` carry over, and a `text.format`
//! JSON schema becomes a forced tool ([`structured`](super::super::structured)).
//!
//! What has no counterpart is refused with a field error naming it: built-in tools
//! (`web_search`, `file_search`, ...), items other than messages and function and custom tool
//! calls and their outputs, `input_file` and `input_audio` parts, an image by `file_id`, and
//! `previous_response_id`, `conversation`, `background` and `prompt`, which need state the
//! gateway does not keep.

use serde_json::{Map, Value, json};

use super::super::request::{
    Translated, Turns, choice_with, content_blocks, function_tool, image, messages_body,
    part_refused, text_blocks, with_output_tool,
};
use super::super::structured;
use super::{CUSTOM_INPUT, namespaced};
use crate::provider::ProviderError;
use crate::provider::translate::refuse_set;
use crate::request::ApiRequest;

/// Fields that need state kept between calls, which the gateway does not keep, or ask for
/// what a Messages answer cannot hold.
const STATEFUL: [&str; 5] = [
    "previous_response_id",
    "conversation",
    "prompt",
    "background",
    "top_logprobs",
];

/// The Messages body for a Responses `request` (its model already the upstream's).
pub(crate) fn body(request: &ApiRequest) -> Result<Translated, ProviderError> {
    let json = &request.json;
    refuse_set(json, &STATEFUL)?;
    let format = json.get("text").and_then(|t| t.get("format"));
    let output = structured::output_tool(format, format, "text.format")?;
    let mut system = Vec::new();
    if let Some(instructions) = json.get("instructions") {
        system.extend(text_blocks(instructions));
    }
    let mut turns = Turns::default();
    match json.get("input") {
        Some(Value::String(text)) => turns.push("user", text_blocks(&json!(text))),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                input_item(item, &format!("input[{i}]"), &mut system, &mut turns)?;
            }
        }
        _ => {}
    }
    let mut out = messages_body(request, system, turns);
    if let Some(tools) = json.get("tools").and_then(Value::as_array) {
        let tools = tools
            .iter()
            .enumerate()
            .map(|(i, t)| tool(t, &format!("tools[{i}]")))
            .collect::<Result<Vec<_>, _>>()?
            .concat();
        if !tools.is_empty() {
            out.insert("tools".into(), Value::Array(tools));
        }
    }
    if let Some(choice) = tool_choice(json)? {
        out.insert("tool_choice".into(), choice);
    }
    let output_tool = with_output_tool(&mut out, output)?;
    Ok(Translated {
        body: Value::Object(out),
        output_tool,
    })
}

fn input_item(
    item: &Value,
    at: &str,
    system: &mut Vec<Value>,
    turns: &mut Turns,
) -> Result<(), ProviderError> {
    let kind = item["type"]
        .as_str()
        .unwrap_or(if item.get("role").is_some() {
            "message"
        } else {
            ""
        });
    match kind {
        "message" => match item["role"].as_str().unwrap_or_default() {
            "system" | "developer" => system.extend(text_blocks(&item["content"])),
            "assistant" => turns.push("assistant", message_blocks(&item["content"], at)?),
            _ => turns.push("user", message_blocks(&item["content"], at)?),
        },
        "function_call" | "custom_tool_call" => {
            let input = if kind == "custom_tool_call" {
                json!({ CUSTOM_INPUT: item["input"] })
            } else {
                // The model wrote the arguments; what it wrote goes back as its input, or `{}`.
                serde_json::from_str(item["arguments"].as_str().unwrap_or("{}"))
                    .ok()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({}))
            };
            turns.push(
                "assistant",
                vec![json!({"type": "tool_use", "id": item["call_id"],
                            "name": namespaced(item["namespace"].as_str(), &item["name"]),
                            "input": input})],
            );
        }
        "function_call_output" | "custom_tool_call_output" => {
            let content = match &item["output"] {
                Value::String(text) => text_blocks(&json!(text)),
                Value::Array(_) => message_blocks(&item["output"], &format!("{at}.output"))?,
                _ => Vec::new(),
            };
            turns.push(
                "user",
                vec![
                    json!({"type": "tool_result", "tool_use_id": item["call_id"],
                            "content": content}),
                ],
            );
        }
        _ => {
            return Err(ProviderError::untranslatable(
                format!("{at}.type"),
                "this input item cannot be sent to this model",
            ));
        }
    }
    Ok(())
}

/// A message's content (a string or parts) as Messages blocks.
fn message_blocks(content: &Value, at: &str) -> Result<Vec<Value>, ProviderError> {
    content_blocks(content, at, |part, at| match part["type"].as_str() {
        Some("input_text" | "output_text") => Ok(text_blocks(&json!([{"text": part["text"]}]))),
        Some("refusal") => Ok(text_blocks(&json!([{"text": part["refusal"]}]))),
        Some("input_image") if part["image_url"].is_string() => Ok(vec![image(
            part["image_url"].as_str(),
            &format!("{at}.image_url"),
        )?]),
        Some("input_image") => Err(ProviderError::untranslatable(
            format!("{at}.file_id"),
            "an image for this model must be given by URL",
        )),
        _ => Err(part_refused(at)),
    })
}

/// A function tool or a custom tool as a Messages tool; a namespace as its tools, each named
/// `{namespace}__{name}` (Messages has no namespaces); web search as Anthropic's web search
/// tool. Any other built-in tool is refused.
fn tool(tool: &Value, at: &str) -> Result<Vec<Value>, ProviderError> {
    let refused = || {
        ProviderError::untranslatable(
            format!("{at}.type"),
            "only function, custom, namespace and web search tools can be sent to this model",
        )
    };
    match tool["type"].as_str() {
        Some("function") => Ok(vec![function_tool(tool).ok_or_else(refused)?]),
        Some("custom") => Ok(vec![custom_tool(tool).ok_or_else(refused)?]),
        Some("namespace") => {
            let namespace = tool["name"].as_str().ok_or_else(refused)?;
            let mut tools = Vec::new();
            for (i, inner) in tool["tools"].as_array().into_iter().flatten().enumerate() {
                let inner_at = format!("{at}.tools[{i}]");
                if !matches!(inner["type"].as_str(), Some("function" | "custom")) {
                    return Err(ProviderError::untranslatable(
                        format!("{inner_at}.type"),
                        "only function and custom tools can be in a namespace for this model",
                    ));
                }
                let mut inner = inner.clone();
                inner["name"] = namespaced(Some(namespace), &inner["name"]);
                tools.extend(self::tool(&inner, &inner_at)?);
            }
            Ok(tools)
        }
        Some("web_search" | "web_search_preview") => Ok(vec![web_search_tool(tool)]),
        _ => Err(refused()),
    }
}

/// Anthropic's web search server tool for OpenAI's `web_search`: its domain filter and the
/// user's location travel; OpenAI's `external_web_access` and `search_context_size` have no
/// counterpart (Anthropic searches the live web).
fn web_search_tool(tool: &Value) -> Value {
    let mut out = json!({"type": WEB_SEARCH_TOOL, "name": "web_search"});
    if let Some(domains) = tool
        .pointer("/filters/allowed_domains")
        .filter(|d| d.is_array())
    {
        out["allowed_domains"] = domains.clone();
    }
    if let Some(location) = tool.get("user_location").filter(|l| l.is_object()) {
        out["user_location"] = location.clone();
    }
    out
}

/// The version of Anthropic's web search tool the gateway sends.
const WEB_SEARCH_TOOL: &str = "web_search_20250305";

/// A custom tool (free-form text input) as a Messages tool whose input is that text, the
/// one string field [`CUSTOM_INPUT`]; a grammar the text must follow goes in the description.
fn custom_tool(tool: &Value) -> Option<Value> {
    let mut description = tool["description"].as_str().unwrap_or_default().to_owned();
    let format = &tool["format"];
    if format["type"] == "grammar" {
        description.push_str(&format!(
            "\n\nThe input follows this {} grammar:\n{}",
            format["syntax"].as_str().unwrap_or_default(),
            format["definition"].as_str().unwrap_or_default()
        ));
    }
    Some(json!({
        "name": tool.get("name")?,
        "description": description,
        "input_schema": {
            "type": "object",
            "properties": {CUSTOM_INPUT: {"type": "string", "description": "The input, as text."}},
            "required": [CUSTOM_INPUT],
        },
    }))
}

/// `tool_choice`: `none`, `auto`, `required`, or `{"type": "function" or "custom", "name"}`.
fn tool_choice(json: &Map<String, Value>) -> Result<Option<Value>, ProviderError> {
    if let Some(Value::Object(choice)) = json.get("tool_choice")
        && !matches!(
            choice.get("type").and_then(Value::as_str),
            Some("function" | "custom")
        )
    {
        return Err(ProviderError::untranslatable(
            "tool_choice.type",
            "only a function or a custom tool can be chosen for this model",
        ));
    }
    Ok(choice_with(json, |c| c.get("name").cloned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::translate::{refused_field, request};
    use crate::request::Endpoint;

    fn translate(body: Value) -> Result<Translated, ProviderError> {
        super::body(&request(Endpoint::Responses, body))
    }

    #[test]
    fn a_string_input_is_one_user_turn() {
        let sent = translate(
            json!({"model": "m", "input": "hi", "instructions": "Be brief.",
            "max_output_tokens": 50, "temperature": 0.5, "stream": true}),
        )
        .unwrap()
        .body;
        assert_eq!(
            sent,
            json!({"model": "claude-x", "max_tokens": 50,
                "system": [{"type": "text", "text": "Be brief."}],
                "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                "temperature": 0.5, "stream": true})
        );
    }

    #[test]
    fn a_tool_loop_becomes_tool_use_and_tool_result() {
        let sent = translate(json!({"model": "m",
            "input": [
                {"role": "developer", "content": "Use tools."},
                {"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": "What is this?"},
                    {"type": "input_image", "image_url": "https://x/y.png"},
                ]},
                {"type": "function_call", "call_id": "call_1", "name": "look",
                 "arguments": "{\"x\":1}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "a cat"},
                {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": "A cat."}]},
            ],
            "tools": [{"type": "function", "name": "look", "description": "Looks",
                       "parameters": {"type": "object"}}],
            "tool_choice": {"type": "function", "name": "look"},
            "parallel_tool_calls": false,
        }))
        .unwrap()
        .body;
        assert_eq!(
            sent["system"],
            json!([{"type": "text", "text": "Use tools."}])
        );
        let messages = sent["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 4);
        assert_eq!(
            messages[0]["content"][1],
            json!({"type": "image", "source": {"type": "url", "url": "https://x/y.png"}})
        );
        assert_eq!(
            messages[1]["content"][0],
            json!({"type": "tool_use", "id": "call_1", "name": "look", "input": {"x": 1}})
        );
        assert_eq!(
            messages[2]["content"][0],
            json!({"type": "tool_result", "tool_use_id": "call_1",
                   "content": [{"type": "text", "text": "a cat"}]})
        );
        assert_eq!(messages[3]["role"], "assistant");
        assert_eq!(
            sent["tools"],
            json!([{"name": "look", "description": "Looks", "input_schema": {"type": "object"}}])
        );
        assert_eq!(
            sent["tool_choice"],
            json!({"type": "tool", "name": "look", "disable_parallel_tool_use": true})
        );
    }

    #[test]
    fn a_namespace_is_its_tools_and_web_search_is_anthropics() {
        let sent = translate(json!({"model": "m",
            "input": [
                {"type": "function_call", "call_id": "call_1", "name": "spawn",
                 "namespace": "agents", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "ok"},
            ],
            "tools": [
                {"type": "namespace", "name": "agents", "description": "Sub-agents.",
                 "tools": [{"type": "function", "name": "spawn", "parameters": {"type": "object"}}]},
                {"type": "web_search", "external_web_access": false,
                 "filters": {"allowed_domains": ["docs.rs"]}},
            ],
        }))
        .unwrap()
        .body;
        assert_eq!(sent["tools"][0]["name"], "agents__spawn");
        assert_eq!(
            sent["tools"][1],
            json!({"type": "web_search_20250305", "name": "web_search",
                   "allowed_domains": ["docs.rs"]})
        );
        assert_eq!(sent["messages"][0]["content"][0]["name"], "agents__spawn");
        let refused = translate(json!({"model": "m", "input": "hi", "tools": [
            {"type": "namespace", "name": "n", "tools": [{"type": "file_search"}]}]}));
        match refused {
            Err(ProviderError::Untranslatable(error)) => {
                assert_eq!(error.field, "tools[0].tools[0].type")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_custom_tool_takes_its_text_as_one_string() {
        let sent = translate(json!({"model": "m",
            "input": [
                {"type": "custom_tool_call", "call_id": "call_1", "name": "apply_patch",
                 "input": "*** Begin Patch"},
                {"type": "custom_tool_call_output", "call_id": "call_1", "output": "Done"},
            ],
            "tools": [{"type": "custom", "name": "apply_patch", "description": "Patches.",
                       "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"}}],
            "tool_choice": {"type": "custom", "name": "apply_patch"},
        }))
        .unwrap()
        .body;
        let tool = &sent["tools"][0];
        assert_eq!(tool["input_schema"]["required"], json!([CUSTOM_INPUT]));
        assert!(
            tool["description"]
                .as_str()
                .unwrap()
                .ends_with("lark grammar:\nstart: x")
        );
        assert_eq!(
            sent["messages"][0]["content"][0]["input"],
            json!({ CUSTOM_INPUT: "*** Begin Patch" })
        );
        assert_eq!(sent["messages"][1]["content"][0]["type"], "tool_result");
        assert_eq!(
            sent["tool_choice"],
            json!({"type": "tool", "name": "apply_patch"})
        );
    }

    #[test]
    fn a_json_schema_format_is_a_forced_tool() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        let sent = translate(json!({"model": "m", "input": "hi", "text": {"format": {
            "type": "json_schema", "name": "Answer", "schema": schema, "strict": true}}}))
        .unwrap();
        assert_eq!(sent.output_tool.as_deref(), Some("Answer"));
        assert_eq!(sent.body["tools"][0]["input_schema"], schema);
        assert_eq!(
            sent.body["tool_choice"],
            json!({"type": "tool", "name": "Answer"})
        );
    }

    #[test]
    fn what_has_no_counterpart_is_named() {
        let cases = [
            (
                json!({"input": "hi", "tools": [{"type": "file_search"}]}),
                "tools[0].type",
            ),
            (
                json!({"input": [{"role": "user", "content": [
                    {"type": "input_audio", "input_audio": {}}]}]}),
                "input[0].content[0].type",
            ),
            (
                json!({"input": [{"role": "user", "content": [
                    {"type": "input_image", "file_id": "file_1"}]}]}),
                "input[0].content[0].file_id",
            ),
            (
                json!({"input": [{"type": "reasoning", "summary": []}]}),
                "input[0].type",
            ),
            (
                json!({"input": "hi", "previous_response_id": "resp_1"}),
                "previous_response_id",
            ),
            (
                json!({"input": "hi", "tools": [{"type": "function", "name": "f"}],
                       "tool_choice": {"type": "web_search"}}),
                "tool_choice.type",
            ),
        ];
        for (body, field) in cases {
            assert_eq!(refused_field(translate(body)), field);
        }
    }
}
