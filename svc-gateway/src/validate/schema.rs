//! Small typed checks over a parsed body, each reporting a field error at an exact path.
//!
//! Paths are built lazily: a valid request formats none.

use std::fmt;

use serde_json::{Map, Value};
use svc_tower::error::FieldErrorCode;

use super::{Errors, MAX_MESSAGES};

/// Where a value sits in the body: `messages[3].content[1].image_url.url`.
#[derive(Clone, Copy)]
pub(super) enum Path<'a> {
    /// A top-level field.
    Root(&'a str),
    /// A field of an object.
    Key(&'a Path<'a>, &'a str),
    /// An item of an array.
    Index(&'a Path<'a>, usize),
}

impl<'a> Path<'a> {
    pub(super) fn key(&'a self, key: &'a str) -> Path<'a> {
        Path::Key(self, key)
    }

    pub(super) fn index(&'a self, index: usize) -> Path<'a> {
        Path::Index(self, index)
    }
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root(name) => f.write_str(name),
            Path::Key(parent, key) => write!(f, "{parent}.{key}"),
            Path::Index(parent, index) => write!(f, "{parent}[{index}]"),
        }
    }
}

/// What a field must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    String,
    Bool,
    Number,
    /// A whole number of at least this.
    Integer(i64),
    Object,
    Array,
}

impl Kind {
    fn matches(self, value: &Value) -> bool {
        match self {
            Kind::String => value.is_string(),
            Kind::Bool => value.is_boolean(),
            Kind::Number => value.is_number(),
            Kind::Integer(min) => match value {
                Value::Number(n) => n
                    .as_i64()
                    .map(|n| n >= min)
                    .or_else(|| n.as_u64().map(|_| true))
                    .unwrap_or(false),
                _ => false,
            },
            Kind::Object => value.is_object(),
            Kind::Array => value.is_array(),
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Kind::String => "a string",
            Kind::Bool => "a boolean",
            Kind::Number => "a number",
            Kind::Integer(0) => "a non-negative integer",
            Kind::Integer(1) => "a positive integer",
            Kind::Integer(_) => "an integer",
            Kind::Object => "an object",
            Kind::Array => "an array",
        }
    }
}

/// The name a message uses for the field: the last key of its path.
fn name<'a>(path: &Path<'a>) -> &'a str {
    match *path {
        Path::Root(name) | Path::Key(_, name) => name,
        Path::Index(..) => "item",
    }
}

/// An optional field: absent or null is `None`; another type is a field error.
pub(super) fn optional<'v>(
    object: &'v Map<String, Value>,
    path: &Path<'_>,
    kind: Kind,
    errors: &mut Errors,
) -> Option<&'v Value> {
    match object.get(name(path)) {
        None | Some(Value::Null) => None,
        Some(value) => of_kind(value, path, kind, errors),
    }
}

/// A required field: absent or null is `REQUIRED`; another type is a field error.
pub(super) fn required<'v>(
    object: &'v Map<String, Value>,
    path: &Path<'_>,
    kind: Kind,
    errors: &mut Errors,
) -> Option<&'v Value> {
    match object.get(name(path)) {
        None | Some(Value::Null) => {
            errors.push(
                path.to_string(),
                FieldErrorCode::Required,
                format!("{} is required", name(path)),
            );
            None
        }
        Some(value) => of_kind(value, path, kind, errors),
    }
}

/// `value` when it is of `kind`, else an `INVALID_FORMAT` at `path`.
pub(super) fn of_kind<'v>(
    value: &'v Value,
    path: &Path<'_>,
    kind: Kind,
    errors: &mut Errors,
) -> Option<&'v Value> {
    if kind.matches(value) {
        return Some(value);
    }
    errors.push(
        path.to_string(),
        FieldErrorCode::InvalidFormat,
        format!("{} must be {}", name(path), kind.noun()),
    );
    None
}

/// A string that must be one of `allowed`; `INVALID_ENUM` otherwise.
pub(super) fn one_of<'v>(
    value: &'v str,
    allowed: &[&str],
    path: &Path<'_>,
    errors: &mut Errors,
) -> Option<&'v str> {
    if allowed.contains(&value) {
        return Some(value);
    }
    errors.push(
        path.to_string(),
        FieldErrorCode::InvalidEnum,
        format!("{} must be one of {}", name(path), allowed.join(", ")),
    );
    None
}

/// `stream`, `temperature`: the options every generating endpoint reads.
pub(super) fn stream(object: &Map<String, Value>, errors: &mut Errors) -> bool {
    optional(object, &Path::Root("stream"), Kind::Bool, errors)
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// `temperature`, when given as a number.
pub(super) fn temperature(object: &Map<String, Value>, errors: &mut Errors) -> Option<f64> {
    optional(object, &Path::Root("temperature"), Kind::Number, errors).and_then(Value::as_f64)
}

/// A token cap (`max_tokens` and kin): a positive integer.
pub(super) fn token_cap(
    object: &Map<String, Value>,
    field: &'static str,
    errors: &mut Errors,
) -> Option<u64> {
    optional(object, &Path::Root(field), Kind::Integer(1), errors).and_then(Value::as_u64)
}

/// `messages`: a required array of 1 to [`MAX_MESSAGES`] items.
pub(super) fn message_list<'v>(
    object: &'v Map<String, Value>,
    errors: &mut Errors,
) -> Option<&'v Vec<Value>> {
    let items =
        required(object, &Path::Root("messages"), Kind::Array, errors).and_then(Value::as_array)?;
    if items.is_empty() {
        errors.push(
            "messages",
            FieldErrorCode::Required,
            "messages must not be empty",
        );
        return None;
    }
    if items.len() > MAX_MESSAGES {
        errors.push(
            "messages",
            FieldErrorCode::TooMany,
            "messages has more than 1000 items",
        );
        return None;
    }
    Some(items)
}

/// An optional array of objects named `name`: each item is checked by `check` at its path.
pub(super) fn each_object(
    object: &Map<String, Value>,
    name: &'static str,
    errors: &mut Errors,
    mut check: impl FnMut(&Map<String, Value>, &Path<'_>, &mut Errors),
) {
    let path = Path::Root(name);
    let Some(items) = optional(object, &path, Kind::Array, errors).and_then(Value::as_array) else {
        return;
    };
    for (i, item) in items.iter().enumerate() {
        let at = path.index(i);
        if let Some(item) = of_kind(item, &at, Kind::Object, errors).and_then(Value::as_object) {
            check(item, &at, errors);
        }
    }
}

/// `tools`: an array of objects, each with a string `type`; a function tool names itself.
pub(super) fn tools(object: &Map<String, Value>, errors: &mut Errors) {
    each_object(object, "tools", errors, |tool, at, errors| {
        let kind = required(tool, &at.key("type"), Kind::String, errors).and_then(Value::as_str);
        if kind != Some("function") {
            return;
        }
        // Chat completions nest the function; the Responses API puts its name at the top.
        match tool.get("function") {
            Some(_) => {
                let path = at.key("function");
                if let Some(function) =
                    required(tool, &path, Kind::Object, errors).and_then(Value::as_object)
                {
                    required(function, &path.key("name"), Kind::String, errors);
                    optional(function, &path.key("parameters"), Kind::Object, errors);
                }
            }
            None => {
                required(tool, &at.key("name"), Kind::String, errors);
            }
        }
    });
}

/// `tool_choice`: `none`, `auto`, `required`, or an object with a string `type`.
pub(super) fn tool_choice(object: &Map<String, Value>, errors: &mut Errors) {
    let path = Path::Root("tool_choice");
    match object.get("tool_choice") {
        None | Some(Value::Null) => {}
        Some(Value::String(choice)) => {
            one_of(choice, &["none", "auto", "required"], &path, errors);
        }
        Some(Value::Object(choice)) => {
            required(choice, &path.key("type"), Kind::String, errors);
        }
        Some(_) => {
            errors.push(
                path.to_string(),
                FieldErrorCode::InvalidFormat,
                "tool_choice must be a string or an object",
            );
        }
    }
}
