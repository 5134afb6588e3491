//! `POST /v1/messages`: Anthropic's Messages request, checked where the gateway reads it.
//!
//! `max_tokens` is required; `messages` are user, assistant or system turns (Anthropic's SDK
//! types allow `system` among them, and Claude Code sends it), each with `content` as a string
//! or an array of blocks (`text`, `image`, `document`, `tool_use`, `tool_result`, and any other
//! type, thinking and server tool blocks included, passed through); `system` is a string or
//! text blocks. The 100 KiB limit counts a message's text (its string, or its text blocks
//! summed). Every other field (`thinking`, `cache_control`, `context_management`,
//! `output_config`, anything newer) goes to the provider unchanged.
//!
//! `POST /v1/messages/count_tokens` takes the same body without `max_tokens`.

use serde_json::{Map, Value};
use svc_tower::error::FieldErrorCode;

use super::schema::{self, Kind, Path, of_kind, one_of, optional, required};
use super::{Errors, Fields, MAX_CONTENT_BYTES};

/// The roles a Messages turn may have.
const ROLES: [&str; 3] = ["user", "assistant", "system"];

pub(super) fn validate(object: &Map<String, Value>, errors: &mut Errors) -> Fields {
    let max_tokens = required(object, &Path::Root("max_tokens"), Kind::Integer(1), errors)
        .and_then(Value::as_u64);
    let stream = schema::stream(object, errors);
    Fields {
        stream,
        max_tokens,
        ..common(object, errors)
    }
}

/// A `count_tokens` body: a Messages request that generates nothing, so neither
/// `max_tokens` nor `stream` is read.
pub(super) fn count_tokens(object: &Map<String, Value>, errors: &mut Errors) -> Fields {
    optional(object, &Path::Root("max_tokens"), Kind::Integer(1), errors);
    common(object, errors)
}

/// What both routes read.
fn common(object: &Map<String, Value>, errors: &mut Errors) -> Fields {
    let message_count = messages(object, errors);
    system(object, errors);
    let temperature = schema::temperature(object, errors);
    tools(object, errors);
    tool_choice(object, errors);
    let path = Path::Root("stop_sequences");
    if let Some(stops) = optional(object, &path, Kind::Array, errors).and_then(Value::as_array) {
        for (i, stop) in stops.iter().enumerate() {
            of_kind(stop, &path.index(i), Kind::String, errors);
        }
    }
    optional(object, &Path::Root("metadata"), Kind::Object, errors);
    Fields {
        stream: false,
        include_usage: false,
        message_count,
        max_tokens: None,
        temperature,
    }
}

fn messages(object: &Map<String, Value>, errors: &mut Errors) -> usize {
    let path = Path::Root("messages");
    let Some(items) = schema::message_list(object, errors) else {
        return 0;
    };
    for (i, item) in items.iter().enumerate() {
        let at = path.index(i);
        let Some(item) = of_kind(item, &at, Kind::Object, errors).and_then(Value::as_object) else {
            continue;
        };
        if let Some(role) =
            required(item, &at.key("role"), Kind::String, errors).and_then(Value::as_str)
        {
            one_of(role, &ROLES, &at.key("role"), errors);
        }
        let content = at.key("content");
        let text = match item.get("content") {
            None | Some(Value::Null) => {
                errors.push(
                    content.to_string(),
                    FieldErrorCode::Required,
                    "content is required",
                );
                0
            }
            Some(value) => content_value(value, &content, errors),
        };
        if text > MAX_CONTENT_BYTES {
            errors.push(
                content.to_string(),
                FieldErrorCode::TooLong,
                "content is longer than 100 KiB",
            );
        }
    }
    items.len()
}

/// `system`: a string or an array of text blocks.
fn system(object: &Map<String, Value>, errors: &mut Errors) {
    let path = Path::Root("system");
    match object.get("system") {
        None | Some(Value::Null) | Some(Value::String(_)) => {}
        Some(Value::Array(blocks)) => {
            for (i, block) in blocks.iter().enumerate() {
                let at = path.index(i);
                let Some(block) =
                    of_kind(block, &at, Kind::Object, errors).and_then(Value::as_object)
                else {
                    continue;
                };
                if let Some(kind) =
                    required(block, &at.key("type"), Kind::String, errors).and_then(Value::as_str)
                {
                    one_of(kind, &["text"], &at.key("type"), errors);
                }
                required(block, &at.key("text"), Kind::String, errors);
            }
        }
        Some(_) => errors.push(
            path.to_string(),
            FieldErrorCode::InvalidFormat,
            "system must be a string or an array of text blocks",
        ),
    }
}

/// A present `content`: a string or an array of blocks. Returns its text length in bytes.
fn content_value(value: &Value, path: &Path<'_>, errors: &mut Errors) -> usize {
    match value {
        Value::String(text) => text.len(),
        Value::Array(blocks) => blocks
            .iter()
            .enumerate()
            .map(|(j, block)| content_block(block, &path.index(j), errors))
            .sum(),
        _ => {
            errors.push(
                path.to_string(),
                FieldErrorCode::InvalidFormat,
                "content must be a string or an array of content blocks",
            );
            0
        }
    }
}

/// One content block; returns the bytes of text it carries.
fn content_block(block: &Value, at: &Path<'_>, errors: &mut Errors) -> usize {
    let Some(block) = of_kind(block, at, Kind::Object, errors).and_then(Value::as_object) else {
        return 0;
    };
    let Some(kind) = required(block, &at.key("type"), Kind::String, errors).and_then(Value::as_str)
    else {
        return 0;
    };
    match kind {
        "text" => required(block, &at.key("text"), Kind::String, errors)
            .and_then(Value::as_str)
            .map_or(0, str::len),
        "image" | "document" => {
            let path = at.key("source");
            if let Some(source) =
                required(block, &path, Kind::Object, errors).and_then(Value::as_object)
            {
                required(source, &path.key("type"), Kind::String, errors);
            }
            0
        }
        "tool_use" => {
            required(block, &at.key("id"), Kind::String, errors);
            required(block, &at.key("name"), Kind::String, errors);
            required(block, &at.key("input"), Kind::Object, errors);
            0
        }
        "tool_result" => {
            required(block, &at.key("tool_use_id"), Kind::String, errors);
            let content = at.key("content");
            match block.get("content") {
                None | Some(Value::Null) => 0,
                Some(value) => content_value(value, &content, errors),
            }
        }
        // Thinking, server tool and newer blocks pass to the provider unchanged.
        _ => 0,
    }
}

/// `tools`: objects that name themselves; a custom tool's `input_schema` is an object.
fn tools(object: &Map<String, Value>, errors: &mut Errors) {
    schema::each_object(object, "tools", errors, |tool, at, errors| {
        required(tool, &at.key("name"), Kind::String, errors);
        optional(tool, &at.key("type"), Kind::String, errors);
        optional(tool, &at.key("description"), Kind::String, errors);
        optional(tool, &at.key("input_schema"), Kind::Object, errors);
    });
}

/// `tool_choice`: `{"type": "auto" | "any" | "tool" | "none"}`, `tool` with a `name`.
fn tool_choice(object: &Map<String, Value>, errors: &mut Errors) {
    let path = Path::Root("tool_choice");
    let Some(choice) = optional(object, &path, Kind::Object, errors).and_then(Value::as_object)
    else {
        return;
    };
    let kind = required(choice, &path.key("type"), Kind::String, errors)
        .and_then(Value::as_str)
        .and_then(|kind| {
            one_of(
                kind,
                &["auto", "any", "tool", "none"],
                &path.key("type"),
                errors,
            )
        });
    if kind == Some("tool") {
        required(choice, &path.key("name"), Kind::String, errors);
    }
}
