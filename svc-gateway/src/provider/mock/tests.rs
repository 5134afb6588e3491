use base64::Engine;
use futures_util::StreamExt;
use http::{HeaderMap, HeaderValue, header};
use serde_json::json;

use super::*;
use crate::validate;

fn request(endpoint: Endpoint, body: Value) -> ApiRequest {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    validate::request(endpoint, &headers, Bytes::from(body.to_string())).expect("a valid request")
}

fn chat(stream: bool) -> ApiRequest {
    request(
        Endpoint::ChatCompletions,
        json!({"model": "svc-mock-1", "stream": stream,
               "messages": [{"role": "user", "content": "hello there"}]}),
    )
}

async fn answer(request: &ApiRequest) -> ProviderReply {
    MockProvider
        .complete(request, &CallInfo::default())
        .await
        .expect("the mock answers")
}

async fn json_of(request: &ApiRequest) -> Value {
    let ProviderReply::Json { status, body } = answer(request).await else {
        panic!("expected JSON")
    };
    assert_eq!(status, StatusCode::OK);
    serde_json::from_slice(&body).unwrap()
}

/// The `data:` payloads of a streamed answer, `[DONE]` left out.
async fn events_of(request: &ApiRequest) -> Vec<(Option<String>, Value)> {
    let ProviderReply::Stream { events, .. } = answer(request).await else {
        panic!("expected a stream")
    };
    let frames: Vec<Bytes> = events.map(|e| e.unwrap()).collect().await;
    let mut out = Vec::new();
    for frame in frames {
        let text = std::str::from_utf8(&frame).unwrap();
        assert!(text.ends_with("\n\n"), "{text}");
        let mut kind = None;
        let mut data = None;
        for line in text.lines() {
            if let Some(k) = line.strip_prefix("event: ") {
                kind = Some(k.to_owned());
            }
            if let Some(d) = line.strip_prefix("data: ") {
                data = Some(d.to_owned());
            }
        }
        let data = data.expect("a data line");
        if data != "[DONE]" {
            out.push((kind, serde_json::from_str(&data).unwrap()));
        }
    }
    out
}

#[tokio::test]
async fn answers_an_openai_shaped_completion() {
    let json = json_of(&chat(false)).await;
    assert!(json["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(json["object"], "chat.completion");
    assert!(json["created"].as_i64().unwrap() > 0);
    assert_eq!(json["model"], "svc-mock-1");
    assert_eq!(json["choices"][0]["message"]["role"], "assistant");
    assert_eq!(json["choices"][0]["message"]["content"], MOCK_REPLY);
    assert_eq!(json["choices"][0]["finish_reason"], "stop");
    let usage = &json["usage"];
    assert_eq!(usage["prompt_tokens"], 3);
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap()
    );
}

#[tokio::test]
async fn streams_chunks_then_usage_then_done() {
    let chunks = events_of(&chat(true)).await;
    let (usage, rest) = chunks.split_last().unwrap();
    assert_eq!(usage.1["choices"], json!([]));
    assert_eq!(usage.1["usage"]["prompt_tokens"], 3);
    let text: String = rest
        .iter()
        .filter_map(|(_, c)| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, MOCK_REPLY);
    assert_eq!(
        rest.last().unwrap().1["choices"][0]["finish_reason"],
        "stop"
    );
    assert!(
        rest.iter()
            .all(|(_, c)| c.get("usage") == Some(&Value::Null))
    );
}

#[tokio::test]
async fn calls_the_offered_tool_after_a_user_turn_and_answers_its_result() {
    let tools = json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]);
    let first = request(
        Endpoint::ChatCompletions,
        json!({"model": "m", "tools": tools, "messages": [{"role": "user", "content": "weather?"}]}),
    );
    let json = json_of(&first).await;
    let choice = &json["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert!(choice["message"]["content"].is_null());
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "get_weather");
    assert_eq!(call["function"]["arguments"], "{}");

    let second = request(
        Endpoint::ChatCompletions,
        json!({"model": "m", "tools": tools, "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": null, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": "sunny"},
        ]}),
    );
    let json = json_of(&second).await;
    assert_eq!(json["choices"][0]["message"]["content"], MOCK_REPLY);

    let none = request(
        Endpoint::ChatCompletions,
        json!({"model": "m", "tools": tools, "tool_choice": "none",
               "messages": [{"role": "user", "content": "weather?"}]}),
    );
    assert_eq!(json_of(&none).await["choices"][0]["finish_reason"], "stop");
}

#[tokio::test]
async fn streams_a_tool_call() {
    let req = request(
        Endpoint::ChatCompletions,
        json!({"model": "m", "stream": true,
               "tools": [{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "b"}}],
               "tool_choice": {"type": "function", "function": {"name": "b"}},
               "messages": [{"role": "user", "content": "go"}]}),
    );
    let chunks = events_of(&req).await;
    assert_eq!(
        chunks[0].1["choices"][0]["delta"]["tool_calls"][0]["function"]["name"],
        "b"
    );
    assert!(
        chunks
            .iter()
            .any(|(_, c)| c["choices"][0]["finish_reason"] == "tool_calls")
    );
}

#[tokio::test]
async fn embeds_deterministically_as_floats_or_base64() {
    let floats = json_of(&request(
        Endpoint::Embeddings,
        json!({"model": "e", "input": ["a", "b"], "encoding_format": "float", "dimensions": 4}),
    ))
    .await;
    assert_eq!(floats["object"], "list");
    assert_eq!(floats["data"].as_array().unwrap().len(), 2);
    let first: Vec<f64> = serde_json::from_value(floats["data"][0]["embedding"].clone()).unwrap();
    assert_eq!(first.len(), 4);
    let norm: f64 = first.iter().map(|x| x * x).sum();
    assert!((norm - 1.0).abs() < 1e-4, "{norm}");
    assert!(floats["usage"]["prompt_tokens"].as_u64().unwrap() > 0);

    let b64 = json_of(&request(
        Endpoint::Embeddings,
        json!({"model": "e", "input": ["a", "b"], "encoding_format": "base64", "dimensions": 4}),
    ))
    .await;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64["data"][0]["embedding"].as_str().unwrap())
        .unwrap();
    let decoded: Vec<f64> = bytes
        .chunks(4)
        .map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
        .collect();
    assert_eq!(decoded, first);
}

#[tokio::test]
async fn answers_a_response_and_streams_its_events() {
    let json = json_of(&request(
        Endpoint::Responses,
        json!({"model": "r", "input": "hi", "instructions": "be brief"}),
    ))
    .await;
    assert_eq!(json["object"], "response");
    assert_eq!(json["status"], "completed");
    assert_eq!(json["output"][0]["content"][0]["text"], MOCK_REPLY);
    assert_eq!(json["instructions"], "be brief");
    assert!(json["usage"]["input_tokens"].as_u64().unwrap() > 0);

    let events = events_of(&request(
        Endpoint::Responses,
        json!({"model": "r", "input": "hi", "stream": true}),
    ))
    .await;
    for (i, (kind, data)) in events.iter().enumerate() {
        assert_eq!(kind.as_deref(), data["type"].as_str(), "event line = type");
        assert_eq!(data["sequence_number"], i);
    }
    assert_eq!(events[0].0.as_deref(), Some("response.created"));
    let text: String = events
        .iter()
        .filter(|(k, _)| k.as_deref() == Some("response.output_text.delta"))
        .filter_map(|(_, d)| d["delta"].as_str())
        .collect();
    assert_eq!(text, MOCK_REPLY);
    let last = &events.last().unwrap().1;
    assert_eq!(last["type"], "response.completed");
    assert!(last["response"]["usage"]["output_tokens"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn a_response_calls_an_offered_tool() {
    let json = json_of(&request(
        Endpoint::Responses,
        json!({"model": "r", "input": [{"role": "user", "content": "weather?"}],
               "tools": [{"type": "function", "name": "get_weather", "parameters": {}}]}),
    ))
    .await;
    assert_eq!(json["output"][0]["type"], "function_call");
    assert_eq!(json["output"][0]["name"], "get_weather");
}

/// A tool's schema and a structured output's, as pydantic writes them.
fn weather_schema() -> Value {
    json!({
        "$defs": {"Unit": {"enum": ["celsius", "fahrenheit"], "type": "string"}},
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 2},
            "unit": {"$ref": "#/$defs/Unit"},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
            "when": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}]},
        },
        "required": ["city", "unit", "days", "when"],
        "additionalProperties": false,
    })
}

fn weather_instance() -> Value {
    json!({"city": "mock", "unit": "celsius", "days": 1, "when": "2024-01-01T00:00:00Z"})
}

/// The text of a streamed answer, whatever the route.
fn streamed_text(events: &[(Option<String>, Value)]) -> String {
    events
        .iter()
        .filter_map(|(_, e)| {
            e.pointer("/choices/0/delta/content")
                .or_else(|| e.pointer("/delta/text"))
                .or_else(|| (e["type"] == "response.output_text.delta").then(|| &e["delta"]))
                .and_then(Value::as_str)
        })
        .collect()
}

/// The tool arguments of a streamed answer, whatever the route.
fn streamed_arguments(events: &[(Option<String>, Value)]) -> Value {
    let text: String = events
        .iter()
        .filter_map(|(_, e)| {
            e.pointer("/choices/0/delta/tool_calls/0/function/arguments")
                .or_else(|| e.pointer("/delta/partial_json"))
                .or_else(|| {
                    (e["type"] == "response.function_call_arguments.delta").then(|| &e["delta"])
                })
                .and_then(Value::as_str)
        })
        .collect();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"))
}

#[tokio::test]
async fn tool_arguments_fit_the_tools_schema_on_every_route() {
    let user = json!([{"role": "user", "content": "weather?"}]);
    let bodies = [
        (
            Endpoint::ChatCompletions,
            json!({"model": "m", "messages": user, "tools": [
                {"type": "function", "function": {"name": "get_weather", "parameters": weather_schema()}}]}),
        ),
        (
            Endpoint::Responses,
            json!({"model": "m", "input": user, "tools": [
                {"type": "function", "name": "get_weather", "parameters": weather_schema()}]}),
        ),
        (
            Endpoint::Messages,
            json!({"model": "m", "max_tokens": 64, "messages": user, "tools": [
                {"type": "web_search_20250305", "name": "web_search"},
                {"name": "get_weather", "input_schema": weather_schema()}]}),
        ),
    ];
    for (endpoint, body) in bodies {
        let json = json_of(&request(endpoint, body.clone())).await;
        let arguments = match endpoint {
            Endpoint::ChatCompletions => {
                let call = &json["choices"][0]["message"]["tool_calls"][0]["function"];
                assert_eq!(call["name"], "get_weather");
                serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap()
            }
            Endpoint::Responses => {
                assert_eq!(json["output"][0]["name"], "get_weather");
                serde_json::from_str(json["output"][0]["arguments"].as_str().unwrap()).unwrap()
            }
            _ => {
                assert_eq!(
                    json["content"][0]["name"], "get_weather",
                    "not the server tool"
                );
                json["content"][0]["input"].clone()
            }
        };
        assert_eq!(arguments, weather_instance(), "{endpoint:?}");

        let mut streamed = body;
        streamed["stream"] = json!(true);
        let events = events_of(&request(endpoint, streamed)).await;
        assert_eq!(
            streamed_arguments(&events),
            weather_instance(),
            "{endpoint:?}"
        );
    }
}

#[tokio::test]
async fn structured_output_is_an_instance_of_its_schema_on_every_route() {
    let user = json!([{"role": "user", "content": "weather?"}]);
    let format = json!({"type": "json_schema", "schema": weather_schema()});
    let bodies = [
        json!({"model": "m", "messages": user, "response_format": {"type": "json_schema",
            "json_schema": {"name": "Weather", "strict": true, "schema": weather_schema()}}}),
        json!({"model": "m", "input": user, "text": {"format": {"type": "json_schema",
            "name": "Weather", "strict": true, "schema": weather_schema()}}}),
        json!({"model": "m", "max_tokens": 64, "messages": user, "output_format": format}),
        json!({"model": "m", "max_tokens": 64, "messages": user, "output_config": {"format": format}}),
    ];
    let endpoints = [
        Endpoint::ChatCompletions,
        Endpoint::Responses,
        Endpoint::Messages,
        Endpoint::Messages,
    ];
    for (endpoint, body) in endpoints.into_iter().zip(bodies) {
        let json = json_of(&request(endpoint, body.clone())).await;
        let text = json
            .pointer("/choices/0/message/content")
            .or_else(|| json.pointer("/output/0/content/0/text"))
            .or_else(|| json.pointer("/content/0/text"))
            .and_then(Value::as_str)
            .unwrap();
        let parsed: Value = serde_json::from_str(text).unwrap();
        assert_eq!(parsed, weather_instance(), "{endpoint:?}");

        let mut streamed = body;
        streamed["stream"] = json!(true);
        let events = events_of(&request(endpoint, streamed)).await;
        let text = streamed_text(&events);
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap(),
            weather_instance(),
            "{endpoint:?}"
        );
    }

    // A JSON object, schema or none.
    let json = json_of(&request(
        Endpoint::ChatCompletions,
        json!({"model": "m", "messages": user, "response_format": {"type": "json_object"}}),
    ))
    .await;
    let text = json["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        json!({"reply": MOCK_REPLY})
    );
    // Asked for text, the mock says its line.
    let json = json_of(&request(
        Endpoint::Responses,
        json!({"model": "m", "input": "hi", "text": {"format": {"type": "text"}}}),
    ))
    .await;
    assert_eq!(json["output"][0]["content"][0]["text"], MOCK_REPLY);
}

#[tokio::test]
async fn a_tool_loop_with_structured_output_calls_then_answers_in_the_schema() {
    let tools = json!([{"type": "function", "function": {"name": "get_weather",
        "parameters": weather_schema()}}]);
    let format = json!({"type": "json_schema", "json_schema": {"name": "Weather",
        "schema": {"type": "object", "properties": {"summary": {"type": "string"}},
                   "required": ["summary"]}}});
    let first = json_of(&request(
        Endpoint::ChatCompletions,
        json!({"model": "m", "tools": tools, "response_format": format,
               "messages": [{"role": "user", "content": "weather?"}]}),
    ))
    .await;
    let call = &first["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "get_weather");
    let second = json_of(&request(
        Endpoint::ChatCompletions,
        json!({"model": "m", "tools": tools, "response_format": format, "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": null, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": "sunny"},
        ]}),
    ))
    .await;
    assert_eq!(
        second["choices"][0]["message"]["content"],
        json!({"summary": "mock"}).to_string()
    );
    assert!(second["usage"]["completion_tokens"].as_u64() > Some(1));
}

#[tokio::test]
async fn a_system_turn_after_the_users_still_gets_a_tool_call() {
    let json = json_of(&request(
        Endpoint::Messages,
        json!({"model": "m", "max_tokens": 64,
               "tools": [{"name": "get_weather", "input_schema": weather_schema()}],
               "messages": [{"role": "user", "content": "weather?"},
                            {"role": "system", "content": "Agent types: general."}]}),
    ))
    .await;
    assert_eq!(json["stop_reason"], "tool_use");
    assert_eq!(json["content"][0]["input"], weather_instance());
}

#[tokio::test]
async fn a_forced_choice_calls_a_tool_after_a_result_too() {
    let answer_tool = json!({"name": "Weather", "input_schema": weather_schema()});
    let json = json_of(&request(
        Endpoint::Messages,
        json!({"model": "m", "max_tokens": 64, "tool_choice": {"type": "any"},
        "tools": [{"name": "lookup", "input_schema": {"type": "object"}}, answer_tool],
        "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}]},
        ]}),
    ))
    .await;
    assert_eq!(json["content"][0]["name"], "Weather", "the last tool");
    assert_eq!(json["content"][0]["input"], weather_instance());

    let tools = json!([{"type": "function", "function": {"name": "a"}},
                       {"type": "function", "function": {"name": "b"}}]);
    let after_result = json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "a", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]);
    for (choice, called) in [
        (json!("required"), Some("b")),
        (
            json!({"type": "function", "function": {"name": "a"}}),
            Some("a"),
        ),
        (json!("auto"), None),
    ] {
        let json = json_of(&request(
            Endpoint::ChatCompletions,
            json!({"model": "m", "tools": tools, "tool_choice": choice, "messages": after_result}),
        ))
        .await;
        let name = json
            .pointer("/choices/0/message/tool_calls/0/function/name")
            .and_then(Value::as_str);
        assert_eq!(name, called, "{choice}");
    }
}
