use super::*;
use crate::request::Endpoint;
use http::HeaderValue;
use serde_json::json;

fn json_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h
}

fn validate(body: Value) -> Result<ApiRequest, Rejection> {
    chat_request(&json_headers(), Bytes::from(body.to_string()))
}

fn ok_body() -> Value {
    json!({"model": "svc-mock-1", "messages": [{"role": "user", "content": "hi"}]})
}

/// The (field, code) pairs of a validation failure.
fn field_errors(result: Result<ApiRequest, Rejection>) -> Vec<(String, &'static str)> {
    let err = result.expect_err("should fail validation");
    assert_eq!(err.code(), &ErrorCode::ValidationError);
    err.field_errors()
        .iter()
        .map(|f| (f.field.clone(), f.code.as_str()))
        .collect()
}

fn one(field: &str, code: &'static str) -> Vec<(String, &'static str)> {
    vec![(field.to_owned(), code)]
}

#[test]
fn accepts_a_minimal_request() {
    let req = validate(ok_body()).unwrap();
    assert_eq!(req.model, "svc-mock-1");
    assert_eq!(req.endpoint, Endpoint::ChatCompletions);
    assert_eq!(req.message_count, 1);
    assert_eq!(req.texts(), ["hi"]);
    assert!(!req.stream);
    assert_eq!(req.temperature, None);
    assert_eq!(req.max_tokens, None);
}

#[test]
fn content_type_must_be_json() {
    for ok in [
        "application/json",
        "Application/JSON",
        "application/json; charset=utf-8",
        "application/json;charset=UTF-8",
    ] {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(ok));
        assert!(check_content_type(&h).is_ok(), "{ok}");
    }
    for bad in [
        "text/plain",
        "application/jsonx",
        "application/x-www-form-urlencoded",
        "multipart/form-data",
    ] {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(bad));
        let err = chat_request(&h, Bytes::from(ok_body().to_string())).unwrap_err();
        assert_eq!(err.code(), &ErrorCode::UnsupportedMediaType, "{bad}");
        assert_eq!(err.status(), 415);
    }
    let err = chat_request(&HeaderMap::new(), Bytes::from(ok_body().to_string())).unwrap_err();
    assert_eq!(err.code(), &ErrorCode::UnsupportedMediaType);
}

#[test]
fn malformed_json_and_non_objects_are_invalid_json() {
    for body in [
        "{",
        "",
        "not json",
        "[1,2]",
        "\"text\"",
        "42",
        "null",
        "{\"model\": }",
    ] {
        let err = chat_request(&json_headers(), Bytes::from(body)).unwrap_err();
        assert_eq!(err.code(), &ErrorCode::InvalidJson, "{body:?}");
        assert!(err.field_errors().is_empty());
    }
}

#[test]
fn model_rules() {
    let mut body = ok_body();
    body.as_object_mut().unwrap().remove("model");
    assert_eq!(field_errors(validate(body)), one("model", "REQUIRED"));
    assert_eq!(
        field_errors(validate(
            json!({"model": null, "messages": [{"role": "user", "content": "x"}]})
        )),
        one("model", "REQUIRED")
    );
    let mut body = ok_body();
    body["model"] = json!("m".repeat(257));
    assert_eq!(field_errors(validate(body)), one("model", "TOO_LONG"));
    let mut body = ok_body();
    body["model"] = json!("é".repeat(256));
    assert!(
        validate(body).is_ok(),
        "256 characters is the limit, not 256 bytes"
    );
    let mut body = ok_body();
    body["model"] = json!(42);
    assert_eq!(field_errors(validate(body)), one("model", "INVALID_FORMAT"));
}

#[test]
fn messages_rules() {
    assert_eq!(
        field_errors(validate(json!({"model": "m"}))),
        one("messages", "REQUIRED")
    );
    assert_eq!(
        field_errors(validate(json!({"model": "m", "messages": "hi"}))),
        one("messages", "INVALID_FORMAT")
    );
    assert_eq!(
        field_errors(validate(json!({"model": "m", "messages": {}}))),
        one("messages", "INVALID_FORMAT")
    );
    let many: Vec<Value> = (0..1001)
        .map(|_| json!({"role": "user", "content": "x"}))
        .collect();
    assert_eq!(
        field_errors(validate(json!({"model": "m", "messages": many}))),
        one("messages", "TOO_MANY")
    );
    let limit: Vec<Value> = (0..1000)
        .map(|_| json!({"role": "user", "content": "x"}))
        .collect();
    assert_eq!(
        validate(json!({"model": "m", "messages": limit}))
            .unwrap()
            .message_count,
        1000
    );
}

#[test]
fn message_item_rules() {
    let body = json!({"model": "m", "messages": [
        {"role": "user", "content": "fine"},
        {"content": "no role"},
        {"role": "user"},
        {"role": 7, "content": ["parts"]},
        "not an object",
        {"role": "robot", "content": "x"},
        {"role": "user", "content": 5},
    ]});
    assert_eq!(
        field_errors(validate(body)),
        vec![
            ("messages[1].role".to_owned(), "REQUIRED"),
            ("messages[2].content".to_owned(), "REQUIRED"),
            ("messages[3].role".to_owned(), "INVALID_FORMAT"),
            ("messages[4]".to_owned(), "INVALID_FORMAT"),
            ("messages[5].role".to_owned(), "INVALID_ENUM"),
            ("messages[6].content".to_owned(), "INVALID_FORMAT"),
        ]
    );
}

#[test]
fn content_is_limited_to_100_kib() {
    let at_limit = "a".repeat(102_400);
    let body = json!({"model": "m", "messages": [{"role": "user", "content": at_limit}]});
    assert!(validate(body).is_ok());
    let over = "a".repeat(102_401);
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "ok"}, {"role": "user", "content": over}]});
    assert_eq!(
        field_errors(validate(body)),
        one("messages[1].content", "TOO_LONG")
    );
}

#[test]
fn optional_fields_are_typed() {
    let mut body = ok_body();
    body["stream"] = json!("yes");
    body["temperature"] = json!("hot");
    body["max_tokens"] = json!(1.5);
    assert_eq!(
        field_errors(validate(body)),
        vec![
            ("stream".to_owned(), "INVALID_FORMAT"),
            ("temperature".to_owned(), "INVALID_FORMAT"),
            ("max_tokens".to_owned(), "INVALID_FORMAT"),
        ]
    );
    let mut body = ok_body();
    body["stream"] = json!(true);
    body["temperature"] = json!(1);
    body["max_tokens"] = json!(64);
    let req = validate(body).unwrap();
    assert!(req.stream);
    assert_eq!(req.temperature, Some(1.0));
    assert_eq!(req.max_tokens, Some(64));
    let mut body = ok_body();
    body["stream"] = Value::Null;
    body["temperature"] = Value::Null;
    assert!(
        validate(body).is_ok(),
        "null optional fields count as absent"
    );
}

#[test]
fn every_bad_field_is_named() {
    let body =
        json!({"model": 1, "messages": 2, "stream": 3, "temperature": true, "max_tokens": "4"});
    let fields: Vec<String> = field_errors(validate(body))
        .into_iter()
        .map(|(f, _)| f)
        .collect();
    assert_eq!(
        fields,
        ["model", "messages", "stream", "temperature", "max_tokens"]
    );
}

#[test]
fn unknown_keys_are_ignored_and_kept() {
    let mut body = ok_body();
    body["top_p"] = json!(0.5);
    body["user"] = json!("u-1");
    let req = validate(body).unwrap();
    let forwarded: Value = serde_json::from_slice(&req.upstream_body()).unwrap();
    assert_eq!(forwarded["top_p"], 0.5);
    assert_eq!(forwarded["user"], "u-1");
}

#[test]
fn idempotency_key_rules() {
    let with_key = |key: &str, body: Value| {
        let mut h = json_headers();
        h.insert(&IDEMPOTENCY_KEY, HeaderValue::from_str(key).unwrap());
        chat_request(&h, Bytes::from(body.to_string()))
    };
    assert!(with_key(&"k".repeat(256), ok_body()).is_ok());
    assert_eq!(
        field_errors(with_key(&"k".repeat(257), ok_body())),
        one("Idempotency-Key", "TOO_LONG")
    );
    let mut streaming = ok_body();
    streaming["stream"] = json!(true);
    assert_eq!(
        field_errors(with_key("key-1", streaming)),
        one("stream", "INVALID_ENUM")
    );
}

#[test]
fn messages_never_echo_values() {
    let secret = "my secret content";
    let body = json!({"model": secret, "messages": [{"role": secret, "content": 5}]});
    let err = validate(body).unwrap_err();
    let rendered = String::from_utf8(err.envelope("r", None).to_vec()).unwrap();
    assert!(!rendered.contains(secret));
}

#[test]
fn field_errors_are_bounded() {
    let many: Vec<Value> = (0..1000)
        .map(|_| json!({"role": 1, "content": 2}))
        .collect();
    let errors = field_errors(validate(json!({"model": "m", "messages": many})));
    assert_eq!(errors.len(), MAX_FIELD_ERRORS);
}

mod openai_shapes;
