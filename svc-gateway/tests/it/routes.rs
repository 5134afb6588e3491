//! The OpenAI routes beside chat (`/v1/embeddings`, `/v1/responses`, `/v1/models`) and what
//! every provider-backed route shares: permissions, idempotency, validation at exact paths,
//! usage learned from streams, and the body forwarded being the body validated. Real auth
//! server on a fresh database, real Redis, the mock provider or a fake upstream on loopback.

use crate::support;

use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use serde_json::{Value, json};
use sqlx::Row;
use support::stack::{Stack, body};
use support::{LIVE_MODEL, PROVIDER_KEY, Reply, Script, assert_envelope, client, completion, send};
use svc_gateway::Running;

const WITHIN: Duration = Duration::from_secs(10);

/// A POST to `path` through `gateway` as `token` and the seeded active agent.
fn post(stack: &Stack, gateway: &Running, path: &str, token: &str) -> http::request::Builder {
    Request::post(format!("{}{path}", gateway.url()))
        .header("authorization", format!("Bearer {token}"))
        .header("x-svc-agent-id", stack.agent("active").to_string())
        .header("content-type", "application/json")
}

async fn call(stack: &Stack, gateway: &Running, path: &str, json: Value) -> Reply {
    let request = post(stack, gateway, path, &stack.seed.chat_token)
        .body(body(&json))
        .unwrap();
    send(&client(), request).await
}

async fn get(stack: &Stack, gateway: &Running, path: &str, token: Option<&str>) -> Reply {
    let mut request = Request::get(format!("{}{path}", gateway.url()))
        .header("x-svc-agent-id", stack.agent("active").to_string());
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    send(&client(), request.body(Full::default()).unwrap()).await
}

/// A gateway on the mock provider (the stack's upstream is not used).
async fn mock_gateway(stack: &Stack, extra: &[(&str, &str)]) -> Running {
    let mut vars = vec![
        ("SVC_LLM_MODE", "mock"),
        ("SVC_PROVIDER_MODELS", "svc-mock-1,svc-embed-1"),
    ];
    vars.extend_from_slice(extra);
    stack.gateway(&vars).await
}

/// The `data:` payloads (and `event:` names) of an SSE body.
fn events(body: &[u8]) -> Vec<(Option<String>, String)> {
    let text = std::str::from_utf8(body).expect("UTF-8 events");
    text.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|event| {
            let kind = event
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .map(str::to_owned);
            let data = event
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .unwrap_or_default()
                .to_owned();
            (kind, data)
        })
        .collect()
}

#[tokio::test]
async fn embeddings_need_their_own_permission() {
    let stack = Stack::start(Script::Json(200, completion("unused"), vec![])).await;
    let gateway = mock_gateway(&stack, &[]).await;
    let input = json!({"model": "svc-embed-1", "input": ["a", "b"], "encoding_format": "float"});
    for path in ["/v1/embeddings", "/proxy/v1/embeddings"] {
        let reply = call(&stack, &gateway, path, input.clone()).await;
        assert_eq!(reply.status, 200, "{path}: {:?}", reply.body);
        let json = reply.json();
        assert_eq!(json["object"], "list");
        assert_eq!(json["data"].as_array().unwrap().len(), 2);
        assert!(json["data"][0]["embedding"].as_array().unwrap().len() > 1);
    }
    // CHAT_COMPLETIONS alone does not embed; EMBEDDINGS alone does not chat.
    let (_, chat_only) = stack.token_with(1).await;
    let request = post(&stack, &gateway, "/v1/embeddings", &chat_only)
        .body(body(&input))
        .unwrap();
    assert_envelope(
        &send(&client(), request).await,
        403,
        "INSUFFICIENT_PERMISSIONS",
    );
    let (_, embed_only) = stack.token_with(1 << 4).await;
    let chat = json!({"model": "svc-mock-1", "messages": [{"role": "user", "content": "hi"}]});
    let request = post(&stack, &gateway, "/v1/chat/completions", &embed_only)
        .body(body(&chat))
        .unwrap();
    assert_envelope(
        &send(&client(), request).await,
        403,
        "INSUFFICIENT_PERMISSIONS",
    );
    let request = post(&stack, &gateway, "/v1/embeddings", &embed_only)
        .body(body(&input))
        .unwrap();
    assert_eq!(send(&client(), request).await.status, 200);
}

#[tokio::test]
async fn responses_answer_and_stream_with_event_lines() {
    let stack = Stack::start(Script::Json(200, completion("unused"), vec![])).await;
    let gateway = mock_gateway(&stack, &[]).await;
    let reply = call(
        &stack,
        &gateway,
        "/v1/responses",
        json!({"model": "svc-mock-1", "input": "hi"}),
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json()["object"], "response");

    let reply = call(
        &stack,
        &gateway,
        "/proxy/v1/responses",
        json!({"model": "svc-mock-1", "input": "hi", "stream": true}),
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    let events = events(&reply.body);
    assert_eq!(events[0].0.as_deref(), Some("response.created"));
    assert_eq!(
        events.last().unwrap().0.as_deref(),
        Some("response.completed")
    );
    for (kind, data) in &events {
        let json: Value = serde_json::from_str(data).unwrap();
        assert_eq!(json["type"].as_str(), kind.as_deref());
    }
    // The Responses API needs CHAT_COMPLETIONS.
    let (_, embed_only) = stack.token_with(1 << 4).await;
    let input = json!({"model": "svc-mock-1", "input": "hi"});
    let request = post(&stack, &gateway, "/v1/responses", &embed_only)
        .body(body(&input))
        .unwrap();
    assert_envelope(
        &send(&client(), request).await,
        403,
        "INSUFFICIENT_PERMISSIONS",
    );
}

#[tokio::test]
async fn models_list_the_registry_for_any_valid_token_without_spending_the_limit() {
    let stack = Stack::start(Script::Json(200, completion("unused"), vec![])).await;
    let gateway = mock_gateway(&stack, &[("SVC_RATE_LIMIT_RPM", "1")]).await;
    let (_, no_bits) = stack.token_with(0).await;
    for _ in 0..3 {
        let reply = get(&stack, &gateway, "/v1/models", Some(&no_bits)).await;
        assert_eq!(reply.status, 200);
        let json = reply.json();
        assert_eq!(json["object"], "list");
        let ids: Vec<&str> = json["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["svc-embed-1", "svc-mock-1"]);
        assert_eq!(json["data"][0]["object"], "model");
    }
    let reply = get(
        &stack,
        &gateway,
        "/proxy/v1/models/svc-mock-1",
        Some(&no_bits),
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json()["id"], "svc-mock-1");
    assert_envelope(
        &get(&stack, &gateway, "/v1/models/gpt-unknown", Some(&no_bits)).await,
        404,
        "NOT_FOUND",
    );
    assert_envelope(
        &get(&stack, &gateway, "/v1/models", None).await,
        401,
        "MISSING_TOKEN",
    );
    // The one request a minute is still there for chat: models did not spend it.
    let chat = json!({"model": "svc-mock-1", "messages": [{"role": "user", "content": "hi"}]});
    assert_eq!(
        call(&stack, &gateway, "/v1/chat/completions", chat.clone())
            .await
            .status,
        200
    );
    assert_envelope(
        &call(&stack, &gateway, "/v1/chat/completions", chat).await,
        429,
        "RATE_LIMITED",
    );
}

#[tokio::test]
async fn bad_shapes_name_the_exact_path_and_duplicate_keys_are_invalid_json() {
    let stack = Stack::start(Script::Json(200, completion("unused"), vec![])).await;
    let gateway = mock_gateway(&stack, &[]).await;
    let reply = call(
        &stack,
        &gateway,
        "/v1/chat/completions",
        json!({"model": "svc-mock-1", "messages": [
            {"role": "user", "content": null},
            {"role": "tool", "content": "x"},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "video"}]},
            {"role": "user", "content": [{"type": "image_url", "image_url": {}}]},
        ]}),
    )
    .await;
    assert_envelope(&reply, 400, "VALIDATION_ERROR");
    let fields: Vec<(String, String)> = reply.json()["error"]["field_errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["field"].as_str().unwrap().to_owned(),
                f["code"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("messages[0].content", "REQUIRED"),
        ("messages[1].tool_call_id", "REQUIRED"),
        ("messages[2].content[1].type", "INVALID_ENUM"),
        ("messages[3].content[0].image_url.url", "REQUIRED"),
    ];
    assert_eq!(fields, expected.map(|(f, c)| (f.to_owned(), c.to_owned())));
    let duplicate = r#"{"model": "svc-mock-1", "model": "gpt-other", "messages": [{"role": "user", "content": "hi"}]}"#;
    let request = post(
        &stack,
        &gateway,
        "/v1/chat/completions",
        &stack.seed.chat_token,
    )
    .body(Full::new(Bytes::from(duplicate)))
    .unwrap();
    assert_envelope(&send(&client(), request).await, 400, "INVALID_JSON");
}

#[tokio::test]
async fn the_body_forwarded_is_the_body_received() {
    let stack = Stack::start(Script::Json(200, completion("ok"), vec![])).await;
    let gateway = stack.gateway(&[]).await;
    let bodies = [
        (
            "/v1/chat/completions",
            json!({"model": LIVE_MODEL, "messages": [
            {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "https://example.invalid/a.png"}}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
        ], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
           "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}},
           "seed": 7, "logit_bias": {"50256": -100}}),
        ),
        (
            "/v1/embeddings",
            json!({"model": LIVE_MODEL, "input": ["a", "b"], "dimensions": 3}),
        ),
        (
            "/proxy/v1/responses",
            json!({"model": LIVE_MODEL, "input": "hi", "store": false, "reasoning": {"effort": "low"}}),
        ),
    ];
    for (path, json) in &bodies {
        let request = post(&stack, &gateway, path, &stack.seed.chat_token)
            .header("idempotency-key", format!("fwd-{path}"))
            .body(body(json))
            .unwrap();
        let reply = send(&client(), request).await;
        assert_eq!(reply.status, 200, "{path}");
    }
    let seen = stack.upstream.seen();
    assert_eq!(seen.len(), 3);
    for ((path, json), seen) in bodies.iter().zip(&seen) {
        assert_eq!(
            seen.path,
            format!(
                "/v1{}",
                path.trim_start_matches("/proxy").trim_start_matches("/v1")
            )
        );
        let forwarded: Value = serde_json::from_slice(&seen.body).unwrap();
        assert_eq!(&forwarded, json, "{path}");
        assert_eq!(
            seen.headers
                .get("authorization")
                .and_then(|v| v.to_str().ok()),
            Some(format!("Bearer {PROVIDER_KEY}").as_str()),
            "the provider's key, never the client's"
        );
        assert!(seen.headers.get("idempotency-key").is_none(), "{path}");
    }
}

#[tokio::test]
async fn a_stream_asks_for_usage_counts_it_and_hides_it_from_a_client_that_did_not_ask() {
    let usage_chunk = format!(
        "data: {}\n\n",
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": LIVE_MODEL, "choices": [],
               "usage": {"prompt_tokens": 11, "completion_tokens": 13, "total_tokens": 24}})
    );
    let script = Script::Stream {
        before: vec![
            support::chunk("Hel"),
            support::chunk("lo"),
            usage_chunk,
            "data: [DONE]\n\n".into(),
        ],
        after: vec![],
        fail: false,
    };
    let stack = Stack::start(script).await;
    let gateway = stack.gateway(&[]).await;
    let session = format!("sess-{}", uuid::Uuid::new_v4().simple());
    let mut sent = Vec::new();
    for ask in [false, true] {
        let mut json = json!({"model": LIVE_MODEL, "stream": true, "messages": [{"role": "user", "content": "hi"}]});
        if ask {
            json["stream_options"] = json!({"include_usage": true});
        }
        let request = post(
            &stack,
            &gateway,
            "/v1/chat/completions",
            &stack.seed.chat_token,
        )
        .header("x-svc-session-id", session.as_str())
        .body(body(&json))
        .unwrap();
        let reply = tokio::spawn(async move { send(&client(), request).await });
        assert!(
            svc_testkit::eventually(WITHIN, || async {
                stack.upstream.seen().len() > sent.len()
            })
            .await,
            "the stream reached the upstream"
        );
        stack.upstream.release();
        let reply = reply.await.unwrap();
        assert_eq!(reply.status, 200);
        let datas: Vec<String> = events(&reply.body).into_iter().map(|(_, d)| d).collect();
        assert_eq!(datas.last().map(String::as_str), Some("[DONE]"));
        let shows_usage = datas.iter().any(|d| d.contains("\"total_tokens\""));
        assert_eq!(
            shows_usage, ask,
            "usage chunk shown only when asked: {datas:?}"
        );
        sent.push(json);
    }
    let seen = stack.upstream.seen();
    let first: Value = serde_json::from_slice(&seen[0].body).unwrap();
    let mut expected = sent[0].clone();
    expected["stream_options"] = json!({"include_usage": true});
    assert_eq!(first, expected, "the one documented addition");
    let second: Value = serde_json::from_slice(&seen[1].body).unwrap();
    assert_eq!(second, sent[1], "a client that asked is forwarded as is");

    // Both streams' usage reached the checkpoints and the token counter.
    let pool = sqlx::PgPool::connect(stack.db.url()).await.unwrap();
    let recorded = || async {
        sqlx::query("SELECT prompt_tokens, completion_tokens FROM session_checkpoints WHERE session_id = $1")
            .bind(&session)
            .fetch_all(&pool)
            .await
            .unwrap()
    };
    assert!(
        svc_testkit::eventually(WITHIN, || async { recorded().await.len() == 2 }).await,
        "two checkpoints"
    );
    for row in recorded().await {
        assert_eq!(row.get::<Option<i64>, _>("prompt_tokens"), Some(11));
        assert_eq!(row.get::<Option<i64>, _>("completion_tokens"), Some(13));
    }
    let metrics = send(
        &client(),
        Request::get(format!("{}/metrics", gateway.url()))
            .body(Full::default())
            .unwrap(),
    )
    .await;
    let text = String::from_utf8_lossy(&metrics.body);
    assert!(
        text.contains("svc_proxy_tokens_total{kind=\"prompt\"} 22"),
        "{text}"
    );
    assert!(
        text.contains("svc_proxy_tokens_total{kind=\"completion\"} 26"),
        "{text}"
    );
}

#[tokio::test]
async fn keyed_embeddings_and_responses_replay() {
    let stack = Stack::start(Script::Json(200, completion("ok"), vec![])).await;
    let gateway = stack.gateway(&[]).await;
    let bodies = [
        ("/v1/embeddings", json!({"model": LIVE_MODEL, "input": "a"})),
        ("/v1/responses", json!({"model": LIVE_MODEL, "input": "hi"})),
    ];
    for (path, json) in &bodies {
        let mut replies = Vec::new();
        // The second goes through the alias: one route, one key.
        for prefix in ["", "/proxy"] {
            let request = post(
                &stack,
                &gateway,
                &format!("{prefix}{path}"),
                &stack.seed.chat_token,
            )
            .header("idempotency-key", format!("replay-{path}"))
            .body(body(json))
            .unwrap();
            replies.push(send(&client(), request).await);
        }
        assert_eq!(replies[0].status, 200);
        assert_eq!(
            replies[1].header("idempotent-replayed"),
            Some("true"),
            "{path}"
        );
        assert_eq!(replies[0].body, replies[1].body);
        let streaming = json!({"model": LIVE_MODEL, "input": "hi", "stream": true});
        if *path == "/v1/responses" {
            let request = post(&stack, &gateway, path, &stack.seed.chat_token)
                .header("idempotency-key", "stream-key")
                .body(body(&streaming))
                .unwrap();
            assert_envelope(&send(&client(), request).await, 400, "VALIDATION_ERROR");
        }
    }
    assert_eq!(stack.upstream.seen().len(), 2, "one upstream call per key");
}
