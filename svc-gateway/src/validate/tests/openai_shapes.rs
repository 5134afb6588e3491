//! What agents and the official SDKs send: tool calls, content parts, every role; and the
//! other routes' bodies.

use bytes::Bytes;
use serde_json::{Value, json};

use super::{field_errors, json_headers, one, validate};
use crate::request::Endpoint;
use crate::validate::{Rejection, request};
use svc_tower::error::ErrorCode;

fn at(endpoint: Endpoint, body: Value) -> Result<crate::request::ApiRequest, Rejection> {
    request(endpoint, &json_headers(), Bytes::from(body.to_string()))
}

fn chat(messages: Value) -> Value {
    json!({"model": "m", "messages": messages})
}

#[test]
fn accepts_a_tool_calling_conversation() {
    let body = json!({
        "model": "m",
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
        "tool_choice": "auto",
        "parallel_tool_calls": false,
        "messages": [
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": "weather in Paris?"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            {"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}},
            {"role": "function", "name": "f", "content": null},
        ],
    });
    let req = validate(body).unwrap();
    assert_eq!(req.message_count, 6);
    let mut choice = json!({"model": "m", "messages": [{"role": "user", "content": "x"}]});
    choice["tool_choice"] = json!({"type": "function", "function": {"name": "get_weather"}});
    assert!(validate(choice).is_ok());
}

#[test]
fn accepts_content_parts() {
    let body = chat(json!([
        {"role": "system", "content": [{"type": "text", "text": "sys"}]},
        {"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}},
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
            {"type": "file", "file": {"file_id": "file-1"}},
        ]},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
    ]));
    let req = validate(body).unwrap();
    assert_eq!(req.texts(), ["sys", "what is this?"]);
}

#[test]
fn names_the_exact_path_of_a_bad_part() {
    let body = chat(json!([
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"},
        {"role": "user", "content": "c"},
        {"role": "user", "content": [
            {"type": "text", "text": "ok"},
            {"type": "image_url", "image_url": {"url": 7}},
            {"type": "video", "video": {}},
            {"type": "text"},
        ]},
    ]));
    assert_eq!(
        field_errors(validate(body)),
        vec![
            (
                "messages[3].content[1].image_url.url".to_owned(),
                "INVALID_FORMAT"
            ),
            ("messages[3].content[2].type".to_owned(), "INVALID_ENUM"),
            ("messages[3].content[3].text".to_owned(), "REQUIRED"),
        ]
    );
}

#[test]
fn each_role_has_its_own_rules() {
    // A tool result without the call it answers.
    assert_eq!(
        field_errors(validate(chat(json!([{"role": "tool", "content": "x"}])))),
        one("messages[0].tool_call_id", "REQUIRED")
    );
    // A user message must say something.
    assert_eq!(
        field_errors(validate(chat(json!([{"role": "user", "content": null}])))),
        one("messages[0].content", "REQUIRED")
    );
    // An assistant message with neither content nor a call.
    assert_eq!(
        field_errors(validate(chat(
            json!([{"role": "assistant", "content": null}])
        ))),
        one("messages[0].content", "REQUIRED")
    );
    // Parts a role may not use.
    assert_eq!(
        field_errors(validate(chat(json!([{"role": "system", "content": [
            {"type": "image_url", "image_url": {"url": "u"}}
        ]}])))),
        one("messages[0].content[0].type", "INVALID_ENUM")
    );
    // A function result names its function.
    assert_eq!(
        field_errors(validate(chat(
            json!([{"role": "function", "content": "x"}])
        ))),
        one("messages[0].name", "REQUIRED")
    );
    // Malformed tool calls.
    assert_eq!(
        field_errors(validate(chat(json!([{"role": "assistant", "tool_calls": [
            {"type": "function", "function": {"name": "f", "arguments": {}}}
        ]}])))),
        vec![
            ("messages[0].tool_calls[0].id".to_owned(), "REQUIRED"),
            (
                "messages[0].tool_calls[0].function.arguments".to_owned(),
                "INVALID_FORMAT"
            ),
        ]
    );
}

#[test]
fn text_split_across_parts_counts_whole() {
    let half = "a".repeat(51_201);
    let body = chat(json!([{"role": "user", "content": [
        {"type": "text", "text": half},
        {"type": "image_url", "image_url": {"url": "x".repeat(200_000)}},
        {"type": "text", "text": half},
    ]}]));
    assert_eq!(
        field_errors(validate(body)),
        one("messages[0].content", "TOO_LONG")
    );
    let fits = "a".repeat(51_200);
    let body = chat(json!([{"role": "user", "content": [
        {"type": "text", "text": fits}, {"type": "text", "text": fits},
    ]}]));
    assert!(validate(body).is_ok());
}

#[test]
fn the_fields_the_gateway_reads_are_typed() {
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
        "stream_options": {"include_usage": "yes"}, "tools": {"a": 1}, "tool_choice": "sometimes",
        "n": 0, "max_completion_tokens": -1});
    assert_eq!(
        field_errors(validate(body)),
        vec![
            ("stream_options.include_usage".to_owned(), "INVALID_FORMAT"),
            ("tools".to_owned(), "INVALID_FORMAT"),
            ("tool_choice".to_owned(), "INVALID_ENUM"),
            ("n".to_owned(), "INVALID_FORMAT"),
            ("max_completion_tokens".to_owned(), "INVALID_FORMAT"),
        ]
    );
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
        "tools": [{"type": "function", "function": {}}, 3]});
    assert_eq!(
        field_errors(validate(body)),
        vec![
            ("tools[0].function.name".to_owned(), "REQUIRED"),
            ("tools[1]".to_owned(), "INVALID_FORMAT"),
        ]
    );
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
        "stream": true, "stream_options": {"include_usage": true}, "max_completion_tokens": 9, "max_tokens": 5});
    let req = validate(body).unwrap();
    assert!(req.include_usage);
    assert_eq!(req.max_tokens, Some(9));
}

#[test]
fn a_duplicate_key_is_invalid_json() {
    for body in [
        r#"{"model": "a", "model": "b", "messages": [{"role": "user", "content": "x"}]}"#,
        r#"{"model": "a", "messages": [{"role": "user", "content": "x", "content": "y"}]}"#,
    ] {
        let err = request(
            Endpoint::ChatCompletions,
            &json_headers(),
            Bytes::from(body),
        )
        .unwrap_err();
        assert_eq!(err.code(), &ErrorCode::InvalidJson, "{body}");
    }
}

#[test]
fn embeddings_inputs() {
    for input in [
        json!("one"),
        json!(["a", "b"]),
        json!([1, 2, 3]),
        json!([[1, 2], [3]]),
    ] {
        let req = at(Endpoint::Embeddings, json!({"model": "e", "input": input})).unwrap();
        assert!(req.message_count >= 1);
        assert!(!req.stream);
    }
    let errors = |body: Value| field_errors(at(Endpoint::Embeddings, body));
    assert_eq!(errors(json!({"model": "e"})), one("input", "REQUIRED"));
    assert_eq!(
        errors(json!({"model": "e", "input": []})),
        one("input", "REQUIRED")
    );
    assert_eq!(
        errors(json!({"model": "e", "input": ["a", {"b": 1}]})),
        one("input[1]", "INVALID_FORMAT")
    );
    assert_eq!(
        errors(json!({"model": "e", "input": "a", "encoding_format": "hex", "dimensions": 0})),
        vec![
            ("encoding_format".to_owned(), "INVALID_ENUM"),
            ("dimensions".to_owned(), "INVALID_FORMAT"),
        ]
    );
    let many: Vec<&str> = vec!["x"; 2049];
    assert_eq!(
        errors(json!({"model": "e", "input": many})),
        one("input", "TOO_MANY")
    );
}

#[test]
fn responses_inputs() {
    let ok = json!({"model": "r", "instructions": "be brief", "stream": true, "max_output_tokens": 50,
    "tools": [{"type": "function", "name": "f", "parameters": {}}],
    "input": [
        {"role": "user", "content": "hi"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}, {"type": "input_image", "image_url": "u"}]},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "done"},
        {"type": "reasoning", "id": "r1", "summary": []},
    ]});
    let req = at(Endpoint::Responses, ok).unwrap();
    assert!(req.stream);
    assert_eq!(req.message_count, 5);
    assert_eq!(req.max_tokens, Some(50));
    assert_eq!(req.texts()[0], "be brief");
    assert!(at(Endpoint::Responses, json!({"model": "r", "input": "hi"})).is_ok());

    let errors = |body: Value| field_errors(at(Endpoint::Responses, body));
    assert_eq!(
        errors(json!({"model": "r", "input": [
            {"role": "robot", "content": "x"},
            {"type": "function_call_output", "output": 3},
            {"content": "no type, no role"},
            {"role": "user", "content": [{"type": "input_video"}]},
        ]})),
        vec![
            ("input[0].role".to_owned(), "INVALID_ENUM"),
            ("input[1].call_id".to_owned(), "REQUIRED"),
            ("input[1].output".to_owned(), "INVALID_FORMAT"),
            ("input[2].type".to_owned(), "REQUIRED"),
            ("input[3].content[0].type".to_owned(), "INVALID_ENUM"),
        ]
    );
    assert_eq!(
        errors(json!({"model": "r", "input": "a".repeat(102_401)})),
        one("input", "TOO_LONG")
    );
}
