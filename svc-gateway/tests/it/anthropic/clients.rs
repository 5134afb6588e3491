//! What Anthropic's clients send, accepted as the Messages API accepts it: Claude Code's first
//! request (`?beta=true`, a `system` turn among the messages), every field the gateway does not
//! read passed through byte for byte, and `count_tokens` answered by the estimate or forwarded.

use super::support::{Env, assert_envelope};
use serde_json::{Value, json};
use svc_gateway::provider::mock::MOCK_REPLY;

use super::upstream::{Anthropic, COUNTED};
use super::{gateway, post, support};

/// Claude Code's first request, cut down: a `system` turn after the user's.
fn claude_code_body(model: &str) -> Value {
    json!({"model": model, "max_tokens": 64, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "Be terse."},
    ]})
}

/// Everything Anthropic accepts that the gateway does not read.
fn rich_body(model: &str) -> Value {
    json!({
        "model": model,
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "You are Claude Code.",
                    "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "Read this.", "cache_control": {"type": "ephemeral"}},
                {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                    "data": "a note"}, "title": "note", "citations": {"enabled": true}},
            ]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Let me look.", "signature": "EqQBCgIYAhIM1gbcDa9"},
                {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
                    "input": {"query": "svc"}},
                {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
                {"type": "text", "text": "Done."},
            ]},
            {"role": "system", "content": [{"type": "text", "text": "Agent types: general."}]},
            {"role": "user", "content": "Go on."},
        ],
        "thinking": {"type": "enabled", "budget_tokens": 512},
        "tools": [
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
            {"name": "Bash", "input_schema": {"type": "object"},
                "cache_control": {"type": "ephemeral"}},
        ],
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
        "output_config": {"effort": "high"},
        "metadata": {"user_id": "u-1"},
        "a_field_from_next_year": {"nested": [1, 2, 3]},
    })
}

#[tokio::test]
async fn claude_codes_first_request_is_answered_by_the_mock() {
    let env = Env::mock(&[]).await;
    for path in [
        "/v1/messages",
        "/v1/messages?beta=true",
        "/proxy/v1/messages?beta=true",
    ] {
        let reply = post(&env, path, &claude_code_body("svc-mock-1"), &[]).await;
        assert_eq!(reply.status, 200, "{path}: {:?}", reply.body);
        assert_eq!(reply.json()["content"][0]["text"], MOCK_REPLY);
    }
    let reply = post(
        &env,
        "/v1/messages?beta=true",
        &rich_body("svc-mock-1"),
        &[],
    )
    .await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);

    // What the gateway reads is still checked: a role it does not know is named.
    let mut body = claude_code_body("svc-mock-1");
    body["messages"][1]["role"] = json!("tool");
    let reply = post(&env, "/v1/messages?beta=true", &body, &[]).await;
    assert_envelope(&reply, 400, "VALIDATION_ERROR");
    assert_eq!(
        reply.json()["error"]["field_errors"][0]["field"],
        "messages[1].role"
    );
}

#[tokio::test]
async fn an_anthropic_upstream_gets_claude_codes_body_byte_for_byte() {
    let anthropic = Anthropic::start().await;
    let (env, _dir) = gateway(&anthropic).await;
    for body in [
        claude_code_body("claude-sonnet-4"),
        rich_body("claude-sonnet-4"),
    ] {
        // Bytes as a client wrote them, spacing included.
        let raw = serde_json::to_string_pretty(&body).unwrap();
        let request = http::Request::post(env.url("/v1/messages?beta=true"))
            .header("authorization", format!("Bearer {}", env.world.chat_token))
            .header("x-svc-agent-id", env.world.agent_id.to_string())
            .header("content-type", "application/json")
            .header("anthropic-beta", "interleaved-thinking-2025-05-14")
            .body(http_body_util::Full::new(bytes::Bytes::from(raw.clone())))
            .unwrap();
        let reply = support::send(&env.client, request).await;
        assert_eq!(reply.status, 200, "{:?}", reply.body);
        let seen = anthropic.seen().pop().unwrap();
        assert_eq!(
            seen.path, "/v1/messages",
            "the query string is the gateway's own"
        );
        assert_eq!(seen.body, raw.as_bytes(), "the request unchanged");
        assert_eq!(
            seen.headers["anthropic-beta"],
            "interleaved-thinking-2025-05-14"
        );
        assert_eq!(reply.body, seen.answer);
    }
    let sent = anthropic.last_body();
    assert_eq!(
        sent["messages"][1]["content"][0]["signature"],
        "EqQBCgIYAhIM1gbcDa9"
    );
    assert_eq!(
        sent["messages"][1]["content"][1]["type"],
        "redacted_thinking"
    );
    assert_eq!(sent["system"][0]["cache_control"]["ttl"], "1h");
    assert_eq!(sent["a_field_from_next_year"]["nested"][2], 3);
    assert_eq!(
        sent["context_management"],
        rich_body("x")["context_management"]
    );
}

#[tokio::test]
async fn count_tokens_is_answered_from_the_estimate_by_the_mock() {
    let env = Env::mock(&[]).await;
    let mut body = rich_body("svc-mock-1");
    body.as_object_mut().unwrap().remove("max_tokens");
    let expected = svc_gateway::token_estimate::prompt_tokens(body.as_object().unwrap(), 4);
    for path in [
        "/v1/messages/count_tokens",
        "/proxy/v1/messages/count_tokens?beta=true",
    ] {
        let reply = post(&env, path, &body, &[]).await;
        assert_eq!(reply.status, 200, "{path}: {:?}", reply.body);
        assert_eq!(reply.json(), json!({"input_tokens": expected}));
    }
    // The same checks as Messages, the same envelope.
    let reply = post(
        &env,
        "/v1/messages/count_tokens",
        &json!({"model": "svc-mock-1", "messages": [{"role": "user"}]}),
        &[],
    )
    .await;
    assert_envelope(&reply, 400, "VALIDATION_ERROR");
    assert_eq!(
        reply.json()["error"]["field_errors"][0]["field"],
        "messages[0].content"
    );
    let unknown = json!({"model": "nobody", "messages": [{"role": "user", "content": "hi"}]});
    let reply = post(&env, "/v1/messages/count_tokens", &unknown, &[]).await;
    assert_envelope(&reply, 501, "PROVIDER_NOT_CONFIGURED");
    // The chat permission is needed.
    let request = http::Request::post(env.url("/v1/messages/count_tokens"))
        .header("authorization", format!("Bearer {}", env.world.bare_token))
        .header("x-svc-agent-id", env.world.agent_id.to_string())
        .header("content-type", "application/json")
        .body(support::json_body(&body))
        .unwrap();
    assert_envelope(
        &support::send(&env.client, request).await,
        403,
        "INSUFFICIENT_PERMISSIONS",
    );
}

#[tokio::test]
async fn count_tokens_is_forwarded_to_an_anthropic_target() {
    let anthropic = Anthropic::start().await;
    let (env, _dir) = gateway(&anthropic).await;
    let body = json!({"model": "claude-sonnet-4", "system": "Be brief.",
        "messages": [{"role": "user", "content": "Say hello."}],
        "thinking": {"type": "enabled", "budget_tokens": 1024}});
    let reply = post(
        &env,
        "/v1/messages/count_tokens?beta=true",
        &body,
        &[("anthropic-beta", "token-counting-2024-11-01")],
    )
    .await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.json(), json!({"input_tokens": COUNTED}));
    let seen = anthropic.seen().pop().unwrap();
    assert_eq!(seen.path, "/v1/messages/count_tokens");
    assert_eq!(seen.body, body.to_string().as_bytes());
    assert_eq!(seen.headers["anthropic-beta"], "token-counting-2024-11-01");
    assert_eq!(seen.headers["anthropic-version"], "2023-06-01");
    assert!(seen.headers.get("authorization").is_none());

    // An OpenAI-compatible model is answered from the estimate, with no call anywhere.
    let calls = anthropic.seen().len();
    let mut body = body;
    body["model"] = json!("gpt-4o");
    let reply = post(&env, "/v1/messages/count_tokens", &body, &[]).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let expected = svc_gateway::token_estimate::prompt_tokens(body.as_object().unwrap(), 1);
    assert_eq!(reply.json(), json!({"input_tokens": expected}));
    assert_eq!(anthropic.seen().len(), calls);
}

#[tokio::test]
async fn count_tokens_spends_none_of_the_request_limit() {
    let world = support::World::random();
    let auth_addr = support::auth::start(&world).await;
    let config = support::config(auth_addr, &[("SVC_RATE_LIMIT_RPM", "1")]);
    let gateway = svc_gateway::Gateway::new(config)
        .unwrap()
        .with_rate_limit_store(std::sync::Arc::new(
            svc_tower::rate_limit::MemoryRateLimitStore::new(),
        ))
        .start()
        .await
        .unwrap();
    let env = Env {
        world,
        auth_addr,
        gateway,
        client: support::client(),
        upstream: None,
    };
    let mut count = claude_code_body("svc-mock-1");
    count.as_object_mut().unwrap().remove("max_tokens");
    for _ in 0..3 {
        let reply = post(&env, "/v1/messages/count_tokens", &count, &[]).await;
        assert_eq!(reply.status, 200, "{:?}", reply.body);
    }
    // The one request a minute is still there for Messages.
    let body = claude_code_body("svc-mock-1");
    assert_eq!(post(&env, "/v1/messages", &body, &[]).await.status, 200);
    assert_envelope(
        &post(&env, "/v1/messages", &body, &[]).await,
        429,
        "RATE_LIMITED",
    );
}
