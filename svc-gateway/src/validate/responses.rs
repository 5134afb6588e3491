//! `POST /v1/responses`: `input` is a string or an array of items. A message item (one with a
//! `role`) has the same limits as a chat message; other items (function calls, their outputs,
//! reasoning, references) must name their `type`, and the ones the gateway knows are checked.

use serde_json::{Map, Value};
use svc_tower::error::FieldErrorCode;

use super::schema::{self, Kind, Path, of_kind, one_of, optional, required};
use super::{Errors, Fields, MAX_CONTENT_BYTES, MAX_MESSAGES};

const ROLES: [&str; 4] = ["user", "assistant", "system", "developer"];
const PARTS: [&str; 6] = [
    "input_text",
    "input_image",
    "input_file",
    "input_audio",
    "output_text",
    "refusal",
];

pub(super) fn validate(object: &Map<String, Value>, errors: &mut Errors) -> Fields {
    let message_count = input(object, errors);
    optional(object, &Path::Root("instructions"), Kind::String, errors);
    schema::tools(object, errors);
    schema::tool_choice(object, errors);
    Fields {
        stream: schema::stream(object, errors),
        include_usage: false,
        message_count,
        max_tokens: schema::token_cap(object, "max_output_tokens", errors),
        temperature: schema::temperature(object, errors),
    }
}

/// Checks `input` (optional: a response may continue a stored one); returns its item count.
fn input(object: &Map<String, Value>, errors: &mut Errors) -> usize {
    let path = Path::Root("input");
    match object.get("input") {
        None | Some(Value::Null) => 0,
        Some(Value::String(text)) => {
            too_long(text.len(), &path, errors);
            1
        }
        Some(Value::Array(items)) if items.len() > MAX_MESSAGES => {
            errors.push(
                "input",
                FieldErrorCode::TooMany,
                "input has more than 1000 items",
            );
            0
        }
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                input_item(item, &path.index(i), errors);
            }
            items.len()
        }
        Some(_) => {
            errors.push(
                "input",
                FieldErrorCode::InvalidFormat,
                "input must be a string or an array of items",
            );
            0
        }
    }
}

fn too_long(bytes: usize, path: &Path<'_>, errors: &mut Errors) {
    if bytes > MAX_CONTENT_BYTES {
        errors.push(
            path.to_string(),
            FieldErrorCode::TooLong,
            "content is longer than 100 KiB",
        );
    }
}

fn input_item(item: &Value, at: &Path<'_>, errors: &mut Errors) {
    let Some(item) = of_kind(item, at, Kind::Object, errors).and_then(Value::as_object) else {
        return;
    };
    let kind = if item.contains_key("role") {
        optional(item, &at.key("type"), Kind::String, errors).and_then(Value::as_str)
    } else {
        required(item, &at.key("type"), Kind::String, errors).and_then(Value::as_str)
    };
    match kind {
        None if item.contains_key("role") => message(item, at, errors),
        Some("message") => message(item, at, errors),
        Some("function_call") => {
            for field in ["call_id", "name", "arguments"] {
                required(item, &at.key(field), Kind::String, errors);
            }
        }
        Some("function_call_output") => {
            required(item, &at.key("call_id"), Kind::String, errors);
            if !item
                .get("output")
                .is_some_and(|o| o.is_string() || o.is_array())
            {
                let code = if item.get("output").is_none_or(Value::is_null) {
                    FieldErrorCode::Required
                } else {
                    FieldErrorCode::InvalidFormat
                };
                errors.push(
                    at.key("output").to_string(),
                    code,
                    "output must be a string or an array",
                );
            }
        }
        _ => {}
    }
}

fn message(item: &Map<String, Value>, at: &Path<'_>, errors: &mut Errors) {
    required(item, &at.key("role"), Kind::String, errors)
        .and_then(Value::as_str)
        .and_then(|role| one_of(role, &ROLES, &at.key("role"), errors));
    let path = at.key("content");
    let text = match item.get("content") {
        None | Some(Value::Null) => {
            errors.push(
                path.to_string(),
                FieldErrorCode::Required,
                "content is required",
            );
            return;
        }
        Some(Value::String(text)) => text.len(),
        Some(Value::Array(parts)) => parts
            .iter()
            .enumerate()
            .map(|(j, part)| content_part(part, &path.index(j), errors))
            .sum(),
        Some(_) => {
            errors.push(
                path.to_string(),
                FieldErrorCode::InvalidFormat,
                "content must be a string or an array of content parts",
            );
            return;
        }
    };
    too_long(text, &path, errors);
}

/// One content part; returns the bytes of text it carries.
fn content_part(part: &Value, at: &Path<'_>, errors: &mut Errors) -> usize {
    let Some(part) = of_kind(part, at, Kind::Object, errors).and_then(Value::as_object) else {
        return 0;
    };
    let kind = required(part, &at.key("type"), Kind::String, errors)
        .and_then(Value::as_str)
        .and_then(|kind| one_of(kind, &PARTS, &at.key("type"), errors));
    let field = match kind {
        Some("input_text" | "output_text") => "text",
        Some("refusal") => "refusal",
        _ => return 0,
    };
    required(part, &at.key(field), Kind::String, errors)
        .and_then(Value::as_str)
        .map_or(0, str::len)
}
