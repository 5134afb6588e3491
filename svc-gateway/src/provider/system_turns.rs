//! `system` turns among a Messages request's `messages`, folded into its `system` prompt for a
//! target that does not speak the Messages API.
//!
//! Anthropic's SDK types allow a turn of role `system` among the messages, and Claude Code
//! sends one; an anthropic provider gets it unchanged. A translation to another API has no such
//! turn, so it calls [`fold`] first: each system turn's text is appended, in order, to
//! `system` (kept as text blocks, so a block's `cache_control` survives), and the turn leaves
//! `messages`. A system turn carrying anything but text cannot be folded: the request is
//! refused with a field error naming the block, never sent with the block dropped.
//!
//! ```
//! use serde_json::json;
//! use svc_gateway::provider::system_turns::fold;
//!
//! let body = json!({"system": "Be kind.", "messages": [
//!     {"role": "user", "content": "hi"},
//!     {"role": "system", "content": "Be terse."}]});
//! let folded = fold(body.as_object().unwrap()).unwrap();
//! assert_eq!(folded["system"], json!([
//!     {"type": "text", "text": "Be kind."}, {"type": "text", "text": "Be terse."}]));
//! assert_eq!(folded["messages"], json!([{"role": "user", "content": "hi"}]));
//! ```

use serde_json::{Map, Value, json};
use svc_tower::error::{FieldError, FieldErrorCode};

/// The body with its system turns folded into `system`; unchanged when it has none.
pub fn fold(body: &Map<String, Value>) -> Result<Map<String, Value>, FieldError> {
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return Ok(body.clone());
    };
    if !messages.iter().any(is_system) {
        return Ok(body.clone());
    }
    let mut system = match body.get("system") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(text)) => vec![json!({"type": "text", "text": text})],
        Some(Value::Array(blocks)) => blocks.clone(),
        Some(_) => {
            return Err(FieldError::new(
                "system",
                FieldErrorCode::InvalidFormat,
                "system must be a string or an array of text blocks",
            ));
        }
    };
    let mut turns = Vec::with_capacity(messages.len());
    for (i, message) in messages.iter().enumerate() {
        if !is_system(message) {
            turns.push(message.clone());
            continue;
        }
        match message.get("content") {
            Some(Value::String(text)) => system.push(json!({"type": "text", "text": text})),
            Some(Value::Array(blocks)) => {
                for (j, block) in blocks.iter().enumerate() {
                    if block.get("type").and_then(Value::as_str) != Some("text") {
                        return Err(FieldError::new(
                            format!("messages[{i}].content[{j}].type"),
                            FieldErrorCode::InvalidEnum,
                            "a system message can carry only text blocks for this model",
                        ));
                    }
                    system.push(block.clone());
                }
            }
            _ => {
                return Err(FieldError::new(
                    format!("messages[{i}].content"),
                    FieldErrorCode::InvalidFormat,
                    "content must be a string or an array of content blocks",
                ));
            }
        }
    }
    let mut folded = body.clone();
    folded.insert("system".to_owned(), Value::Array(system));
    folded.insert("messages".to_owned(), Value::Array(turns));
    Ok(folded)
}

fn is_system(message: &Value) -> bool {
    message.get("role").and_then(Value::as_str) == Some("system")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(object) => object,
            _ => panic!("an object"),
        }
    }

    #[test]
    fn a_body_without_system_turns_is_unchanged() {
        let body = object(json!({"system": "s", "messages": [{"role": "user", "content": "hi"}]}));
        assert_eq!(fold(&body).unwrap(), body);
    }

    #[test]
    fn text_blocks_keep_their_cache_control_after_the_system_blocks() {
        let body = object(
            json!({"system": [{"type": "text", "text": "a"}], "messages": [
                {"role": "system", "content": [
                    {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}}]},
                {"role": "user", "content": "hi"},
                {"role": "system", "content": "c"},
            ]}),
        );
        let folded = fold(&body).unwrap();
        assert_eq!(
            folded["system"],
            json!([{"type": "text", "text": "a"},
                {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "c"}])
        );
        assert_eq!(
            folded["messages"],
            json!([{"role": "user", "content": "hi"}])
        );
    }

    #[test]
    fn a_block_that_is_not_text_is_named_never_dropped() {
        let body = object(json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "system", "content": [{"type": "text", "text": "a"},
                {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}]},
        ]}));
        let error = fold(&body).unwrap_err();
        assert_eq!(error.field, "messages[1].content[1].type");
        assert_eq!(error.code, FieldErrorCode::InvalidEnum);
    }
}
