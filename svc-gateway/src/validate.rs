//! Request validation for chat completions, exactly per the header and body tables.
//!
//! Order: the media type (415), then the JSON syntax (400 INVALID_JSON), then every field at
//! once (400 VALIDATION_ERROR with one `field_errors` entry per bad field). Messages never echo
//! a value: a rejected field is named, its content is not.

use bytes::Bytes;
use http::{HeaderMap, header};
use serde_json::{Map, Value};
use svc_tower::error::{ApiError, ErrorCode, FieldError, FieldErrorCode};

/// Longest accepted `model`, in characters.
pub const MAX_MODEL_CHARS: usize = 256;
/// Most accepted `messages`.
pub const MAX_MESSAGES: usize = 1000;
/// Largest accepted `messages[i].content`, in bytes (100 KiB).
pub const MAX_CONTENT_BYTES: usize = 100 * 1024;
/// Longest accepted `Idempotency-Key`, in characters.
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 256;
/// Bound on reported field errors, so a thousand bad messages cannot make a huge error body.
pub const MAX_FIELD_ERRORS: usize = 100;

/// The `Idempotency-Key` request header.
pub static IDEMPOTENCY_KEY: http::HeaderName = http::HeaderName::from_static("idempotency-key");

/// One chat message: the fields the gateway reads; the provider gets the original body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// `system`, `user`, `assistant`, ...; not restricted, the provider decides.
    pub role: String,
    /// The message text. Never logged.
    pub content: String,
}

/// A validated chat completion request.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    /// The requested model.
    pub model: String,
    /// The conversation.
    pub messages: Vec<Message>,
    /// SSE when true.
    pub stream: bool,
    /// Sampling temperature, when given.
    pub temperature: Option<f64>,
    /// Completion token cap, when given.
    pub max_tokens: Option<i64>,
    /// The client's `Idempotency-Key`, when given.
    pub idempotency_key: Option<String>,
    /// The body exactly as received: forwarded as is, so unknown keys reach the provider.
    pub raw: Bytes,
}

/// A refused request. Boxed: an [`ApiError`] is large, and the happy path should not pay
/// for moving it around.
pub type Rejection = Box<ApiError>;

/// 415 unless `Content-Type` is `application/json`, parameters (a charset) allowed.
pub fn check_content_type(headers: &HeaderMap) -> Result<(), Rejection> {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or_default().trim())
        .is_some_and(|essence| essence.eq_ignore_ascii_case("application/json"));
    if is_json {
        Ok(())
    } else {
        Err(Box::new(ApiError::new(ErrorCode::UnsupportedMediaType)))
    }
}

/// Checks the media type, parses and validates a chat completion request.
pub fn chat_request(headers: &HeaderMap, body: Bytes) -> Result<ChatRequest, Rejection> {
    check_content_type(headers)?;
    let object = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(object)) => object,
        Ok(_) => {
            return Err(Box::new(
                ApiError::new(ErrorCode::InvalidJson)
                    .with_message("The request body must be a JSON object."),
            ));
        }
        Err(_) => return Err(Box::new(ApiError::new(ErrorCode::InvalidJson))),
    };
    let mut errors = Errors::default();
    let idempotency_key = idempotency_key(headers, &mut errors);
    let model = model(&object, &mut errors);
    let messages = messages(&object, &mut errors);
    let stream = optional(&object, "stream", &mut errors, Value::as_bool, "a boolean");
    let temperature = optional(
        &object,
        "temperature",
        &mut errors,
        Value::as_f64,
        "a number",
    );
    let max_tokens = optional(
        &object,
        "max_tokens",
        &mut errors,
        Value::as_i64,
        "an integer",
    );
    let stream = stream.unwrap_or(false);
    if stream && idempotency_key.is_some() {
        errors.push(
            "stream",
            FieldErrorCode::InvalidEnum,
            "stream must be false or absent when Idempotency-Key is present",
        );
    }
    if !errors.0.is_empty() {
        return Err(Box::new(
            ApiError::new(ErrorCode::ValidationError).with_field_errors(errors.0),
        ));
    }
    Ok(ChatRequest {
        model: model.unwrap_or_default(),
        messages,
        stream,
        temperature,
        max_tokens,
        idempotency_key,
        raw: body,
    })
}

#[derive(Default)]
struct Errors(Vec<FieldError>);

impl Errors {
    fn push(&mut self, field: impl Into<String>, code: FieldErrorCode, message: impl Into<String>) {
        if self.0.len() < MAX_FIELD_ERRORS {
            self.0.push(FieldError::new(field, code, message));
        }
    }
}

fn idempotency_key(headers: &HeaderMap, errors: &mut Errors) -> Option<String> {
    let value = headers.get(&IDEMPOTENCY_KEY)?;
    let field = "Idempotency-Key";
    match value.to_str() {
        Ok("") => {
            errors.push(
                field,
                FieldErrorCode::InvalidFormat,
                "Idempotency-Key must not be empty",
            );
            None
        }
        Ok(key) if key.chars().count() > MAX_IDEMPOTENCY_KEY_CHARS => {
            errors.push(
                field,
                FieldErrorCode::TooLong,
                "Idempotency-Key is longer than 256 characters",
            );
            None
        }
        Ok(key) => Some(key.to_owned()),
        Err(_) => {
            errors.push(
                field,
                FieldErrorCode::InvalidFormat,
                "Idempotency-Key must be visible ASCII",
            );
            None
        }
    }
}

fn model(object: &Map<String, Value>, errors: &mut Errors) -> Option<String> {
    match object.get("model") {
        None | Some(Value::Null) => {
            errors.push("model", FieldErrorCode::Required, "model is required");
            None
        }
        Some(Value::String(m)) if m.is_empty() => {
            errors.push("model", FieldErrorCode::Required, "model must not be empty");
            None
        }
        Some(Value::String(m)) if m.chars().count() > MAX_MODEL_CHARS => {
            errors.push(
                "model",
                FieldErrorCode::TooLong,
                "model is longer than 256 characters",
            );
            None
        }
        Some(Value::String(m)) => Some(m.clone()),
        Some(_) => {
            errors.push(
                "model",
                FieldErrorCode::InvalidFormat,
                "model must be a string",
            );
            None
        }
    }
}

fn messages(object: &Map<String, Value>, errors: &mut Errors) -> Vec<Message> {
    let items = match object.get("messages") {
        None | Some(Value::Null) => {
            errors.push("messages", FieldErrorCode::Required, "messages is required");
            return Vec::new();
        }
        Some(Value::Array(items)) if items.is_empty() => {
            errors.push(
                "messages",
                FieldErrorCode::Required,
                "messages must not be empty",
            );
            return Vec::new();
        }
        Some(Value::Array(items)) if items.len() > MAX_MESSAGES => {
            errors.push(
                "messages",
                FieldErrorCode::TooMany,
                "messages has more than 1000 items",
            );
            return Vec::new();
        }
        Some(Value::Array(items)) => items,
        Some(_) => {
            errors.push(
                "messages",
                FieldErrorCode::InvalidFormat,
                "messages must be an array",
            );
            return Vec::new();
        }
    };
    let mut messages = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Value::Object(item) = item else {
            errors.push(
                format!("messages[{i}]"),
                FieldErrorCode::InvalidFormat,
                "each message must be an object",
            );
            continue;
        };
        let role = message_string(item, i, "role", errors);
        let content = message_string(item, i, "content", errors);
        if let Some(content) = &content
            && content.len() > MAX_CONTENT_BYTES
        {
            errors.push(
                format!("messages[{i}].content"),
                FieldErrorCode::TooLong,
                "content is longer than 100 KiB",
            );
            continue;
        }
        if let (Some(role), Some(content)) = (role, content) {
            messages.push(Message { role, content });
        }
    }
    messages
}

fn message_string(
    item: &Map<String, Value>,
    index: usize,
    name: &str,
    errors: &mut Errors,
) -> Option<String> {
    match item.get(name) {
        None | Some(Value::Null) => {
            errors.push(
                format!("messages[{index}].{name}"),
                FieldErrorCode::Required,
                format!("{name} is required"),
            );
            None
        }
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            errors.push(
                format!("messages[{index}].{name}"),
                FieldErrorCode::InvalidFormat,
                format!("{name} must be a string"),
            );
            None
        }
    }
}

/// An optional field: absent and null mean unset; any other value must convert.
fn optional<T>(
    object: &Map<String, Value>,
    name: &'static str,
    errors: &mut Errors,
    convert: impl Fn(&Value) -> Option<T>,
    expected: &str,
) -> Option<T> {
    match object.get(name) {
        None | Some(Value::Null) => None,
        Some(value) => {
            let converted = convert(value);
            if converted.is_none() {
                errors.push(
                    name,
                    FieldErrorCode::InvalidFormat,
                    format!("{name} must be {expected}"),
                );
            }
            converted
        }
    }
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
