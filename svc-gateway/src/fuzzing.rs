//! The properties the fuzz targets check, one function per target, each taking raw bytes and
//! panicking when a property fails. The cargo-fuzz targets (`fuzz/`) and their property-test
//! twins (`tests/it/fuzz_twins.rs`) both call these, so the two can never check different things.
//! Not an API.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream;
use http::{HeaderMap, HeaderValue, Method, header};
use http_body_util::BodyExt;
use serde_json::Value;
use svc_core::pat::is_shaped;
use svc_tower::auth::bearer_token;
use svc_tower::error::{ApiError, ErrorCode, FieldError, FieldErrorCode};
use svc_tower::idempotency::Fingerprint;

use crate::provider::live::messages;
use crate::provider::{EventStream, anthropic};
use crate::request::Endpoint;
use crate::sse::SseBody;
use crate::validate;

const ENDPOINTS: [Endpoint; 5] = Endpoint::ALL;

fn json_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers
}

/// A body validator never panics, refuses only with the validation codes, and what it accepts
/// goes upstream as a JSON object naming the model. The first byte picks the route.
pub fn validate_body(data: &[u8]) {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let endpoint = ENDPOINTS[usize::from(pick) % ENDPOINTS.len()];
    match validate::request(endpoint, &json_headers(), Bytes::copy_from_slice(body)) {
        Ok(api) => {
            assert!(!api.model.is_empty());
            let upstream: Value = serde_json::from_slice(&api.upstream_body()).expect("JSON");
            assert_eq!(upstream["model"], Value::from(api.model.as_str()));
        }
        Err(error) => {
            assert!(
                matches!(
                    error.code(),
                    ErrorCode::InvalidJson | ErrorCode::ValidationError
                ),
                "{:?}",
                error.code()
            );
            envelope_of(&error);
        }
    }
}

/// The fingerprint of a JSON object does not depend on key order or on how it was written.
pub fn fingerprint(data: &[u8]) {
    let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let reversed: serde_json::Map<String, Value> = object
        .iter()
        .rev()
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    let rewritten: Value =
        serde_json::from_str(&Value::Object(reversed).to_string()).expect("JSON");
    let route = "/v1/chat/completions";
    assert_eq!(
        Fingerprint::of_json(&Method::POST, route, &Value::Object(object)),
        Fingerprint::of_json(&Method::POST, route, &rewritten),
    );
}

/// Whatever text a rejection carries, its envelope is JSON that keeps the text as it was.
pub fn envelope(data: &[u8]) {
    let text = String::from_utf8_lossy(data).into_owned();
    let error = ApiError::new(ErrorCode::ValidationError)
        .with_message(text.clone())
        .with_detail(text.clone())
        .with_field_error(FieldError::new(
            text.clone(),
            FieldErrorCode::InvalidFormat,
            text.clone(),
        ));
    let json = envelope_of(&error);
    assert_eq!(json["error"]["message"], Value::from(text.as_str()));
    assert_eq!(
        json["error"]["field_errors"][0]["field"],
        Value::from(text.as_str())
    );
}

fn envelope_of(error: &ApiError) -> Value {
    let json: Value =
        serde_json::from_slice(&error.envelope("req", Some("https://docs"))).expect("JSON");
    assert_eq!(json["error"]["code"], Value::from(error.code().as_str()));
    json
}

/// A bearer header is accepted only for a PAT-shaped token, which is then a part of the value.
pub fn bearer(data: &[u8]) {
    let Ok(value) = HeaderValue::from_bytes(data) else {
        return;
    };
    let mut headers = HeaderMap::new();
    headers.insert(header::AUTHORIZATION, value);
    if let Ok(token) = bearer_token(&headers) {
        assert!(is_shaped(token));
        assert!(data.windows(token.len()).any(|w| w == token.as_bytes()));
    }
}

/// The input cut into chunks where the first byte says (a byte's low bits are a chunk length).
fn chunked(data: &[u8]) -> Vec<Bytes> {
    let Some((&cuts, mut rest)) = data.split_first() else {
        return Vec::new();
    };
    let mut chunks = Vec::new();
    let step = usize::from(cuts % 61) + 1;
    while !rest.is_empty() {
        let (chunk, tail) = rest.split_at(step.min(rest.len()));
        chunks.push(Bytes::copy_from_slice(chunk));
        rest = tail;
    }
    chunks
}

fn events(chunks: Vec<Bytes>) -> EventStream {
    Box::pin(stream::iter(chunks.into_iter().map(Ok)))
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(future)
}

/// However a stream is cut, passing it through unobserved changes nothing, and observing its
/// usage only ever drops whole events.
pub fn sse(data: &[u8]) {
    let chunks = chunked(data);
    let sent: Vec<u8> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
    let docs: Option<Arc<str>> = None;
    let plain = SseBody::new(events(chunks.clone()), "req".into(), docs.clone());
    let out = block_on(plain.collect()).expect("body").to_bytes();
    assert_eq!(out, sent);

    let observed = SseBody::new(events(chunks), "req".into(), docs).strip_usage_chunk(true);
    let out = block_on(observed.collect()).expect("body").to_bytes();
    assert!(out.len() <= sent.len());
}

/// A valid chat or Responses request always translates to a Messages body or a clear refusal,
/// and a valid Messages request to a chat body; any answer and any event stream translate back
/// without a panic.
pub fn anthropic(data: &[u8]) {
    if let Ok(api) = validate::request(
        Endpoint::ChatCompletions,
        &json_headers(),
        Bytes::copy_from_slice(data),
    ) && let Ok(translated) = anthropic::request_body(&api)
    {
        let body = translated.body;
        assert!(body["messages"].is_array(), "{body}");
        assert!(body["max_tokens"].as_u64().is_some(), "{body}");
    }
    if let Ok(message) = serde_json::from_slice::<Value>(data) {
        let completion = anthropic::completion(&message, 0, Some("out"));
        assert!(completion["choices"].is_array());
    }
    if let Ok(api) = validate::request(
        Endpoint::Responses,
        &json_headers(),
        Bytes::copy_from_slice(data),
    ) {
        if let Ok(translated) = anthropic::responses_request_body(&api) {
            assert!(translated.body["messages"].is_array());
        }
        let echo = anthropic::ResponsesEcho::of(&api, 0, Some("out".into()));
        if let Ok(message) = serde_json::from_slice::<Value>(data) {
            assert_eq!(
                anthropic::responses_answer(&message, &echo)["object"],
                "response"
            );
        }
        let translated = anthropic::responses_events(events(chunked(data)), echo);
        let _ = block_on(SseBody::new(translated, "req".into(), None).collect());
    }
    if let Ok(api) = validate::request(
        Endpoint::Messages,
        &json_headers(),
        Bytes::copy_from_slice(data),
    ) && let Ok(chat) = messages::request::body(&api)
    {
        assert!(chat["messages"].is_array(), "{chat}");
    }
    if let Ok(chat) = serde_json::from_slice::<Value>(data) {
        assert_eq!(messages::answer::message(&chat)["type"], "message");
    }
    let translated = messages::stream::events(events(chunked(data)));
    let _ = block_on(SseBody::new(translated, "req".into(), None).collect());
    let translated = anthropic::chunks(events(chunked(data)), 0, None);
    let body = SseBody::new(translated, "req".into(), None);
    let _ = block_on(body.collect());
}
