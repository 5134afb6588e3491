//! Properties of the request path's parsers over many generated inputs (a seeded generator,
//! so a failure replays): strict JSON agrees with serde_json but for duplicate keys, validation
//! never panics and refuses only with the spec's codes, a key-order shuffle never changes the
//! idempotency fingerprint, and error envelopes are always JSON.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, header};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};
use svc_gateway::request::Endpoint;
use svc_gateway::validate::{self, json as strict};
use svc_tower::error::ErrorCode;
use svc_tower::idempotency::Fingerprint;

const CASES: usize = 2000;

fn rng() -> StdRng {
    let seed = std::env::var("SVC_PROPERTY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    println!("seed {seed} (SVC_PROPERTY_SEED replays it)");
    StdRng::seed_from_u64(seed)
}

/// A random JSON value, biased toward the shapes chat bodies have.
fn value(rng: &mut StdRng, depth: u32) -> Value {
    let words = [
        "role",
        "content",
        "user",
        "assistant",
        "tool",
        "text",
        "type",
        "image_url",
        "url",
        "model",
        "messages",
        "tool_calls",
        "function",
        "name",
        "arguments",
        "",
        "é",
        "\u{0}",
    ];
    match rng.random_range(0..if depth > 3 { 5 } else { 8 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.random()),
        2 => json!(rng.random_range(-5i64..5000)),
        3 => json!(rng.random::<f64>() * 10.0),
        4 => json!(words[rng.random_range(0..words.len())]),
        5 | 6 => {
            let mut map = Map::new();
            for _ in 0..rng.random_range(0..5) {
                let key = words[rng.random_range(0..words.len())];
                map.insert(key.to_owned(), value(rng, depth + 1));
            }
            Value::Object(map)
        }
        _ => Value::Array(
            (0..rng.random_range(0..4))
                .map(|_| value(rng, depth + 1))
                .collect(),
        ),
    }
}

/// A chat-like body: usually a plausible request, sometimes any value at all.
fn body(rng: &mut StdRng) -> Value {
    if rng.random_bool(0.1) {
        return value(rng, 0);
    }
    let mut object = Map::new();
    object.insert(
        "model".into(),
        if rng.random_bool(0.9) {
            json!("m")
        } else {
            value(rng, 2)
        },
    );
    let messages: Vec<Value> = (0..rng.random_range(0..4))
        .map(|_| {
            let mut m = Map::new();
            let roles = [
                "system",
                "developer",
                "user",
                "assistant",
                "tool",
                "function",
                "robot",
            ];
            m.insert(
                "role".into(),
                json!(roles[rng.random_range(0..roles.len())]),
            );
            m.insert("content".into(), value(rng, 1));
            if rng.random_bool(0.3) {
                m.insert("tool_call_id".into(), value(rng, 3));
            }
            if rng.random_bool(0.2) {
                m.insert("tool_calls".into(), value(rng, 2));
            }
            Value::Object(m)
        })
        .collect();
    object.insert("messages".into(), Value::Array(messages));
    for field in [
        "stream",
        "tools",
        "tool_choice",
        "n",
        "max_tokens",
        "temperature",
        "input",
        "stream_options",
    ] {
        if rng.random_bool(0.15) {
            object.insert(field.into(), value(rng, 2));
        }
    }
    Value::Object(object)
}

fn json_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers
}

#[test]
fn validation_never_panics_and_refuses_with_the_spec_codes() {
    let mut rng = rng();
    let headers = json_headers();
    let mut accepted = 0;
    for _ in 0..CASES {
        let body = body(&mut rng);
        for endpoint in Endpoint::ALL {
            match validate::request(endpoint, &headers, Bytes::from(body.to_string())) {
                Ok(request) => {
                    accepted += 1;
                    // The body forwarded is the body validated.
                    let forwarded: Value =
                        serde_json::from_slice(&request.upstream_body()).unwrap();
                    if !request.asks_usage_for_client() {
                        assert_eq!(forwarded, body);
                    }
                }
                Err(error) => {
                    assert!(
                        matches!(
                            error.code(),
                            ErrorCode::InvalidJson | ErrorCode::ValidationError
                        ),
                        "{:?} for {body}",
                        error.code()
                    );
                    for field in error.field_errors() {
                        assert!(!field.field.is_empty());
                    }
                }
            }
        }
    }
    assert!(
        accepted > CASES / 20,
        "the generator reaches valid bodies: {accepted}"
    );
}

#[test]
fn strict_json_is_serde_json_without_duplicate_keys() {
    let mut rng = rng();
    for _ in 0..CASES {
        let value = value(&mut rng, 0);
        let text = value.to_string();
        assert_eq!(strict::parse(text.as_bytes()), Ok(value.clone()));
        // Any object written with one key twice is refused.
        if let Value::Object(map) = &value
            && let Some((key, first)) = map.iter().next()
        {
            let inner = text.trim_start_matches('{');
            let doubled = format!("{{{}:{first},{inner}", Value::String(key.clone()));
            assert_eq!(
                strict::parse(doubled.as_bytes()),
                Err(strict::JsonError::DuplicateKey),
                "{doubled}"
            );
        }
        // Garbage never panics.
        let mut bytes = text.into_bytes();
        if !bytes.is_empty() {
            let at = rng.random_range(0..bytes.len());
            bytes[at] = rng.random();
        }
        let _ = strict::parse(&bytes);
    }
}

/// The same object with its keys inserted in another order, at every depth.
fn shuffled(value: &Value, rng: &mut StdRng) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            for i in (1..entries.len()).rev() {
                entries.swap(i, rng.random_range(0..=i));
            }
            let mut out = Map::new();
            for (k, v) in entries {
                out.insert(k.clone(), shuffled(v, rng));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| shuffled(v, rng)).collect()),
        other => other.clone(),
    }
}

#[test]
fn fingerprints_ignore_key_order_and_whitespace_only() {
    let mut rng = rng();
    for _ in 0..CASES {
        let value = body(&mut rng);
        let pretty = serde_json::to_string_pretty(&shuffled(&value, &mut rng)).unwrap();
        let a = Fingerprint::compute(
            &Method::POST,
            "/v1/chat/completions",
            value.to_string().as_bytes(),
        );
        let b = Fingerprint::compute(&Method::POST, "/v1/chat/completions", pretty.as_bytes());
        assert_eq!(a, b);
        assert_eq!(
            a,
            Fingerprint::of_json(&Method::POST, "/v1/chat/completions", &value)
        );
        let other = Fingerprint::compute(&Method::POST, "/v1/embeddings", pretty.as_bytes());
        assert_ne!(a, other);
    }
}

#[test]
fn envelopes_are_always_json_and_never_echo_content() {
    let mut rng = rng();
    let headers = json_headers();
    for _ in 0..CASES / 4 {
        let mut body = body(&mut rng);
        // A marker where content goes: no refusal may quote it back.
        if let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) {
            for message in messages {
                if let Some(m) = message.as_object_mut() {
                    m.insert(
                        "content".into(),
                        json!([{"type": "text", "text": 42, "secret": "SECRET-MARKER"}]),
                    );
                }
            }
        }
        if let Err(error) = validate::request(
            Endpoint::ChatCompletions,
            &headers,
            Bytes::from(body.to_string()),
        ) {
            let envelope = error.envelope("req", Some("https://docs.invalid"));
            let parsed: Value = serde_json::from_slice(&envelope).expect("the envelope is JSON");
            assert!(parsed["error"]["code"].is_string());
            assert!(!String::from_utf8_lossy(&envelope).contains("SECRET-MARKER"));
        }
    }
}
