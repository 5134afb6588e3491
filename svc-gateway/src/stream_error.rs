//! The last event of a stream that breaks midway, in the protocol of the route the client
//! called (a chat completion answered by a Claude model still speaks chat).
//!
//! The status line is long gone when a stream breaks, so the failure is told as events the
//! client's SDK raises on, each carrying the envelope's `code` and the `request_id`:
//!
//! - `/v1/chat/completions`: `data: {"error": {...}}`, the envelope itself. The OpenAI SDKs
//!   raise on any event whose data holds an `error` object.
//! - `/v1/messages`: `event: error` with Anthropic's error object, `{"type": "error", "error":
//!   {"type": "api_error", "message": …, "code": …, "request_id": …}, "request_id": …}`. The
//!   Anthropic SDKs raise on `event: error`.
//! - `/v1/responses`: `response.failed`, the response with its `error {code, message}` (what
//!   agents that follow the response's state read), then an `error` event with `code`,
//!   `message`, `param` and `sequence_number`, and the envelope's error object beside them (the
//!   OpenAI SDKs raise on it, with its `code`).

use bytes::{BufMut, Bytes, BytesMut};
use http::StatusCode;
use serde_json::{Map, Value, json};
use svc_tower::error::ApiError;

use crate::request::Endpoint;

/// The events that end a stream on `endpoint` with `error`. `sequence` is the number of the
/// next event of a Responses stream (the events passed on before it).
pub(crate) fn events(
    endpoint: Endpoint,
    error: &ApiError,
    request_id: &str,
    docs_base: Option<&str>,
    sequence: u64,
) -> Bytes {
    let envelope = error.envelope(request_id, docs_base);
    let mut out = BytesMut::with_capacity(envelope.len() * 2 + 64);
    match endpoint {
        Endpoint::Messages => {
            let mut object = envelope_object(&envelope);
            object.insert("type".into(), anthropic_type(error.status()).into());
            let event = json!({"type": "error", "error": object, "request_id": request_id});
            push(&mut out, Some("error"), &event);
        }
        Endpoint::Responses => {
            let code = error.code().as_str();
            let message = error.message();
            let failed = json!({
                "type": "response.failed",
                "sequence_number": sequence,
                "response": {
                    "id": format!("resp_{}", request_id.replace('-', "")),
                    "object": "response",
                    "created_at": chrono::Utc::now().timestamp(),
                    "status": "failed",
                    "error": {"code": code, "message": message},
                    "incomplete_details": null,
                    "output": [],
                },
            });
            push(&mut out, Some("response.failed"), &failed);
            let event = json!({
                "type": "error",
                "code": code,
                "message": message,
                "param": null,
                "sequence_number": sequence + 1,
                "error": envelope_object(&envelope),
                "request_id": request_id,
            });
            push(&mut out, Some("error"), &event);
        }
        Endpoint::ChatCompletions | Endpoint::Embeddings | Endpoint::CountTokens => {
            out.put_slice(b"data: ");
            out.put_slice(&envelope);
            out.put_slice(b"\n\n");
        }
    }
    out.freeze()
}

/// The `error` object of a rendered envelope.
fn envelope_object(envelope: &[u8]) -> Map<String, Value> {
    match serde_json::from_slice::<Value>(envelope) {
        Ok(Value::Object(mut outer)) => match outer.remove("error") {
            Some(Value::Object(error)) => error,
            _ => Map::new(),
        },
        _ => Map::new(),
    }
}

/// One event: its `event:` line when named, its data on one line, the blank line.
fn push(out: &mut BytesMut, name: Option<&str>, data: &Value) {
    if let Some(name) = name {
        out.put_slice(b"event: ");
        out.put_slice(name.as_bytes());
        out.put_u8(b'\n');
    }
    out.put_slice(b"data: ");
    out.put_slice(data.to_string().as_bytes());
    out.put_slice(b"\n\n");
}

/// Anthropic's error type for the status the envelope would have been answered with.
fn anthropic_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        408 | 504 => "timeout_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use svc_tower::error::ErrorCode;

    /// Each event of `text`: its name (if any) and its data as JSON.
    fn parse(text: &Bytes) -> Vec<(Option<String>, Value)> {
        let text = std::str::from_utf8(text).unwrap();
        assert!(text.ends_with("\n\n"), "{text}");
        text.split_terminator("\n\n")
            .map(|event| {
                let mut name = None;
                let mut data = None;
                for line in event.lines() {
                    if let Some(n) = line.strip_prefix("event: ") {
                        name = Some(n.to_owned());
                    } else if let Some(d) = line.strip_prefix("data: ") {
                        data = Some(serde_json::from_str(d).unwrap());
                    } else {
                        panic!("unexpected line {line:?}");
                    }
                }
                (name, data.expect("a data line"))
            })
            .collect()
    }

    fn render(endpoint: Endpoint, code: ErrorCode) -> Vec<(Option<String>, Value)> {
        parse(&events(endpoint, &ApiError::new(code), "req-1", None, 7))
    }

    #[test]
    fn chat_ends_with_the_envelope() {
        let events = render(Endpoint::ChatCompletions, ErrorCode::ProviderTimeout);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].0, None);
        assert_eq!(events[0].1["error"]["code"], "PROVIDER_TIMEOUT");
        assert_eq!(events[0].1["error"]["request_id"], "req-1");
    }

    #[test]
    fn messages_end_with_anthropics_error_event() {
        for (code, kind) in [
            (ErrorCode::ProviderTimeout, "timeout_error"),
            (ErrorCode::ProviderUnavailable, "api_error"),
            (ErrorCode::RateLimited, "rate_limit_error"),
            (ErrorCode::InvalidRequest, "invalid_request_error"),
        ] {
            let events = render(Endpoint::Messages, code.clone());
            assert_eq!(events.len(), 1);
            let (name, data) = &events[0];
            assert_eq!(name.as_deref(), Some("error"));
            assert_eq!(data["type"], "error");
            assert_eq!(data["error"]["type"], kind, "{code:?}");
            assert_eq!(data["error"]["code"], code.as_str());
            assert!(data["error"]["message"].as_str().is_some());
            assert_eq!(data["error"]["request_id"], "req-1");
            assert_eq!(data["request_id"], "req-1");
        }
    }

    #[test]
    fn responses_end_failed_then_with_an_error_event() {
        let events = render(Endpoint::Responses, ErrorCode::ProviderUnavailable);
        assert_eq!(events.len(), 2);
        let (name, failed) = &events[0];
        assert_eq!(name.as_deref(), Some("response.failed"));
        assert_eq!(failed["type"], "response.failed");
        assert_eq!(failed["sequence_number"], 7);
        assert_eq!(failed["response"]["status"], "failed");
        assert_eq!(failed["response"]["error"]["code"], "PROVIDER_UNAVAILABLE");
        assert!(failed["response"]["error"]["message"].as_str().is_some());
        let (name, error) = &events[1];
        assert_eq!(name.as_deref(), Some("error"));
        assert_eq!(error["type"], "error");
        assert_eq!(error["code"], "PROVIDER_UNAVAILABLE");
        assert_eq!(error["sequence_number"], 8);
        assert_eq!(error["error"]["code"], "PROVIDER_UNAVAILABLE");
        assert_eq!(error["error"]["request_id"], "req-1");
        assert_eq!(error["request_id"], "req-1");
    }
}
