//! Request validation for the provider-backed routes.
//!
//! Order: the media type (415), then strict JSON (400 `INVALID_JSON`, a duplicate key
//! included), then every field at once (400 `VALIDATION_ERROR` with one `field_errors` entry
//! per bad field, named by its exact path, e.g. `messages[3].content[1].image_url.url`).
//! Messages never echo a value: a rejected field is named, its content is not.
//!
//! Only the fields the gateway reads are checked; any other field passes to the provider
//! unchanged. The body parsed here is the body forwarded: nothing is parsed twice.

mod chat;
mod embeddings;
pub mod json;
mod messages;
mod responses;
mod schema;

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, header};
use serde_json::{Map, Value};
use svc_tower::error::{ApiError, ErrorCode, FieldError, FieldErrorCode};

use crate::request::{ApiRequest, Endpoint};

/// Longest accepted `model`, in characters.
pub const MAX_MODEL_CHARS: usize = 256;
/// Most accepted `messages` (and `input` items of a response).
pub const MAX_MESSAGES: usize = 1000;
/// Most text in one message (a string, or its text parts summed), in bytes (100 KiB).
pub const MAX_CONTENT_BYTES: usize = 100 * 1024;
/// Most inputs of one embeddings request.
pub const MAX_EMBEDDING_INPUTS: usize = 2048;
/// Bound on reported field errors, so a thousand bad messages cannot make a huge error body.
pub const MAX_FIELD_ERRORS: usize = 100;

/// The `Idempotency-Key` request header.
pub use svc_tower::idempotency::IDEMPOTENCY_KEY;

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

/// Checks the media type, parses and validates a request to `endpoint`.
pub fn request(
    endpoint: Endpoint,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<ApiRequest, Rejection> {
    check_content_type(headers)?;
    let object = match json::parse(&body) {
        Ok(Value::Object(object)) => object,
        Ok(_) => {
            return Err(Box::new(
                ApiError::new(ErrorCode::InvalidJson)
                    .with_message("The request body must be a JSON object."),
            ));
        }
        Err(json::JsonError::DuplicateKey) => {
            return Err(Box::new(
                ApiError::new(ErrorCode::InvalidJson)
                    .with_message("The request body names a key twice in one object."),
            ));
        }
        Err(json::JsonError::Syntax) => {
            return Err(Box::new(ApiError::new(ErrorCode::InvalidJson)));
        }
    };
    let mut errors = Errors::default();
    let has_key = idempotency_key(headers, &mut errors);
    let model = model(&object, &mut errors);
    let fields = match endpoint {
        Endpoint::ChatCompletions => chat::validate(&object, &mut errors),
        Endpoint::Embeddings => embeddings::validate(&object, &mut errors),
        Endpoint::Responses => responses::validate(&object, &mut errors),
        Endpoint::Messages => messages::validate(&object, &mut errors),
        Endpoint::CountTokens => messages::count_tokens(&object, &mut errors),
    };
    if fields.stream && has_key {
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
    Ok(ApiRequest {
        endpoint,
        model: model.unwrap_or_default(),
        stream: fields.stream,
        message_count: fields.message_count,
        include_usage: fields.include_usage,
        max_tokens: fields.max_tokens,
        temperature: fields.temperature,
        json: Arc::new(object),
        raw: body,
    })
}

/// Checks the media type, parses and validates a chat completion request.
pub fn chat_request(headers: &HeaderMap, body: Bytes) -> Result<ApiRequest, Rejection> {
    request(Endpoint::ChatCompletions, headers, body)
}

/// What an endpoint's validator read, beside the model.
#[derive(Debug, Default)]
struct Fields {
    stream: bool,
    include_usage: bool,
    message_count: usize,
    max_tokens: Option<u64>,
    temperature: Option<f64>,
}

/// The field errors found so far, at most [`MAX_FIELD_ERRORS`].
#[derive(Default)]
struct Errors(Vec<FieldError>);

impl Errors {
    fn push(&mut self, field: impl Into<String>, code: FieldErrorCode, message: impl Into<String>) {
        self.push_error(FieldError::new(field, code, message));
    }

    fn push_error(&mut self, error: FieldError) {
        if self.0.len() < MAX_FIELD_ERRORS {
            self.0.push(error);
        }
    }
}

/// Whether a valid `Idempotency-Key` came; an invalid one is a field error, by the rule the
/// idempotency layer applies.
fn idempotency_key(headers: &HeaderMap, errors: &mut Errors) -> bool {
    match svc_tower::idempotency::key(headers) {
        Ok(key) => key.is_some(),
        Err(error) => {
            errors.push_error(error);
            false
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

#[cfg(test)]
mod tests;
