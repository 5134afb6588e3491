//! Translation through the gateway, both ways: `/v1/responses` to a Claude model (a fake
//! Messages API that checks each request with the gateway's own Messages validator), and
//! `/v1/messages` to an OpenAI-compatible model (a scripted chat upstream); structured output
//! to Claude as a forced tool; what cannot be translated refused with the field named and
//! never sent; and the usage of every translated answer counted.

use crate::anthropic::upstream;
use crate::registry;
use crate::support;

use std::time::{Duration, Instant};

use http::Request;
use serde_json::{Value, json};
use support::{Env, Reply, Script, Upstream, assert_envelope, json_body, send};
use svc_gateway::provider::mock::MOCK_REPLY;
use svc_testkit::TempDir;
use upstream::Anthropic;

/// Bounds every poll.
const WITHIN: Duration = Duration::from_secs(10);

/// A gateway whose registry sends `claude-*` to the fake Messages API and `gpt-*` to the
/// scripted OpenAI-compatible upstream.
async fn gateway(anthropic: &Anthropic, openai: &Upstream) -> (Env, TempDir) {
    let file = format!(
        r#"
[[providers]]
name = "anthropic"
kind = "anthropic"
base_url = "{}"
api_key_env = "FAKE_ANTHROPIC_KEY"

[[providers]]
name = "openai"
kind = "openai"
base_url = "{}"
api_key_env = "FAKE_OPENAI_KEY"

[[models]]
name = "claude-*"
targets = ["anthropic"]

[[models]]
name = "gpt-*"
targets = ["openai"]

[[models]]
name = "both"
targets = ["anthropic:claude-both", "openai:gpt-both"]
"#,
        anthropic.base_url(),
        openai.base_url()
    );
    registry::gateway(
        &file,
        &[
            ("FAKE_ANTHROPIC_KEY", "sk-ant-fake-0123456789"),
            ("FAKE_OPENAI_KEY", "sk-openai-fake-0123456789"),
        ],
    )
    .await
}

async fn both() -> (Anthropic, Upstream, Env, TempDir) {
    let anthropic = Anthropic::start().await;
    let openai = Upstream::start(Script::Json(200, json!({}), vec![])).await;
    let (env, dir) = gateway(&anthropic, &openai).await;
    (anthropic, openai, env, dir)
}

async fn post(env: &Env, path: &str, body: &Value) -> Reply {
    let request = Request::post(env.url(path))
        .header("authorization", format!("Bearer {}", env.world.chat_token))
        .header("x-svc-agent-id", env.world.agent_id.to_string())
        .header("content-type", "application/json")
        .body(json_body(body))
        .unwrap();
    send(&env.client, request).await
}

/// Each SSE event's name and data.
fn named_events(body: &[u8]) -> Vec<(String, Value)> {
    String::from_utf8_lossy(body)
        .split_terminator("\n\n")
        .map(|event| {
            let name = event
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .unwrap_or_default();
            let data = event
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .expect("data");
            (name.to_owned(), serde_json::from_str(data).unwrap())
        })
        .collect()
}

/// Waits until the gateway counted `completion` completion tokens in all.
async fn completion_tokens_counted(env: &Env, completion: u64) {
    let deadline = Instant::now() + WITHIN;
    let line = format!("svc_proxy_tokens_total{{kind=\"completion\"}} {completion}");
    loop {
        let metrics = String::from_utf8(env.get("/metrics").await.body.to_vec()).unwrap();
        if metrics.contains(&line) {
            return;
        }
        assert!(Instant::now() < deadline, "usage not counted: {metrics}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn weather_tool() -> Value {
    json!({"type": "function", "name": "get_weather", "description": "The weather",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}})
}

#[tokio::test]
async fn responses_reach_a_claude_model_translated_both_ways() {
    let (anthropic, _openai, env, _dir) = both().await;
    let body = json!({"model": "claude-sonnet-4", "instructions": "Use the tools.",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Weather in Oslo?"}]}],
        "tools": [weather_tool()], "max_output_tokens": 300});
    let reply = post(&env, "/v1/responses", &body).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let sent = anthropic.last_body();
    assert_eq!(sent["system"][0]["text"], "Use the tools.");
    assert_eq!(sent["max_tokens"], 300);
    assert_eq!(
        sent["tools"][0]["input_schema"],
        weather_tool()["parameters"]
    );
    assert_eq!(
        sent["messages"][0]["content"][0]["text"],
        "Weather in Oslo?"
    );
    let response = reply.json();
    assert_eq!(response["object"], "response");
    assert_eq!(response["status"], "completed");
    assert_eq!(response["instructions"], "Use the tools.");
    let call = response["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["type"] == "function_call")
        .expect("a function call")
        .clone();
    assert_eq!(call["name"], "get_weather");
    assert_eq!(call["arguments"], "{}");
    let usage = &response["usage"];
    assert!(usage["input_tokens"].as_u64() > Some(0));
    let first_output = usage["output_tokens"].as_u64().unwrap();
    assert_eq!(
        usage["total_tokens"].as_u64(),
        Some(usage["input_tokens"].as_u64().unwrap() + first_output)
    );

    // The result goes back as a tool_result; the answer streams as Responses events.
    let mut body = body;
    let input = body["input"].as_array_mut().unwrap();
    input.push(call.clone());
    input.push(
        json!({"type": "function_call_output", "call_id": call["call_id"],
                      "output": "Sunny"}),
    );
    body["stream"] = json!(true);
    let reply = post(&env, "/v1/responses", &body).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    let sent = anthropic.last_body();
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["messages"][1]["content"][0]["type"], "tool_use");
    assert_eq!(sent["messages"][1]["content"][0]["id"], call["call_id"]);
    assert_eq!(
        sent["messages"][2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": call["call_id"],
               "content": [{"type": "text", "text": "Sunny"}]})
    );
    let events = named_events(&reply.body);
    for (i, (name, data)) in events.iter().enumerate() {
        assert_eq!(data["type"], name.as_str());
        assert_eq!(data["sequence_number"], i);
    }
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names[..4],
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added"
        ]
    );
    assert_eq!(names.last(), Some(&"response.completed"));
    let text: String = events
        .iter()
        .filter(|(n, _)| n == "response.output_text.delta")
        .map(|(_, d)| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, MOCK_REPLY);
    let completed = &events.last().unwrap().1["response"];
    assert_eq!(completed["output"][0]["content"][0]["text"], MOCK_REPLY);
    let streamed_output = completed["usage"]["output_tokens"].as_u64().unwrap();
    assert!(streamed_output > 0);

    // Both answers' usage is counted.
    completion_tokens_counted(&env, first_output + streamed_output).await;
}

#[tokio::test]
async fn structured_output_reaches_claude_as_a_forced_tool() {
    let (anthropic, _openai, env, _dir) = both().await;
    let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}});
    let chat = env
        .send_chat(
            json!({"model": "claude-x", "messages": [{"role": "user", "content": "Who?"}],
            "response_format": {"type": "json_schema",
                "json_schema": {"name": "Person", "schema": schema, "strict": true}}}),
        )
        .await;
    assert_eq!(chat.status, 200, "{:?}", chat.body);
    let sent = anthropic.last_body();
    assert_eq!(sent["tools"][0]["name"], "Person");
    assert_eq!(sent["tools"][0]["input_schema"], schema);
    assert_eq!(
        sent["tool_choice"],
        json!({"type": "tool", "name": "Person"})
    );
    let chat = chat.json();
    assert_eq!(chat["choices"][0]["finish_reason"], "stop");
    let content = chat["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(serde_json::from_str::<Value>(content).unwrap().is_object());
    assert!(chat["choices"][0]["message"].get("tool_calls").is_none());

    // Streamed, the answer's JSON arrives as content deltas.
    let streamed = env
        .send_chat(json!({"model": "claude-x", "stream": true,
            "messages": [{"role": "user", "content": "Who?"}],
            "response_format": {"type": "json_schema",
                "json_schema": {"name": "Person", "schema": schema}}}))
        .await;
    assert_eq!(streamed.status, 200);
    let body = String::from_utf8_lossy(&streamed.body).into_owned();
    let chunks: Vec<Value> = named_events(body.trim_end_matches("data: [DONE]\n\n").as_bytes())
        .into_iter()
        .map(|(_, data)| data)
        .collect();
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert!(serde_json::from_str::<Value>(&content).unwrap().is_object());
    assert!(
        chunks
            .iter()
            .all(|c| c["choices"][0]["delta"].get("tool_calls").is_none())
    );
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "stop"
    );

    let response = post(
        &env,
        "/v1/responses",
        &json!({"model": "claude-x", "input": "Who?",
        "text": {"format": {"type": "json_schema", "name": "Person", "schema": schema}}}),
    )
    .await;
    assert_eq!(response.status, 200);
    assert_eq!(anthropic.last_body()["tool_choice"]["name"], "Person");
    let response = response.json();
    assert_eq!(response["output"].as_array().unwrap().len(), 1);
    let text = response["output"][0]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(serde_json::from_str::<Value>(text).unwrap().is_object());
}

#[tokio::test]
async fn what_cannot_be_translated_is_refused_by_name_and_never_sent() {
    let (anthropic, openai, env, _dir) = both().await;
    let cases = [
        (
            "/v1/responses",
            json!({"model": "claude-x", "input": "hi", "tools": [{"type": "file_search"}]}),
            "tools[0].type",
        ),
        (
            "/v1/responses",
            json!({"model": "claude-x", "input": "hi", "previous_response_id": "resp_1"}),
            "previous_response_id",
        ),
        (
            "/v1/chat/completions",
            json!({"model": "claude-x", "n": 2, "messages": [{"role": "user", "content": "hi"}]}),
            "n",
        ),
        (
            "/v1/chat/completions",
            json!({"model": "claude-x", "messages": [{"role": "user", "content": [
                {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]}]}),
            "messages[0].content[0].type",
        ),
        (
            "/v1/messages",
            json!({"model": "gpt-x", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}],
                   "tools": [{"type": "web_search_20250305", "name": "web_search"}]}),
            "tools[0].type",
        ),
        (
            "/v1/messages",
            json!({"model": "gpt-x", "max_tokens": 10, "messages": [{"role": "user", "content": [
                {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                 "data": "x"}}]}]}),
            "messages[0].content[0].type",
        ),
    ];
    for (path, body, field) in cases {
        let reply = post(&env, path, &body).await;
        assert_envelope(&reply, 400, "VALIDATION_ERROR");
        assert_eq!(
            reply.json()["error"]["field_errors"][0]["field"],
            field,
            "{path} {body}"
        );
    }
    assert!(anthropic.seen().is_empty());
    assert!(openai.seen().is_empty());
}

#[tokio::test]
async fn a_target_that_cannot_carry_a_request_hands_it_to_the_next() {
    let (anthropic, openai, env, _dir) = both().await;
    openai.set(Script::Json(
        200,
        json!({"id": "resp_1", "object": "response"}),
        vec![],
    ));
    let body = json!({"model": "both", "input": "news?", "tools": [{"type": "file_search"}]});
    let reply = post(&env, "/v1/responses", &body).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert!(
        anthropic.seen().is_empty(),
        "no call to the target that cannot carry it"
    );
    let seen = openai.seen();
    assert_eq!(seen[0].path, "/v1/responses");
    let sent: Value = serde_json::from_slice(&seen[0].body).unwrap();
    assert_eq!(sent["tools"], body["tools"]);
    assert_eq!(sent["model"], "gpt-both");
    let metrics = String::from_utf8(env.get("/metrics").await.body.to_vec()).unwrap();
    assert!(
        metrics.contains(
            "svc_provider_requests_total{provider=\"anthropic\",outcome=\"untranslatable\"} 1"
        ),
        "{metrics}"
    );
}

fn tool_call_completion() -> Value {
    json!({
        "id": "chatcmpl-9", "object": "chat.completion", "created": 1, "model": "gpt-x",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]}}],
        "usage": {"prompt_tokens": 21, "completion_tokens": 8, "total_tokens": 29},
    })
}

fn chunk_event(delta: Value, finish: Option<&str>) -> String {
    let chunk = json!({"id": "chatcmpl-9", "object": "chat.completion.chunk", "created": 1,
        "model": "gpt-x", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {chunk}\n\n")
}

#[tokio::test]
async fn messages_reach_an_openai_model_translated_both_ways() {
    let (_anthropic, openai, env, _dir) = both().await;
    openai.set(Script::Json(200, tool_call_completion(), vec![]));
    let tools = json!([{"name": "get_weather", "description": "The weather",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]);
    let body = json!({"model": "gpt-x", "max_tokens": 64, "system": "Be brief.", "tools": tools,
        "messages": [{"role": "user", "content": "Weather in Oslo?"},
                     {"role": "system", "content": "Use the tools."}]});
    let reply = post(&env, "/v1/messages", &body).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let seen = openai.seen();
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(
        seen[0].headers["authorization"],
        "Bearer sk-openai-fake-0123456789"
    );
    let sent: Value = serde_json::from_slice(&seen[0].body).unwrap();
    assert_eq!(
        sent["messages"],
        json!([{"role": "system", "content": "Be brief.\nUse the tools."},
               {"role": "user", "content": "Weather in Oslo?"}])
    );
    assert_eq!(sent["max_completion_tokens"], 64);
    assert_eq!(
        sent["tools"][0]["function"]["parameters"],
        tools[0]["input_schema"]
    );
    let message = reply.json();
    assert_eq!(message["type"], "message");
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(
        message["content"][0],
        json!({"type": "tool_use", "id": "call_1", "name": "get_weather",
               "input": {"city": "Oslo"}})
    );
    assert_eq!(
        message["usage"],
        json!({"input_tokens": 21, "output_tokens": 8})
    );

    // The tool's result, streamed: chunks become Anthropic's events in Anthropic's order.
    let usage = json!({"id": "chatcmpl-9", "object": "chat.completion.chunk", "choices": [],
        "usage": {"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35}});
    openai.set(Script::Stream {
        before: vec![
            chunk_event(json!({"role": "assistant", "content": ""}), None),
            chunk_event(json!({"content": "Sunny "}), None),
            chunk_event(json!({"content": "in Oslo."}), None),
            chunk_event(json!({}), Some("stop")),
            format!("data: {usage}\n\n"),
            "data: [DONE]\n\n".to_owned(),
        ],
        after: vec![],
        fail: false,
    });
    openai.release();
    let mut body = body;
    let turns = body["messages"].as_array_mut().unwrap();
    turns.push(json!({"role": "assistant", "content": message["content"]}));
    turns.push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "Sunny"}]}));
    body["stream"] = json!(true);
    let reply = post(&env, "/v1/messages", &body).await;
    assert_eq!(reply.status, 200);
    let sent: Value = serde_json::from_slice(&openai.seen()[1].body).unwrap();
    assert_eq!(sent["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        sent["messages"][2]["tool_calls"][0]["function"]["arguments"],
        "{\"city\":\"Oslo\"}"
    );
    assert_eq!(
        sent["messages"][3],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "Sunny"})
    );
    let events = named_events(&reply.body);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let text: String = events
        .iter()
        .filter_map(|(_, e)| e["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "Sunny in Oslo.");
    assert_eq!(events[6].1["delta"]["stop_reason"], "end_turn");
    assert_eq!(
        events[6].1["usage"],
        json!({"input_tokens": 30, "output_tokens": 5})
    );

    // Both answers' usage is counted.
    completion_tokens_counted(&env, 8 + 5).await;
}

#[tokio::test]
async fn a_stream_ended_before_its_finish_ends_with_the_gateways_error() {
    let (_anthropic, openai, env, _dir) = both().await;
    let body = json!({"model": "gpt-x", "max_tokens": 64, "stream": true,
        "messages": [{"role": "user", "content": "hi"}]});
    openai.set(Script::Stream {
        before: vec![chunk_event(json!({"content": "Hel"}), None)],
        after: vec![],
        fail: false,
    });
    openai.release();
    let reply = post(&env, "/v1/messages", &body).await;
    assert_eq!(reply.status, 200);
    let text = String::from_utf8_lossy(&reply.body).into_owned();
    assert!(text.starts_with("event: message_start\n"), "{text}");
    assert!(text.contains("\"text\":\"Hel\""), "{text}");
    assert!(
        !text.contains("message_stop"),
        "not told as complete: {text}"
    );
    assert!(text.contains("PROVIDER_UNAVAILABLE"), "{text}");
}
