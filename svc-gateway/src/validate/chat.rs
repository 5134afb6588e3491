//! `POST /v1/chat/completions`: the whole request schema of OpenAI's chat completions, checked
//! where the gateway reads it.
//!
//! A message's `content` is a string, an array of parts, or (on an assistant message that calls
//! tools or a function, and on a function result) null. Each role has its own required fields
//! and its own part types.

use serde_json::{Map, Value};
use svc_tower::error::FieldErrorCode;

use super::schema::{self, Kind, Path, of_kind, one_of, optional, required};
use super::{Errors, Fields, MAX_CONTENT_BYTES, MAX_MESSAGES};

/// The roles OpenAI's chat completions accept.
pub(super) const ROLES: [&str; 6] = [
    "system",
    "developer",
    "user",
    "assistant",
    "tool",
    "function",
];

pub(super) fn validate(object: &Map<String, Value>, errors: &mut Errors) -> Fields {
    let message_count = messages(object, errors);
    let stream = schema::stream(object, errors);
    let options = Path::Root("stream_options");
    let include_usage = optional(object, &options, Kind::Object, errors)
        .and_then(Value::as_object)
        .and_then(|o| optional(o, &options.key("include_usage"), Kind::Bool, errors))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let temperature = schema::temperature(object, errors);
    schema::tools(object, errors);
    schema::tool_choice(object, errors);
    optional(object, &Path::Root("n"), Kind::Integer(1), errors);
    let max_completion_tokens = schema::token_cap(object, "max_completion_tokens", errors);
    let max_tokens = schema::token_cap(object, "max_tokens", errors);
    Fields {
        stream,
        include_usage,
        message_count,
        max_tokens: max_completion_tokens.or(max_tokens),
        temperature,
    }
}

/// Checks `messages`; returns how many there are.
fn messages(object: &Map<String, Value>, errors: &mut Errors) -> usize {
    let path = Path::Root("messages");
    let Some(items) = required(object, &path, Kind::Array, errors).and_then(Value::as_array) else {
        return 0;
    };
    if items.is_empty() {
        errors.push(
            "messages",
            FieldErrorCode::Required,
            "messages must not be empty",
        );
        return 0;
    }
    if items.len() > MAX_MESSAGES {
        errors.push(
            "messages",
            FieldErrorCode::TooMany,
            "messages has more than 1000 items",
        );
        return 0;
    }
    for (i, item) in items.iter().enumerate() {
        message(item, &path.index(i), errors);
    }
    items.len()
}

fn message(item: &Value, at: &Path<'_>, errors: &mut Errors) {
    let Some(item) = of_kind(item, at, Kind::Object, errors).and_then(Value::as_object) else {
        return;
    };
    optional(item, &at.key("name"), Kind::String, errors);
    let Some(role) = required(item, &at.key("role"), Kind::String, errors)
        .and_then(Value::as_str)
        .and_then(|role| one_of(role, &ROLES, &at.key("role"), errors))
    else {
        return;
    };
    let content = at.key("content");
    let calls = match role {
        "assistant" => tool_calls(item, at, errors),
        _ => false,
    };
    let may_be_null = match role {
        // An assistant turn that only calls tools, or only refuses, has no content.
        "assistant" => {
            calls
                || ["function_call", "audio", "refusal"]
                    .iter()
                    .any(|k| item.get(*k).is_some_and(|v| !v.is_null()))
        }
        "function" => true,
        _ => false,
    };
    let parts: &[&str] = match role {
        "user" => &["text", "image_url", "input_audio", "file"],
        "assistant" => &["text", "refusal"],
        _ => &["text"],
    };
    let text = match item.get("content") {
        None | Some(Value::Null) if may_be_null => Some(0),
        None | Some(Value::Null) => {
            errors.push(
                content.to_string(),
                FieldErrorCode::Required,
                "content is required",
            );
            None
        }
        Some(value) => content_value(value, &content, parts, errors),
    };
    if text.is_some_and(|bytes| bytes > MAX_CONTENT_BYTES) {
        errors.push(
            content.to_string(),
            FieldErrorCode::TooLong,
            "content is longer than 100 KiB",
        );
    }
    if role == "tool" {
        required(item, &at.key("tool_call_id"), Kind::String, errors);
    }
    if role == "function" {
        required(item, &at.key("name"), Kind::String, errors);
    }
}

/// A present `content`: a string, or an array of parts of the role's types. Returns its text
/// length in bytes.
fn content_value(
    value: &Value,
    path: &Path<'_>,
    allowed: &[&str],
    errors: &mut Errors,
) -> Option<usize> {
    match value {
        Value::String(text) => Some(text.len()),
        Value::Array(parts) => {
            let mut total = 0;
            for (j, part) in parts.iter().enumerate() {
                total += content_part(part, &path.index(j), allowed, errors);
            }
            Some(total)
        }
        _ => {
            errors.push(
                path.to_string(),
                FieldErrorCode::InvalidFormat,
                "content must be a string or an array of content parts",
            );
            None
        }
    }
}

/// One content part; returns the bytes of text it carries.
fn content_part(part: &Value, at: &Path<'_>, allowed: &[&str], errors: &mut Errors) -> usize {
    let Some(part) = of_kind(part, at, Kind::Object, errors).and_then(Value::as_object) else {
        return 0;
    };
    let Some(kind) = required(part, &at.key("type"), Kind::String, errors)
        .and_then(Value::as_str)
        .and_then(|kind| one_of(kind, allowed, &at.key("type"), errors))
    else {
        return 0;
    };
    let text_of = |field: &'static str, errors: &mut Errors| {
        required(part, &at.key(field), Kind::String, errors)
            .and_then(Value::as_str)
            .map_or(0, str::len)
    };
    match kind {
        "text" => text_of("text", errors),
        "refusal" => text_of("refusal", errors),
        "image_url" => {
            let path = at.key("image_url");
            if let Some(image) =
                required(part, &path, Kind::Object, errors).and_then(Value::as_object)
            {
                required(image, &path.key("url"), Kind::String, errors);
                optional(image, &path.key("detail"), Kind::String, errors);
            }
            0
        }
        "input_audio" => {
            let path = at.key("input_audio");
            if let Some(audio) =
                required(part, &path, Kind::Object, errors).and_then(Value::as_object)
            {
                required(audio, &path.key("data"), Kind::String, errors);
                required(audio, &path.key("format"), Kind::String, errors);
            }
            0
        }
        "file" => {
            let path = at.key("file");
            if let Some(file) =
                required(part, &path, Kind::Object, errors).and_then(Value::as_object)
            {
                for field in ["file_data", "file_id", "filename"] {
                    optional(file, &path.key(field), Kind::String, errors);
                }
            }
            0
        }
        _ => 0,
    }
}

/// An assistant message's `tool_calls`; true when it has at least one.
fn tool_calls(item: &Map<String, Value>, at: &Path<'_>, errors: &mut Errors) -> bool {
    let path = at.key("tool_calls");
    let Some(calls) = optional(item, &path, Kind::Array, errors).and_then(Value::as_array) else {
        return false;
    };
    for (k, call) in calls.iter().enumerate() {
        let at = path.index(k);
        let Some(call) = of_kind(call, &at, Kind::Object, errors).and_then(Value::as_object) else {
            continue;
        };
        required(call, &at.key("id"), Kind::String, errors);
        let kind = required(call, &at.key("type"), Kind::String, errors).and_then(Value::as_str);
        if kind == Some("function") {
            let path = at.key("function");
            if let Some(function) =
                required(call, &path, Kind::Object, errors).and_then(Value::as_object)
            {
                required(function, &path.key("name"), Kind::String, errors);
                required(function, &path.key("arguments"), Kind::String, errors);
            }
        }
    }
    !calls.is_empty()
}
