//! Provider failures and their place in the error tables.
//!
//! | provider answer | gateway answer |
//! |---|---|
//! | 400, 409, 413, 422 (the payload was refused) | 400 INVALID_REQUEST, sanitized detail |
//! | 429 | 429 RATE_LIMITED, `Retry-After` forwarded when present |
//! | 401, 403, 404, any other 4xx, 5xx, 1xx, 3xx, transport failure, unreadable body | 503 PROVIDER_UNAVAILABLE |
//! | 408, or no answer within `SVC_PROVIDER_TIMEOUT` | 504 PROVIDER_TIMEOUT |
//! | model not in the registry | 501 PROVIDER_NOT_CONFIGURED, `x-should-retry: false` |
//! | a field the target's API has no counterpart for (found while translating) | 400 VALIDATION_ERROR, the field named |
//!
//! 409, 413 and 422 are how OpenAI-compatible servers (vLLM, llama.cpp, LiteLLM) refuse a
//! payload, so they are the client's problem like a 400. Every other unexpected status is the
//! provider's problem: a client must not be told its request was wrong when our credentials,
//! our base URL or the provider itself is.
//!
//! The official OpenAI SDKs retry every 5xx. An unregistered model stays unregistered, so the
//! 501 says `x-should-retry: false`: the client gets its error at once instead of after two
//! backoffs.

use std::fmt;

use http::{HeaderValue, StatusCode};
use svc_tower::error::{ApiError, ErrorCode, FieldError, FieldErrorCode, X_SHOULD_RETRY};

/// Longest `detail` carried over from a provider's error message, in characters.
pub const MAX_DETAIL_CHARS: usize = 512;

/// Why a provider call did not produce a usable answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderError {
    /// The model is not registered with the active provider registry.
    NotConfigured,
    /// The provider refused the payload; `detail` is already sanitized.
    Rejected {
        /// The provider's own explanation, trimmed and redacted.
        detail: Option<String>,
    },
    /// The provider throttled us.
    RateLimited {
        /// The provider's `Retry-After`, in seconds.
        retry_after: Option<u64>,
    },
    /// The provider could not be used; `reason` is a fixed phrase for the logs.
    Unavailable {
        /// What went wrong, from a small fixed set.
        reason: &'static str,
    },
    /// The provider did not answer within the deadline.
    Timeout,
    /// The request holds something the target's API cannot express: found while translating
    /// it, before any call, and named rather than dropped.
    Untranslatable(FieldError),
}

impl ProviderError {
    /// The reason of a connection that could not be made or was lost before the head.
    pub const UNREACHABLE: &'static str = "provider unreachable";
    /// The reason of a 5xx answer.
    pub const SERVER_ERROR: &'static str = "provider server error";
    /// The reason of a JSON answer cut before its end.
    pub const MID_BODY: &'static str = "provider connection failed mid-body";
    /// The reason of a stream event longer than [`crate::sse::MAX_EVENT_BYTES`].
    pub const EVENT_TOO_LONG: &'static str = "provider stream event over the size limit";

    /// Whether the next target of a model should be tried: the provider could not be reached,
    /// did not answer in time, throttled us, or failed on its side. A refused payload would be
    /// refused by the next target too, and a refused key or a missing endpoint is the
    /// operator's to fix: the client hears of those at once.
    pub fn falls_back(&self) -> bool {
        match self {
            ProviderError::RateLimited { .. } | ProviderError::Timeout => true,
            ProviderError::Unavailable { reason } => {
                [Self::UNREACHABLE, Self::SERVER_ERROR, Self::MID_BODY].contains(reason)
            }
            ProviderError::NotConfigured
            | ProviderError::Rejected { .. }
            | ProviderError::Untranslatable(_) => false,
        }
    }

    /// The refusal of `field`, which the target's API has no counterpart for; `message` says
    /// why without echoing the value.
    pub fn untranslatable(field: impl Into<String>, message: impl Into<String>) -> ProviderError {
        ProviderError::Untranslatable(FieldError::new(field, FieldErrorCode::InvalidEnum, message))
    }

    /// The error for an upstream status that is not a success.
    pub fn from_status(
        status: StatusCode,
        retry_after: Option<u64>,
        detail: Option<String>,
    ) -> ProviderError {
        match status.as_u16() {
            400 | 409 | 413 | 422 => ProviderError::Rejected { detail },
            429 => ProviderError::RateLimited { retry_after },
            408 => ProviderError::Timeout,
            401 | 403 => ProviderError::Unavailable {
                reason: "provider refused our credentials",
            },
            404 => ProviderError::Unavailable {
                reason: "provider endpoint or model not found",
            },
            500..=599 => ProviderError::Unavailable {
                reason: Self::SERVER_ERROR,
            },
            _ => ProviderError::Unavailable {
                reason: "unexpected provider status",
            },
        }
    }

    /// The envelope error the client sees.
    pub fn to_api_error(&self) -> ApiError {
        match self {
            ProviderError::NotConfigured => ApiError::new(ErrorCode::ProviderNotConfigured)
                .with_header(X_SHOULD_RETRY.clone(), HeaderValue::from_static("false")),
            ProviderError::Rejected { detail } => {
                let err = ApiError::new(ErrorCode::InvalidRequest);
                match detail {
                    Some(detail) => err.with_detail(detail.clone()),
                    None => err,
                }
            }
            ProviderError::RateLimited { retry_after } => {
                let err = ApiError::new(ErrorCode::RateLimited)
                    .with_message("The provider is rate limiting requests.");
                err.with_retry_after(retry_after.unwrap_or(DEFAULT_RETRY_AFTER_SECS))
            }
            ProviderError::Unavailable { .. } => ApiError::new(ErrorCode::ProviderUnavailable)
                .with_retry_after(DEFAULT_RETRY_AFTER_SECS),
            ProviderError::Timeout => ApiError::new(ErrorCode::ProviderTimeout),
            ProviderError::Untranslatable(field) => {
                ApiError::new(ErrorCode::ValidationError).with_field_error(field.clone())
            }
        }
    }
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProviderError::NotConfigured => f.write_str("model not configured"),
            ProviderError::Rejected { .. } => f.write_str("provider rejected the request"),
            ProviderError::RateLimited { .. } => f.write_str("provider rate limited"),
            ProviderError::Unavailable { reason } => f.write_str(reason),
            ProviderError::Timeout => f.write_str("provider timed out"),
            ProviderError::Untranslatable(_) => {
                f.write_str("request cannot be translated for the provider")
            }
        }
    }
}

impl std::error::Error for ProviderError {}

/// `Retry-After` on a provider 429 that gave none, and on 503 PROVIDER_UNAVAILABLE: every
/// 429 and 503 tells the OpenAI SDKs when to retry, so they do not fall back to guessing.
pub const DEFAULT_RETRY_AFTER_SECS: u64 = 1;

/// `Retry-After` in whole seconds, when it is given as seconds (HTTP dates are dropped: a
/// client's clock is not ours to trust, and providers send seconds).
pub fn retry_after_seconds(headers: &http::HeaderMap) -> Option<u64> {
    let value = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(seconds);
    }
    // Some providers send fractional seconds; round up so a client never retries early.
    value
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| s.ceil() as u64)
}

/// The provider's `error.message` (or a bare string `error`), made safe to show a client:
/// our key and anything shaped like a credential is redacted, control characters dropped, and
/// the result trimmed to [`MAX_DETAIL_CHARS`].
pub fn sanitized_detail(body: &[u8], api_key: Option<&str>) -> Option<String> {
    let json: serde_json::Value = serde_json::from_slice(body).ok()?;
    let message = match &json["error"] {
        serde_json::Value::String(s) => s.as_str(),
        error => error["message"].as_str()?,
    };
    let mut text = message.to_owned();
    if let Some(key) = api_key.filter(|k| !k.is_empty()) {
        text = text.replace(key, "[redacted]");
    }
    let words: Vec<String> = text
        .split(' ')
        .map(|word| {
            let bare =
                word.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '_' && c != '-');
            let credential = ["sk-", "svc_pat_", "Bearer"]
                .iter()
                .any(|p| bare.starts_with(p))
                && bare.len() > 8;
            if credential {
                "[redacted]".to_owned()
            } else {
                word.to_owned()
            }
        })
        .collect();
    let cleaned: String = words
        .join(" ")
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let cleaned = cleaned.trim();
    if cleaned.is_empty() {
        return None;
    }
    if cleaned.chars().count() <= MAX_DETAIL_CHARS {
        return Some(cleaned.to_owned());
    }
    let mut cut: String = cleaned.chars().take(MAX_DETAIL_CHARS - 1).collect();
    cut.push('…');
    Some(cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_the_provider_table() {
        let table = [
            (400, 400, "INVALID_REQUEST"),
            (422, 400, "INVALID_REQUEST"),
            (429, 429, "RATE_LIMITED"),
            (401, 503, "PROVIDER_UNAVAILABLE"),
            (403, 503, "PROVIDER_UNAVAILABLE"),
            (404, 503, "PROVIDER_UNAVAILABLE"),
            (402, 503, "PROVIDER_UNAVAILABLE"),
            (500, 503, "PROVIDER_UNAVAILABLE"),
            (502, 503, "PROVIDER_UNAVAILABLE"),
            (503, 503, "PROVIDER_UNAVAILABLE"),
            (302, 503, "PROVIDER_UNAVAILABLE"),
            (408, 504, "PROVIDER_TIMEOUT"),
        ];
        for (upstream, status, code) in table {
            let err =
                ProviderError::from_status(StatusCode::from_u16(upstream).unwrap(), None, None)
                    .to_api_error();
            assert_eq!(err.status().as_u16(), status, "{upstream}");
            assert_eq!(err.code().as_str(), code, "{upstream}");
        }
        let err = ProviderError::NotConfigured.to_api_error();
        assert_eq!(
            (err.status().as_u16(), err.code().as_str()),
            (501, "PROVIDER_NOT_CONFIGURED")
        );
        assert_eq!(err.headers()[&X_SHOULD_RETRY], "false");
        let err = ProviderError::Timeout.to_api_error();
        assert_eq!(
            (err.status().as_u16(), err.code().as_str()),
            (504, "PROVIDER_TIMEOUT")
        );
        let err = ProviderError::untranslatable("n", "n above 1 cannot be sent").to_api_error();
        assert_eq!(
            (err.status().as_u16(), err.code().as_str()),
            (400, "VALIDATION_ERROR")
        );
        assert_eq!(err.field_errors()[0].field, "n");
    }

    #[test]
    fn retry_after_is_forwarded() {
        let err = ProviderError::RateLimited {
            retry_after: Some(7),
        }
        .to_api_error();
        assert_eq!(err.headers()[http::header::RETRY_AFTER], "7");
        let err = ProviderError::RateLimited { retry_after: None }.to_api_error();
        assert_eq!(err.headers()[http::header::RETRY_AFTER], "1");

        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::RETRY_AFTER, "12".parse().unwrap());
        assert_eq!(retry_after_seconds(&headers), Some(12));
        headers.insert(http::header::RETRY_AFTER, "1.2".parse().unwrap());
        assert_eq!(retry_after_seconds(&headers), Some(2));
        headers.insert(
            http::header::RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after_seconds(&headers), None);
    }

    #[test]
    fn detail_is_sanitized() {
        let body = br#"{"error": {"message": "Incorrect API key provided: sk-live-123456789. Also sk-proj-abcdefghijkl is bad", "type": "invalid_request_error"}}"#;
        let detail = sanitized_detail(body, Some("sk-live-123456789")).unwrap();
        assert!(!detail.contains("sk-live-123456789"));
        assert!(!detail.contains("sk-proj-abcdefghijkl"));
        assert!(detail.starts_with("Incorrect API key provided"));

        let long = format!(r#"{{"error": {{"message": "{}"}}}}"#, "x".repeat(5000));
        let detail = sanitized_detail(long.as_bytes(), None).unwrap();
        assert_eq!(detail.chars().count(), MAX_DETAIL_CHARS);

        let ctl = br#"{"error": {"message": "bad\nfield\u0000 here"}}"#;
        assert_eq!(sanitized_detail(ctl, None).unwrap(), "bad field  here");
        assert_eq!(
            sanitized_detail(br#"{"error": "plain"}"#, None).unwrap(),
            "plain"
        );
        assert_eq!(sanitized_detail(b"<html>oops</html>", None), None);
        assert_eq!(sanitized_detail(br#"{"detail": "x"}"#, None), None);
    }
}
