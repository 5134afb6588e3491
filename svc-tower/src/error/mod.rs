//! The typed error every layer fails with, and its JSON envelope.
//!
//! Layers never build error bodies themselves. A rejection is an [`ApiError`] turned into a
//! response by [`ApiError::into_response`]: the status and headers are final, the body is empty,
//! and the error rides along in the response extensions. The
//! [`ErrorEnvelope`](crate::envelope::ErrorEnvelope) layer, outside them all, renders that error
//! as the envelope, with the request id and the docs link, in one place.
//!
//! ```
//! use svc_tower::error::{ApiError, ErrorCode, FieldError, FieldErrorCode};
//!
//! let err = ApiError::new(ErrorCode::ValidationError)
//!     .with_field_error(FieldError::new("model", FieldErrorCode::Required, "model is required"));
//! let body = err.envelope("0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b", None);
//! let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
//! assert_eq!(json["error"]["code"], "VALIDATION_ERROR");
//! assert_eq!(json["error"]["field_errors"][0]["code"], "REQUIRED");
//! assert_eq!(err.status(), http::StatusCode::BAD_REQUEST);
//! ```

mod code;

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode, header};
use http_body_util::Full;
use serde::Serialize;

pub use code::{ErrorCode, FieldErrorCode};

/// One entry of the envelope's `field_errors`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    /// The offending field, as a JSON path such as `messages[2].content`.
    pub field: String,
    /// What is wrong with it.
    pub code: FieldErrorCode,
    /// A safe human-readable explanation; never echoes the value.
    pub message: String,
}

impl FieldError {
    /// A field error.
    pub fn new(
        field: impl Into<String>,
        code: FieldErrorCode,
        message: impl Into<String>,
    ) -> FieldError {
        FieldError {
            field: field.into(),
            code,
            message: message.into(),
        }
    }
}

impl Serialize for FieldErrorCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A request failure with a code from the svc error tables.
///
/// The message and detail must be safe to show a caller: no secret, token, SQL or message
/// content.
#[derive(Debug, Clone)]
pub struct ApiError {
    code: ErrorCode,
    message: Option<Cow<'static, str>>,
    detail: Option<String>,
    field_errors: Vec<FieldError>,
    headers: HeaderMap,
}

/// `x-should-retry`: read by the official OpenAI SDKs to decide whether to retry.
pub static X_SHOULD_RETRY: HeaderName = HeaderName::from_static("x-should-retry");

impl ApiError {
    /// An error with the code's default message.
    pub fn new(code: ErrorCode) -> ApiError {
        ApiError {
            code,
            message: None,
            detail: None,
            field_errors: Vec::new(),
            headers: HeaderMap::new(),
        }
    }

    /// Replaces the default message.
    pub fn with_message(mut self, message: impl Into<Cow<'static, str>>) -> ApiError {
        self.message = Some(message.into());
        self
    }

    /// Adds a `detail`; it must hold no secret.
    pub fn with_detail(mut self, detail: impl Into<String>) -> ApiError {
        self.detail = Some(detail.into());
        self
    }

    /// Adds one entry to `field_errors`.
    pub fn with_field_error(mut self, field_error: FieldError) -> ApiError {
        self.field_errors.push(field_error);
        self
    }

    /// Adds entries to `field_errors`.
    pub fn with_field_errors(
        mut self,
        field_errors: impl IntoIterator<Item = FieldError>,
    ) -> ApiError {
        self.field_errors.extend(field_errors);
        self
    }

    /// Sets `Retry-After` (whole seconds) on the response.
    pub fn with_retry_after(self, seconds: u64) -> ApiError {
        self.with_header(header::RETRY_AFTER, HeaderValue::from(seconds))
    }

    /// Sets a response header, e.g. the `X-RateLimit-*` family on a 429.
    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> ApiError {
        self.headers.insert(name, value);
        self
    }

    /// The error code.
    pub fn code(&self) -> &ErrorCode {
        &self.code
    }

    /// The HTTP status of the code.
    pub fn status(&self) -> StatusCode {
        self.code.status()
    }

    /// The message shown to the caller.
    pub fn message(&self) -> &str {
        self.message
            .as_deref()
            .unwrap_or_else(|| self.code.default_message())
    }

    /// The optional detail.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// The field errors (empty unless a validation error).
    pub fn field_errors(&self) -> &[FieldError] {
        &self.field_errors
    }

    /// Headers the response carries besides the envelope's own.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// Renders the envelope body: `{"error": {...}}` with the given request id, a UTC RFC 3339
    /// timestamp, and `docs_url` when a docs base is given.
    pub fn envelope(&self, request_id: &str, docs_base: Option<&str>) -> Bytes {
        let docs_url = docs_base.map(|base| {
            format!(
                "{}/{}",
                base.trim_end_matches('/'),
                self.code.as_str().to_ascii_lowercase().replace('_', "-")
            )
        });
        let envelope = Envelope {
            error: Body {
                code: self.code.as_str(),
                message: self.message(),
                detail: self.detail(),
                docs_url: docs_url.as_deref(),
                request_id,
                timestamp: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                field_errors: (!self.field_errors.is_empty()).then_some(&self.field_errors),
                r#type: self.code.openai_type(),
                param: self.field_errors.first().map(|f| f.field.as_str()),
            },
        };
        // Serializing strings, numbers and a Vec of plain structs cannot fail.
        Bytes::from(serde_json::to_vec(&envelope).unwrap_or_default())
    }

    /// The rejection response: final status and headers, an empty body, and this error in the
    /// response extensions for [`ErrorEnvelope`](crate::envelope::ErrorEnvelope) to render.
    pub fn into_response(self) -> Response<Full<Bytes>> {
        self.into_response_with(Full::default())
    }

    /// As [`ApiError::into_response`], with a body of the caller's type (its placeholder
    /// content is replaced when the envelope is rendered).
    pub fn into_response_with<B>(self, body: B) -> Response<B> {
        let mut response = Response::new(body);
        *response.status_mut() = self.status();
        let headers = response.headers_mut();
        for (name, value) in &self.headers {
            headers.insert(name.clone(), value.clone());
        }
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response.extensions_mut().insert(self);
        response
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message())
    }
}

impl std::error::Error for ApiError {}

impl From<ErrorCode> for ApiError {
    fn from(code: ErrorCode) -> ApiError {
        ApiError::new(code)
    }
}

#[derive(Serialize)]
struct Envelope<'a> {
    error: Body<'a>,
}

#[derive(Serialize)]
struct Body<'a> {
    code: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    docs_url: Option<&'a str>,
    request_id: &'a str,
    timestamp: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    field_errors: Option<&'a Vec<FieldError>>,
    r#type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    param: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(err: &ApiError, docs: Option<&str>) -> serde_json::Value {
        serde_json::from_slice(&err.envelope("req-1", docs)).unwrap()
    }

    #[test]
    fn envelope_has_the_required_fields() {
        let json = render(&ApiError::new(ErrorCode::MissingToken), None);
        let error = &json["error"];
        assert_eq!(error["code"], "MISSING_TOKEN");
        assert_eq!(error["request_id"], "req-1");
        assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()));
        let ts = error["timestamp"].as_str().unwrap();
        assert!(chrono::DateTime::parse_from_rfc3339(ts).is_ok());
        assert!(ts.ends_with('Z'));
        assert!(error.get("docs_url").is_none());
        assert!(error.get("field_errors").is_none());
        assert!(error.get("detail").is_none());
    }

    #[test]
    fn docs_url_only_with_a_docs_base() {
        let json = render(
            &ApiError::new(ErrorCode::RateLimited),
            Some("https://docs.example.com/errors/"),
        );
        assert_eq!(
            json["error"]["docs_url"],
            "https://docs.example.com/errors/rate-limited"
        );
    }

    #[test]
    fn rejection_response_carries_status_headers_and_error() {
        let response = ApiError::new(ErrorCode::RateLimited)
            .with_retry_after(7)
            .into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[header::RETRY_AFTER], "7");
        let err = response.extensions().get::<ApiError>().unwrap();
        assert_eq!(err.code(), &ErrorCode::RateLimited);
    }
}
