//! The JSON-RPC messages the gateway looks into: what a client's POST asks, the error a denied
//! tool call gets, the granted part of a `tools/list` answer, and the outcome of a
//! `tools/call`. Everything else passes through unread.

use serde_json::{Value, json};

use super::grants::Grants;

/// The JSON-RPC error code the MCP specification gives for an unknown tool (invalid params).
pub const UNKNOWN_TOOL: i64 = -32602;

/// What a client's POST body asks, as far as grants care.
#[derive(Debug, Clone, PartialEq)]
pub enum Ask {
    /// `tools/list`: the answer with this id is filtered.
    ListTools {
        /// The request's id.
        id: Value,
    },
    /// `tools/call` of `tool`.
    CallTool {
        /// The request's id.
        id: Value,
        /// The tool's name.
        tool: String,
    },
    /// A batch holding a tool request: refused, since its answers could not be filtered one
    /// by one (the 2025-06-18 transport has no batches).
    ToolBatch,
    /// Anything else: passes through.
    Other,
}

/// Reads a POST body; a body that is no JSON-RPC request at all is [`Ask::Other`] (the server
/// answers it).
pub fn ask(body: &[u8]) -> Ask {
    let Ok(message) = serde_json::from_slice::<Value>(body) else {
        return Ask::Other;
    };
    if let Value::Array(batch) = &message {
        let tools = batch
            .iter()
            .any(|m| matches!(one(m), Ask::ListTools { .. } | Ask::CallTool { .. }));
        return if tools { Ask::ToolBatch } else { Ask::Other };
    }
    one(&message)
}

fn one(message: &Value) -> Ask {
    let Some(id) = message.get("id").filter(|id| !id.is_null()) else {
        return Ask::Other;
    };
    match message.get("method").and_then(Value::as_str) {
        Some("tools/list") => Ask::ListTools { id: id.clone() },
        Some("tools/call") => Ask::CallTool {
            id: id.clone(),
            tool: message
                .pointer("/params/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        },
        _ => Ask::Other,
    }
}

/// The answer to a call of a tool the agent may not reach: the same as for a tool the server
/// does not have.
pub fn unknown_tool(id: &Value, tool: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": UNKNOWN_TOOL, "message": format!("Unknown tool: {tool}")},
    })
}

/// The answer to a batch holding tool requests.
pub fn batch_refused() -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32600, "message": "tool requests cannot be batched"},
    })
}

/// A message that is the response to `id`.
fn response_to<'a>(message: &'a mut Value, id: &Value) -> Option<&'a mut Value> {
    let answers = message.get("id") == Some(id)
        && (message.get("result").is_some() || message.get("error").is_some());
    answers.then_some(message)
}

/// `data` with the `tools/list` result for `id` holding only granted tools; `None` when
/// `data` is not that response (it then passes unchanged).
pub fn filter_tools(data: &str, id: &Value, server: &str, grants: &Grants) -> Option<String> {
    let mut message: Value = serde_json::from_str(data).ok()?;
    let response = response_to(&mut message, id)?;
    let tools = response.pointer_mut("/result/tools")?.as_array_mut()?;
    tools.retain(|tool| {
        tool.get("name")
            .and_then(Value::as_str)
            .is_some_and(|name| grants.allows(server, name))
    });
    Some(message.to_string())
}

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The tool answered.
    Ok,
    /// A JSON-RPC error, a result flagged `isError`, or no answer at all.
    Error,
    /// Not granted: the server was never asked.
    Denied,
}

impl Outcome {
    /// The word in the ledger and the metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Denied => "denied",
        }
    }
}

/// The outcome `data` reports when it is the response to `id`.
pub fn call_outcome(data: &str, id: &Value) -> Option<Outcome> {
    let mut message: Value = serde_json::from_str(data).ok()?;
    let response = response_to(&mut message, id)?;
    let failed = response.get("error").is_some()
        || response.pointer("/result/isError") == Some(&Value::Bool(true));
    Some(if failed { Outcome::Error } else { Outcome::Ok })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_post_is_read_for_tool_requests_only() {
        let list = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"c"}}"#;
        assert_eq!(ask(list), Ask::ListTools { id: json!(1) });
        let call = br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo"}}"#;
        assert_eq!(
            ask(call),
            Ask::CallTool {
                id: json!("a"),
                tool: "echo".into()
            }
        );
        assert_eq!(
            ask(br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#),
            Ask::Other
        );
        assert_eq!(
            ask(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ask::Other
        );
        assert_eq!(ask(b"not json"), Ask::Other);
        let batch = format!("[{}]", std::str::from_utf8(call).unwrap());
        assert_eq!(ask(batch.as_bytes()), Ask::ToolBatch);
    }

    #[test]
    fn a_tools_list_answer_keeps_the_granted_tools_and_its_cursor() {
        let grants = Grants::new(vec!["srv/echo".to_owned()].into());
        let data = json!({"jsonrpc":"2.0","id":7,"result":{
            "tools":[{"name":"echo"},{"name":"add"}],"nextCursor":"n"}})
        .to_string();
        let filtered: Value =
            serde_json::from_str(&filter_tools(&data, &json!(7), "srv", &grants).unwrap()).unwrap();
        assert_eq!(filtered["result"]["tools"], json!([{"name":"echo"}]));
        assert_eq!(filtered["result"]["nextCursor"], "n");
        assert_eq!(filter_tools(&data, &json!(8), "srv", &grants), None);
        let note = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#;
        assert_eq!(filter_tools(note, &json!(7), "srv", &grants), None);
    }

    #[test]
    fn a_call_outcome_is_read_from_its_response() {
        let id = json!(3);
        let ok = r#"{"jsonrpc":"2.0","id":3,"result":{"content":[]}}"#;
        let flagged = r#"{"jsonrpc":"2.0","id":3,"result":{"content":[],"isError":true}}"#;
        let error = r#"{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"x"}}"#;
        assert_eq!(call_outcome(ok, &id), Some(Outcome::Ok));
        assert_eq!(call_outcome(flagged, &id), Some(Outcome::Error));
        assert_eq!(call_outcome(error, &id), Some(Outcome::Error));
        assert_eq!(call_outcome(ok, &json!(4)), None);
    }
}
