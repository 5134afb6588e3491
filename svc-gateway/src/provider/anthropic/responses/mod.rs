//! The Responses API to a Claude model: a `/v1/responses` request as a Messages request
//! ([`request`]), the Messages answer as a Responses object ([`answer`]), and the Messages
//! event stream as the Responses event sequence ([`stream`]).
//!
//! The Response object carries what the OpenAI SDKs read: `output` items (a `message` with
//! `output_text` parts, `function_call` items with their `call_id` and `arguments`), `status`
//! and `incomplete_details` from the stop reason, `usage` in input and output tokens, and the
//! request's own settings echoed back as OpenAI echoes them ([`Echo`]).

pub(crate) mod answer;
pub(crate) mod request;
pub(crate) mod stream;

use serde_json::{Map, Value, json};

use super::response::prompt_tokens;
use crate::request::ApiRequest;

/// The one field of a custom tool's input: the tool's free-form text.
pub(crate) const CUSTOM_INPUT: &str = "input";

/// What a Response object repeats of its request, and what the translation needs to know to
/// read the answer.
#[derive(Debug, Clone)]
pub(crate) struct Echo {
    created_at: i64,
    /// The request's settings a Response object repeats (`instructions`, `tools`, ...).
    settings: Map<String, Value>,
    /// The forced tool of a `text.format` JSON schema, whose input is the answer's text.
    output_tool: Option<String>,
    /// The names of the request's custom tools, whose calls are `custom_tool_call` items.
    custom_tools: Vec<String>,
    /// The request's tool namespaces: a call of `{namespace}__{name}` is a call of `name` in
    /// `namespace`.
    namespaces: Vec<String>,
}

/// What joins a namespace and a tool's name in a Messages tool name.
const NAMESPACE_SEPARATOR: &str = "__";

/// The Messages name of tool `name` in `namespace` (the name alone outside a namespace).
fn namespaced(namespace: Option<&str>, name: &Value) -> Value {
    match (namespace, name.as_str()) {
        (Some(namespace), Some(name)) => json!(format!("{namespace}{NAMESPACE_SEPARATOR}{name}")),
        _ => name.clone(),
    }
}

/// A field's default value.
type Default = fn() -> Value;

/// The request fields a Response object repeats, with OpenAI's defaults.
const ECHOED: [(&str, Default); 10] = [
    ("instructions", || Value::Null),
    ("max_output_tokens", || Value::Null),
    ("metadata", || json!({})),
    ("parallel_tool_calls", || Value::Bool(true)),
    ("temperature", || json!(1.0)),
    ("text", || json!({"format": {"type": "text"}})),
    ("tool_choice", || json!("auto")),
    ("tools", || json!([])),
    ("top_p", || json!(1.0)),
    ("previous_response_id", || Value::Null),
];

impl Echo {
    /// The echo of `request`, answered at `created_at`.
    pub(crate) fn of(request: &ApiRequest, created_at: i64, output_tool: Option<String>) -> Echo {
        let settings = ECHOED
            .iter()
            .map(|(field, default)| {
                let value = request
                    .json
                    .get(*field)
                    .filter(|v| !v.is_null())
                    .cloned()
                    .unwrap_or_else(default);
                ((*field).to_owned(), value)
            })
            .collect();
        let tools = request.json.get("tools").and_then(Value::as_array);
        let mut custom_tools = Vec::new();
        let mut namespaces = Vec::new();
        for tool in tools.into_iter().flatten() {
            let name = tool["name"].as_str();
            match (tool["type"].as_str(), name) {
                (Some("custom"), Some(name)) => custom_tools.push(name.to_owned()),
                (Some("namespace"), Some(namespace)) => {
                    namespaces.push(namespace.to_owned());
                    let inner = tool["tools"].as_array().into_iter().flatten();
                    custom_tools.extend(inner.filter(|t| t["type"] == "custom").filter_map(|t| {
                        namespaced(Some(namespace), &t["name"])
                            .as_str()
                            .map(str::to_owned)
                    }));
                }
                _ => {}
            }
        }
        Echo {
            created_at,
            settings,
            output_tool,
            custom_tools,
            namespaces,
        }
    }

    /// A call item as the client named its tool: `{namespace}__{name}` is `name` with its
    /// `namespace`.
    fn with_namespace(&self, mut item: Value) -> Value {
        let split = item["name"].as_str().and_then(|name| {
            let (namespace, name) = name.split_once(NAMESPACE_SEPARATOR)?;
            self.namespaces
                .iter()
                .any(|n| n == namespace)
                .then(|| (namespace.to_owned(), name.to_owned()))
        });
        if let Some((namespace, name)) = split {
            item["name"] = json!(name);
            item["namespace"] = json!(namespace);
        }
        item
    }

    /// Whether a `tool_use` block calls one of the request's custom tools.
    fn is_custom(&self, block: &Value) -> bool {
        self.custom_tools
            .iter()
            .any(|name| block["name"] == name.as_str())
    }
}

/// A custom tool's text out of its `tool_use` input.
fn custom_input(input: &Value) -> &str {
    input[CUSTOM_INPUT].as_str().unwrap_or_default()
}

/// A Messages id's Responses form, `{prefix}_{rest}`, so ids look as the SDKs expect.
fn id(prefix: &str, message_id: &Value) -> String {
    let raw = message_id.as_str().unwrap_or_default();
    let rest = raw.strip_prefix("msg_").unwrap_or(raw);
    format!("{prefix}_{rest}")
}

/// `status` and `incomplete_details` of a stop reason.
fn status(stop_reason: Option<&str>) -> (&'static str, Value) {
    match stop_reason {
        Some("max_tokens" | "model_context_window_exceeded") => {
            ("incomplete", json!({"reason": "max_output_tokens"}))
        }
        Some("refusal") => ("incomplete", json!({"reason": "content_filter"})),
        _ => ("completed", Value::Null),
    }
}

/// The Responses usage of a Messages usage: every input token (fresh, written to and read
/// from the cache), the cached ones also counted apart.
fn usage(usage: &Value) -> Value {
    let input = prompt_tokens(usage);
    let output = usage["output_tokens"].as_u64().unwrap_or(0);
    json!({
        "input_tokens": input,
        "input_tokens_details": {
            "cached_tokens": usage["cache_read_input_tokens"].as_u64().unwrap_or(0),
        },
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + output,
    })
}

/// A Response object: `status` `in_progress` (with no usage yet), `completed` or
/// `incomplete`.
fn object(
    echo: &Echo,
    message: &Value,
    status: &str,
    incomplete: Value,
    output: Vec<Value>,
    usage: Value,
) -> Value {
    let mut object = json!({
        "id": id("resp", &message["id"]),
        "object": "response",
        "created_at": echo.created_at,
        "status": status,
        "error": null,
        "incomplete_details": incomplete,
        "model": message["model"],
        "output": output,
        "usage": usage,
    });
    if let Value::Object(fields) = &mut object {
        fields.extend(echo.settings.clone());
    }
    object
}

/// The output items' ids: a message item per text, a function call item per call.
fn item_id(kind: &str, message: &Value, index: usize) -> String {
    format!("{}_{index}", id(kind, &message["id"]))
}
