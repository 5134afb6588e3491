//! A chat completion request as a Messages request.
//!
//! System and developer messages become `system`; user and assistant turns keep their role,
//! text parts become text blocks and `image_url` parts image blocks (a data URL as base64, any
//! other URL as a URL source); an assistant's `tool_calls` become `tool_use` blocks and a
//! `tool` message a user turn's `tool_result`. Consecutive turns of one role are merged, as
//! the Messages API wants parallel tool results in one turn. `tools`, `tool_choice`,
//! `parallel_tool_calls`, `stop`, `temperature`, `top_p` and the token cap carry over; a
//! request without a cap gets [`DEFAULT_MAX_TOKENS`], which the Messages API requires.
//! `response_format` with a JSON schema (or `json_object`) becomes a forced tool
//! ([`structured`](super::structured)). What has no counterpart (`n` above 1, audio parts and
//! answers, a function role, web search, log probabilities, legacy `functions`) is refused with
//! a field error naming it.

use serde_json::{Map, Value, json};

use super::structured::{self, OutputTool};
use crate::provider::ProviderError;
use crate::provider::translate::{refuse_set, tool_fields};
use crate::request::ApiRequest;

/// Chat fields a Messages request has no counterpart for.
const CANNOT_CARRY: [&str; 6] = [
    "web_search_options",
    "audio",
    "logprobs",
    "top_logprobs",
    "functions",
    "function_call",
];

/// `max_tokens` of a chat request that set no cap.
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// A translated request: the Messages body, and the name of the forced tool whose input is the
/// answer, when the client asked for structured output.
#[derive(Debug, Clone)]
pub(crate) struct Translated {
    pub(crate) body: Value,
    pub(crate) output_tool: Option<String>,
}

/// Consecutive turns of one role, merged as the Messages API wants them.
#[derive(Default)]
pub(super) struct Turns(Vec<(&'static str, Vec<Value>)>);

impl Turns {
    pub(super) fn push(&mut self, role: &'static str, blocks: Vec<Value>) {
        if blocks.is_empty() {
            return;
        }
        match self.0.last_mut() {
            Some((last, content)) if *last == role => content.extend(blocks),
            _ => self.0.push((role, blocks)),
        }
    }

    pub(super) fn into_messages(self) -> Value {
        self.0
            .into_iter()
            .map(|(role, content)| json!({"role": role, "content": content}))
            .collect()
    }
}

/// The fields every translation to the Messages API sets the same way: the model, the cap,
/// the system blocks, the turns, sampling and streaming.
pub(super) fn messages_body(
    request: &ApiRequest,
    system: Vec<Value>,
    turns: Turns,
) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("model".into(), json!(request.model));
    out.insert(
        "max_tokens".into(),
        json!(request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    if !system.is_empty() {
        out.insert("system".into(), Value::Array(system));
    }
    out.insert("messages".into(), turns.into_messages());
    for field in ["temperature", "top_p"] {
        if let Some(value) = request.json.get(field).filter(|v| !v.is_null()) {
            out.insert(field.into(), value.clone());
        }
    }
    if request.stream {
        out.insert("stream".into(), Value::Bool(true));
    }
    out
}

/// Adds the forced tool of a structured-output request, and returns its name.
pub(super) fn with_output_tool(
    out: &mut Map<String, Value>,
    tool: Option<OutputTool>,
) -> Result<Option<String>, ProviderError> {
    let Some(tool) = tool else {
        return Ok(None);
    };
    let name = tool.name.clone();
    structured::force(out, tool, "tools")?;
    Ok(Some(name))
}

/// The Messages body for `request` (its model already the upstream's).
pub(crate) fn body(request: &ApiRequest) -> Result<Translated, ProviderError> {
    let chat = &request.json;
    if chat.get("n").and_then(Value::as_u64).is_some_and(|n| n > 1) {
        return Err(ProviderError::untranslatable(
            "n",
            "n above 1 cannot be sent to this model",
        ));
    }
    // Each asks for what a Messages answer cannot hold (search results, audio, log
    // probabilities) or is the legacy form of tools.
    refuse_set(chat, &CANNOT_CARRY)?;
    if chat
        .get("modalities")
        .and_then(Value::as_array)
        .is_some_and(|m| m.iter().any(|m| m != "text"))
    {
        return Err(ProviderError::untranslatable(
            "modalities",
            "this model answers with text only",
        ));
    }
    let format = chat.get("response_format");
    let output = structured::output_tool(
        format,
        format.and_then(|f| f.get("json_schema")),
        "response_format.json_schema",
    )?;
    let mut system = Vec::new();
    let mut turns = Turns::default();
    for (i, message) in chat
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("messages[{i}]");
        let (role, blocks) = match message["role"].as_str().unwrap_or_default() {
            "system" | "developer" => {
                system.extend(text_blocks(&message["content"]));
                continue;
            }
            "user" => ("user", user_blocks(&message["content"], &at)?),
            "assistant" => ("assistant", assistant_blocks(message)),
            "tool" => ("user", vec![tool_result(message)]),
            _ => {
                return Err(ProviderError::untranslatable(
                    format!("{at}.role"),
                    "this role cannot be sent to this model",
                ));
            }
        };
        turns.push(role, blocks);
    }
    let mut out = messages_body(request, system, turns);
    match chat.get("stop") {
        Some(Value::String(stop)) => {
            out.insert("stop_sequences".into(), json!([stop]));
        }
        Some(Value::Array(stops)) => {
            out.insert("stop_sequences".into(), Value::Array(stops.clone()));
        }
        _ => {}
    }
    if let Some(tools) = chat.get("tools").and_then(Value::as_array) {
        let tools = tools
            .iter()
            .enumerate()
            .map(|(i, t)| {
                tool(t).ok_or_else(|| {
                    ProviderError::untranslatable(
                        format!("tools[{i}].type"),
                        "only function tools can be sent to this model",
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        out.insert("tools".into(), Value::Array(tools));
    }
    if let Some(choice) = tool_choice(chat) {
        out.insert("tool_choice".into(), choice);
    }
    let output_tool = with_output_tool(&mut out, output)?;
    Ok(Translated {
        body: Value::Object(out),
        output_tool,
    })
}

/// The text of a string or of text parts, as text blocks.
pub(super) fn text_blocks(content: &Value) -> Vec<Value> {
    match content {
        Value::String(text) if !text.is_empty() => vec![json!({"type": "text", "text": text})],
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str().or(p["refusal"].as_str()))
            .filter(|t| !t.is_empty())
            .map(|text| json!({"type": "text", "text": text}))
            .collect(),
        _ => Vec::new(),
    }
}

/// A message's `content` (a string, or parts each turned into blocks by `part` with its
/// path) as Messages blocks.
pub(super) fn content_blocks(
    content: &Value,
    at: &str,
    part: impl Fn(&Value, &str) -> Result<Vec<Value>, ProviderError>,
) -> Result<Vec<Value>, ProviderError> {
    let Value::Array(parts) = content else {
        return Ok(text_blocks(content));
    };
    let mut blocks = Vec::with_capacity(parts.len());
    for (j, one) in parts.iter().enumerate() {
        blocks.extend(part(one, &format!("{at}.content[{j}]"))?);
    }
    Ok(blocks)
}

fn user_blocks(content: &Value, at: &str) -> Result<Vec<Value>, ProviderError> {
    content_blocks(content, at, |part, at| match part["type"].as_str() {
        Some("text") => Ok(text_blocks(&Value::Array(vec![part.clone()]))),
        Some("image_url") => Ok(vec![image(
            part["image_url"]["url"].as_str(),
            &format!("{at}.image_url.url"),
        )?]),
        Some(_) => Err(part_refused(at)),
        None => Ok(Vec::new()),
    })
}

/// The refusal of a content part at `at` with no Messages counterpart.
pub(super) fn part_refused(at: &str) -> ProviderError {
    ProviderError::untranslatable(
        format!("{at}.type"),
        "this content part cannot be sent to this model",
    )
}

/// An image block: a `data:` URL as base64, another URL as a URL source.
pub(super) fn image(url: Option<&str>, field: &str) -> Result<Value, ProviderError> {
    let url = url.unwrap_or_default();
    let source = match url.strip_prefix("data:") {
        Some(data) => {
            let (media_type, payload) = data.split_once(";base64,").ok_or_else(|| {
                ProviderError::untranslatable(field, "an image data URL must be base64")
            })?;
            json!({"type": "base64", "media_type": media_type, "data": payload})
        }
        None => json!({"type": "url", "url": url}),
    };
    Ok(json!({"type": "image", "source": source}))
}

fn assistant_blocks(message: &Value) -> Vec<Value> {
    let mut blocks = text_blocks(&message["content"]);
    for call in message["tool_calls"].as_array().into_iter().flatten() {
        let arguments = call["function"]["arguments"].as_str().unwrap_or("{}");
        // The model wrote the arguments; what it wrote goes back as its input, or `{}`.
        let input: Value = serde_json::from_str(arguments)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        blocks.push(json!({
            "type": "tool_use",
            "id": call["id"],
            "name": call["function"]["name"],
            "input": input,
        }));
    }
    blocks
}

fn tool_result(message: &Value) -> Value {
    json!({
        "type": "tool_result",
        "tool_use_id": message["tool_call_id"],
        "content": text_blocks(&message["content"]),
    })
}

fn tool(tool: &Value) -> Option<Value> {
    function_tool(tool.get("function")?)
}

/// A function's `name`, `description` and `parameters` as a Messages tool.
pub(super) fn function_tool(function: &Value) -> Option<Value> {
    tool_fields(function, "parameters", "input_schema")
}

fn tool_choice(chat: &Map<String, Value>) -> Option<Value> {
    let named = |c: &Map<String, Value>| c.get("function")?.get("name").cloned();
    choice_with(chat, named)
}

/// The Messages `tool_choice` of an OpenAI request: `none`, `required` as `any`, a named
/// function (`named` finds its name) as that tool, anything else `auto`; none without tools.
pub(super) fn choice_with(
    chat: &Map<String, Value>,
    named: impl Fn(&Map<String, Value>) -> Option<Value>,
) -> Option<Value> {
    let mut choice = match chat.get("tool_choice") {
        Some(Value::String(c)) if c == "none" => json!({"type": "none"}),
        Some(Value::String(c)) if c == "required" => json!({"type": "any"}),
        Some(Value::Object(c)) => json!({"type": "tool", "name": named(c)?}),
        _ => json!({"type": "auto"}),
    };
    let tools = chat.get("tools").and_then(Value::as_array);
    if tools.is_none_or(|t| t.is_empty()) {
        return None;
    }
    if chat.get("parallel_tool_calls") == Some(&Value::Bool(false)) && choice["type"] != "none" {
        choice["disable_parallel_tool_use"] = Value::Bool(true);
    }
    Some(choice)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::translate::{refused_field, request};
    use crate::request::Endpoint;

    fn translate(chat: Value) -> Result<Value, ProviderError> {
        translated(chat).map(|t| t.body)
    }

    fn translated(chat: Value) -> Result<Translated, ProviderError> {
        body(&request(Endpoint::ChatCompletions, chat))
    }

    #[test]
    fn a_tool_conversation_becomes_a_messages_request() {
        let sent = translate(json!({
            "model": "claude",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
                {"role": "user", "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
                ]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "look", "arguments": "{\"x\":1}"}},
                    {"id": "call_2", "type": "function", "function": {"name": "look", "arguments": "oops"}},
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "a cat"},
                {"role": "tool", "tool_call_id": "call_2", "content": "a hat"},
            ],
            "tools": [{"type": "function", "function": {"name": "look", "parameters": {"type": "object"}}}],
            "tool_choice": "required",
            "parallel_tool_calls": false,
            "stop": "END",
            "temperature": 0.2,
        }))
        .unwrap();
        assert_eq!(
            sent["system"],
            json!([{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Use tools."}])
        );
        assert_eq!(sent["max_tokens"], DEFAULT_MAX_TOKENS);
        assert_eq!(sent["model"], "claude-x");
        let messages = sent["messages"].as_array().unwrap();
        assert_eq!(
            messages.len(),
            3,
            "the two tool results share one user turn"
        );
        assert_eq!(
            messages[0]["content"][1],
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}})
        );
        assert_eq!(
            messages[1]["content"][0],
            json!({"type": "tool_use", "id": "call_1", "name": "look", "input": {"x": 1}})
        );
        assert_eq!(messages[1]["content"][1]["input"], json!({}));
        assert_eq!(messages[2]["role"], "user");
        assert_eq!(
            messages[2]["content"][1],
            json!({"type": "tool_result", "tool_use_id": "call_2", "content": [{"type": "text", "text": "a hat"}]})
        );
        assert_eq!(
            sent["tools"],
            json!([{"name": "look", "input_schema": {"type": "object"}}])
        );
        assert_eq!(
            sent["tool_choice"],
            json!({"type": "any", "disable_parallel_tool_use": true})
        );
        assert_eq!(sent["stop_sequences"], json!(["END"]));
        assert_eq!(sent["temperature"], 0.2);
    }

    #[test]
    fn a_part_without_a_counterpart_is_refused() {
        let refused = translate(json!({"messages": [{"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": "x", "format": "wav"}}
        ]}]}));
        assert_eq!(refused_field(refused), "messages[0].content[0].type");
        let refused = translate(json!({"n": 2, "messages": [{"role": "user", "content": "hi"}]}));
        assert_eq!(refused_field(refused), "n");
        let refused = translate(json!({"modalities": ["text", "audio"], "messages": []}));
        assert_eq!(refused_field(refused), "modalities");
        let refused = translate(json!({"logprobs": true, "messages": []}));
        assert_eq!(refused_field(refused), "logprobs");
        assert!(translate(json!({"logprobs": false, "top_logprobs": 0, "messages": []})).is_ok());
        let refused = translate(json!({"messages": [], "tools": [
            {"type": "function", "function": {"name": "f"}},
            {"type": "custom", "custom": {"name": "g"}}]}));
        assert_eq!(refused_field(refused), "tools[1].type");
    }

    #[test]
    fn a_json_schema_format_becomes_a_forced_tool() {
        let schema = json!({"type": "object", "properties": {"name": {"type": "string"}},
            "required": ["name"]});
        let sent = translated(json!({"messages": [{"role": "user", "content": "hi"}],
            "response_format": {"type": "json_schema",
                "json_schema": {"name": "Person", "schema": schema, "strict": true}}}))
        .unwrap();
        assert_eq!(sent.output_tool.as_deref(), Some("Person"));
        assert_eq!(sent.body["tools"][0]["input_schema"], schema);
        assert_eq!(
            sent.body["tool_choice"],
            json!({"type": "tool", "name": "Person"})
        );
        let sent = translated(json!({"messages": [{"role": "user", "content": "hi"}],
            "response_format": {"type": "text"}}))
        .unwrap();
        assert_eq!(sent.output_tool, None);
        assert!(sent.body.get("tools").is_none());
    }
}
