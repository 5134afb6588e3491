//! Anthropic through the gateway: `/v1/messages` passed through to an anthropic provider
//! (JSON and SSE unchanged, our key and version headers, never the client's credentials),
//! chat completions to a Claude model translated both ways, Anthropic errors in the envelope,
//! the mock's Messages answers, Messages validation at exact paths, and what Anthropic's
//! clients send (Claude Code's first request, `count_tokens`) in `clients`.

mod clients;
use crate::registry;
use crate::support;
pub(crate) mod upstream;

use std::time::{Duration, Instant};

use http::Request;
use serde_json::{Value, json};
use support::{Env, Reply, assert_envelope, json_body, send};
use svc_gateway::provider::mock::MOCK_REPLY;
use svc_testkit::TempDir;
use upstream::Anthropic;

const KEY_VAR: &str = "FAKE_ANTHROPIC_KEY";
const KEY: &str = "sk-ant-provider-0123456789";
/// Bounds every poll.
const WITHIN: Duration = Duration::from_secs(10);

/// A gateway whose registry sends `claude-*` to `anthropic`, plus a mock for `svc-mock-1`.
async fn gateway(anthropic: &Anthropic) -> (Env, TempDir) {
    let file = format!(
        r#"
[[providers]]
name = "anthropic"
kind = "anthropic"
base_url = "{}"
api_key_env = "{KEY_VAR}"

[[providers]]
name = "local"
kind = "mock"

[[providers]]
name = "openai"
kind = "openai"
base_url = "http://127.0.0.1:9/v1"

[[models]]
name = "gpt-4o"
targets = ["openai"]

[[models]]
name = "mixed"
targets = ["openai:gpt-4o", "anthropic:claude-mixed"]

[[models]]
name = "claude-*"
targets = ["anthropic"]

[[models]]
name = "svc-mock-1"
targets = ["local"]
"#,
        anthropic.base_url()
    );
    registry::gateway(&file, &[(KEY_VAR, KEY)]).await
}

async fn post(env: &Env, path: &str, body: &Value, extra: &[(&str, &str)]) -> Reply {
    let mut request = Request::post(env.url(path))
        .header("authorization", format!("Bearer {}", env.world.chat_token))
        .header("x-svc-agent-id", env.world.agent_id.to_string())
        .header("content-type", "application/json");
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    send(&env.client, request.body(json_body(body)).unwrap()).await
}

fn messages_body(model: &str) -> Value {
    json!({"model": model, "max_tokens": 64, "system": "Be brief.",
           "messages": [{"role": "user", "content": "Say hello."}]})
}

/// The data of each SSE event, `[DONE]` left out.
fn events(body: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(body)
        .split_terminator("\n\n")
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[tokio::test]
async fn messages_pass_through_with_the_providers_key_only() {
    let anthropic = Anthropic::start().await;
    let (env, _dir) = gateway(&anthropic).await;
    let body = messages_body("claude-sonnet-4");
    let reply = post(
        &env,
        "/v1/messages",
        &body,
        &[
            ("x-api-key", "client-own-key"),
            ("anthropic-beta", "tools-2024-04-04"),
        ],
    )
    .await;
    assert_eq!(reply.status, 200);
    let seen = &anthropic.seen()[0];
    assert_eq!(reply.body, seen.answer, "the answer unchanged");
    assert_eq!(
        seen.body,
        body.to_string().as_bytes(),
        "the request unchanged"
    );
    assert_eq!(seen.headers["x-api-key"], KEY);
    assert_eq!(seen.headers["anthropic-version"], "2023-06-01");
    assert_eq!(seen.headers["anthropic-beta"], "tools-2024-04-04");
    assert!(seen.headers.get("authorization").is_none());
    assert_eq!(reply.json()["content"][0]["text"], MOCK_REPLY);

    // The alias, streamed: the events as the provider wrote them, `event:` lines included.
    let mut body = messages_body("claude-sonnet-4");
    body["stream"] = json!(true);
    let reply = post(&env, "/proxy/v1/messages", &body, &[]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    assert_eq!(reply.body, anthropic.seen()[1].answer);
    assert!(String::from_utf8_lossy(&reply.body).starts_with("event: message_start\n"));

    // The usage of both calls is counted.
    let deadline = Instant::now() + WITHIN;
    let expected = 2 * (MOCK_REPLY.len() as u64).div_ceil(4);
    loop {
        let metrics = String::from_utf8(env.get("/metrics").await.body.to_vec()).unwrap();
        if metrics.contains(&format!(
            "svc_proxy_tokens_total{{kind=\"completion\"}} {expected}"
        )) {
            break;
        }
        assert!(Instant::now() < deadline, "usage not counted: {metrics}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn chat_completions_reach_a_claude_model_translated_both_ways() {
    let anthropic = Anthropic::start().await;
    let (env, _dir) = gateway(&anthropic).await;
    let tools = json!([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    let body = json!({"model": "claude-sonnet-4", "tools": tools, "messages": [
        {"role": "developer", "content": "Use the tools."},
        {"role": "user", "content": "Weather in Oslo?"},
    ]});
    let reply = env.send_chat(body.clone()).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let chat = reply.json();
    assert_eq!(chat["object"], "chat.completion");
    assert_eq!(chat["choices"][0]["finish_reason"], "tool_calls");
    let call = &chat["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "get_weather");
    assert_eq!(call["function"]["arguments"], "{}");
    assert!(chat["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    let sent = anthropic.last_body();
    assert_eq!(sent["system"][0]["text"], "Use the tools.");
    assert_eq!(
        sent["tools"][0]["input_schema"],
        tools[0]["function"]["parameters"]
    );

    // The tool's result goes back as a tool_result; the answer is text.
    let mut body = body;
    let turns = body["messages"].as_array_mut().unwrap();
    turns.push(json!({"role": "assistant", "content": null, "tool_calls": [call]}));
    turns.push(json!({"role": "tool", "tool_call_id": call["id"], "content": "Sunny"}));
    body["stream"] = json!(true);
    let reply = env.send_chat(body).await;
    assert_eq!(reply.status, 200);
    let text = String::from_utf8_lossy(&reply.body).into_owned();
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let chunks = events(&reply.body);
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, MOCK_REPLY);
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    assert!(
        chunks.iter().all(|c| c.get("usage").is_none()),
        "no usage chunk unasked"
    );
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "stop"
    );
    let sent = anthropic.last_body();
    assert_eq!(sent["messages"][1]["content"][0]["type"], "tool_use");
    assert_eq!(sent["messages"][2]["content"][0]["type"], "tool_result");
}

#[tokio::test]
async fn targets_of_both_kinds_serve_one_model() {
    let anthropic = Anthropic::start().await;
    let (env, _dir) = gateway(&anthropic).await;
    let reply = post(&env, "/v1/messages", &messages_body("mixed"), &[]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(anthropic.last_body()["model"], "claude-mixed");
    // An OpenAI-compatible target is called by translation (here, nothing listens there).
    let reply = post(&env, "/v1/messages", &messages_body("gpt-4o"), &[]).await;
    assert_envelope(&reply, 503, "PROVIDER_UNAVAILABLE");
    assert_eq!(anthropic.seen().len(), 1);

    // A chat request falls back across kinds: the OpenAI-compatible target refuses the
    // connection, the anthropic one answers through the translation.
    let chat = env
        .send_chat(json!({"model": "mixed", "messages": [{"role": "user", "content": "hi"}]}))
        .await;
    assert_eq!(chat.status, 200, "{:?}", chat.body);
    assert_eq!(chat.json()["choices"][0]["message"]["content"], MOCK_REPLY);
    assert_eq!(anthropic.last_body()["model"], "claude-mixed");
}

#[tokio::test]
async fn anthropic_errors_map_into_the_envelope() {
    let anthropic = Anthropic::start().await;
    let (env, _dir) = gateway(&anthropic).await;
    let cases = [
        (529, "overloaded_error", 503, "PROVIDER_UNAVAILABLE"),
        (429, "rate_limit_error", 429, "RATE_LIMITED"),
        (401, "authentication_error", 503, "PROVIDER_UNAVAILABLE"),
        (400, "invalid_request_error", 400, "INVALID_REQUEST"),
    ];
    for (upstream, kind, status, code) in cases {
        anthropic.fail_with(upstream, kind);
        let reply = post(&env, "/v1/messages", &messages_body("claude-x"), &[]).await;
        assert_envelope(&reply, status, code);
        let chat = env
            .send_chat(
                json!({"model": "claude-x", "messages": [{"role": "user", "content": "hi"}]}),
            )
            .await;
        assert_envelope(&chat, status, code);
    }
    let reply = post(&env, "/v1/messages", &messages_body("claude-x"), &[]).await;
    assert_eq!(reply.json()["error"]["detail"], "the fake says no");
}

#[tokio::test]
async fn the_mock_answers_messages_in_dev_mode() {
    let env = Env::mock(&[]).await;
    let reply = post(&env, "/v1/messages", &messages_body("svc-mock-1"), &[]).await;
    assert_eq!(reply.status, 200);
    let message = reply.json();
    assert_eq!(message["type"], "message");
    assert_eq!(message["stop_reason"], "end_turn");

    let mut body = messages_body("svc-mock-1");
    body["tools"] = json!([{"name": "lookup", "input_schema": {"type": "object"}}]);
    body["stream"] = json!(true);
    let reply = post(&env, "/v1/messages", &body, &[]).await;
    let kinds: Vec<String> = events(&reply.body)
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(events(&reply.body)[1]["content_block"]["name"], "lookup");
}

#[tokio::test]
async fn a_bad_messages_body_names_each_field() {
    let env = Env::mock(&[]).await;
    let body = json!({"model": "svc-mock-1", "system": 5, "messages": [
        {"role": "tool", "content": "x"},
        {"role": "user", "content": [{"type": "text"}, {"type": "tool_result"}]},
        {"role": "assistant"},
    ], "tool_choice": {"type": "tool"}});
    let reply = post(&env, "/v1/messages", &body, &[]).await;
    assert_envelope(&reply, 400, "VALIDATION_ERROR");
    let json = reply.json();
    let fields: Vec<&str> = json["error"]["field_errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    for field in [
        "max_tokens",
        "system",
        "messages[0].role",
        "messages[1].content[0].text",
        "messages[1].content[1].tool_use_id",
        "messages[2].content",
        "tool_choice.name",
    ] {
        assert!(fields.contains(&field), "{field} not in {fields:?}");
    }
    // Without a chat permission there is no Messages call either.
    let request = Request::post(env.url("/v1/messages"))
        .header("authorization", format!("Bearer {}", env.world.bare_token))
        .header("x-svc-agent-id", env.world.agent_id.to_string())
        .header("content-type", "application/json")
        .body(json_body(&messages_body("svc-mock-1")))
        .unwrap();
    assert_envelope(
        &send(&env.client, request).await,
        403,
        "INSUFFICIENT_PERMISSIONS",
    );
}
