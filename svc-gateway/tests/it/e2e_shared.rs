//! Guarantees shared across replicas, end to end: idempotency and the org rate limit with two
//! gateways on one Redis, failing open when Redis goes away, and durable session checkpoints.

use crate::support;

use std::time::Duration;

use serde_json::json;
use sqlx::Row;
use support::stack::{Stack, body};
use support::{LIVE_MODEL, Reply, Script, chat_body, client, completion, send};

const WITHIN: Duration = Duration::from_secs(10);

fn keyed(
    stack: &Stack,
    gateway: &svc_gateway::Running,
    key: &str,
    content: &str,
) -> http::Request<http_body_util::Full<bytes::Bytes>> {
    let body_json =
        json!({"model": LIVE_MODEL, "messages": [{"role": "user", "content": content}]});
    stack
        .chat(gateway)
        .header("idempotency-key", key)
        .body(body(&body_json))
        .unwrap()
}

#[tokio::test]
async fn a_committed_key_replays_on_either_replica() {
    let stack = Stack::start(Script::Json(200, completion("first answer"), vec![])).await;
    let (a, b) = (stack.gateway(&[]).await, stack.gateway(&[]).await);
    let http = client();

    let first = send(&http, keyed(&stack, &a, "order-1", "hi")).await;
    assert_eq!(first.status, 200);
    assert!(first.header("idempotent-replayed").is_none());
    stack
        .upstream
        .set(Script::Json(200, completion("second answer"), vec![]));

    for gateway in [&a, &b] {
        let replay = send(&http, keyed(&stack, gateway, "order-1", "hi")).await;
        assert_eq!(replay.status, 200);
        assert_eq!(replay.header("idempotent-replayed"), Some("true"));
        assert_eq!(replay.body, first.body, "the stored body, byte for byte");
    }
    assert_eq!(
        stack.upstream.seen().len(),
        1,
        "no provider call on a replay"
    );

    // Key order and whitespace are not part of the fingerprint; the alias path is the same route.
    let reordered = r#"{ "messages": [{"content": "hi", "role": "user"}],   "model": "gpt-test" }"#;
    let request = http::Request::post(format!("{}/proxy/v1/chat/completions", b.url()))
        .header("authorization", format!("Bearer {}", stack.seed.chat_token))
        .header("x-svc-agent-id", stack.agent("active").to_string())
        .header("content-type", "application/json")
        .header("idempotency-key", "order-1")
        .body(http_body_util::Full::new(bytes::Bytes::from(reordered)))
        .unwrap();
    let replay = send(&http, request).await;
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(stack.upstream.seen().len(), 1);

    // Without a key, every request calls the provider.
    assert_eq!(
        send(
            &http,
            stack.chat(&a).body(body(&chat_body(LIVE_MODEL))).unwrap()
        )
        .await
        .json()["choices"][0]["message"]["content"],
        "second answer"
    );
    assert_eq!(stack.upstream.seen().len(), 2);
}

#[tokio::test]
async fn transient_provider_errors_release_the_key() {
    let stack = Stack::start(Script::Json(
        503,
        json!({"error": {"message": "down"}}),
        vec![],
    ))
    .await;
    let (a, b) = (stack.gateway(&[]).await, stack.gateway(&[]).await);
    let http = client();
    assert_eq!(
        send(&http, keyed(&stack, &a, "retry-1", "hi")).await.status,
        503
    );
    stack.upstream.set(Script::Json(
        429,
        json!({"error": {"message": "slow"}}),
        vec![],
    ));
    assert_eq!(
        send(&http, keyed(&stack, &b, "retry-1", "hi")).await.status,
        429
    );
    stack
        .upstream
        .set(Script::Json(200, completion("finally"), vec![]));
    let ok = send(&http, keyed(&stack, &a, "retry-1", "hi")).await;
    assert_eq!(ok.status, 200);
    assert_eq!(
        stack.upstream.seen().len(),
        3,
        "each retry reached the provider"
    );
    let replay = send(&http, keyed(&stack, &b, "retry-1", "hi")).await;
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
}

#[tokio::test]
async fn concurrent_same_key_requests_across_replicas_call_the_provider_once() {
    let stack = Stack::start(Script::Gated(200, completion("only once"))).await;
    let (a, b) = (stack.gateway(&[]).await, stack.gateway(&[]).await);
    let http = client();

    // The first request claims the key and is held at the upstream; the other 19, split over
    // both replicas, arrive while it is in flight.
    let first = tokio::spawn({
        let (http, request) = (http.clone(), keyed(&stack, &a, "burst-1", "hi"));
        async move { send(&http, request).await }
    });
    assert!(
        svc_testkit::eventually(WITHIN, || async { stack.upstream.seen().len() == 1 }).await,
        "the first call reached the upstream"
    );
    let mut others = Vec::new();
    for i in 0..19 {
        let gateway = if i % 2 == 0 { &b } else { &a };
        let (http, request) = (http.clone(), keyed(&stack, gateway, "burst-1", "hi"));
        others.push(tokio::spawn(async move { send(&http, request).await }));
    }
    let mut in_progress = 0;
    for other in others {
        let reply = other.await.unwrap();
        assert_eq!(reply.status, 409);
        assert_eq!(reply.code(), "IDEMPOTENCY_IN_PROGRESS");
        assert!(reply.header("retry-after").is_some());
        in_progress += 1;
    }
    stack.upstream.release();
    let first = first.await.unwrap();
    assert_eq!(first.status, 200);
    assert_eq!(in_progress, 19);
    assert_eq!(stack.upstream.seen().len(), 1, "exactly one upstream call");

    // Once committed, both replicas replay the same bytes.
    for gateway in [&a, &b] {
        let replay = send(&http, keyed(&stack, gateway, "burst-1", "hi")).await;
        assert_eq!(replay.header("idempotent-replayed"), Some("true"));
        assert_eq!(replay.body, first.body);
    }
    assert_eq!(stack.upstream.seen().len(), 1);
}

#[tokio::test]
async fn a_provider_rejection_is_final_and_replays() {
    let stack = Stack::start(Script::Json(
        400,
        json!({"error": {"message": "unsupported parameter: foo"}}),
        vec![],
    ))
    .await;
    let (a, b) = (stack.gateway(&[]).await, stack.gateway(&[]).await);
    let http = client();
    let first = send(&http, keyed(&stack, &a, "reject-1", "hi")).await;
    assert_eq!(first.status, 400);
    assert_eq!(first.code(), "INVALID_REQUEST");
    stack
        .upstream
        .set(Script::Json(200, completion("would succeed now"), vec![]));
    let replay = send(&http, keyed(&stack, &b, "reject-1", "hi")).await;
    assert_eq!(replay.status, 400);
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(
        replay.body, first.body,
        "the stored envelope, byte for byte"
    );
    assert_eq!(stack.upstream.seen().len(), 1);

    // A different body under the same key is a reuse, whatever the first answer was.
    let reuse = send(&http, keyed(&stack, &a, "reject-1", "something else")).await;
    assert_eq!(reuse.status, 409);
    assert_eq!(reuse.code(), "IDEMPOTENCY_KEY_REUSE");
    assert_eq!(reuse.header("x-should-retry"), Some("false"));
}

#[tokio::test]
async fn keys_are_scoped_by_org() {
    let stack = Stack::start(Script::Json(200, completion("ok"), vec![])).await;
    let gateway = stack.gateway(&[]).await;
    let other = stack.other_org().await;
    let http = client();
    assert_eq!(
        send(&http, keyed(&stack, &gateway, "shared-key", "hi"))
            .await
            .status,
        200
    );
    let body_json = json!({"model": LIVE_MODEL, "messages": [{"role": "user", "content": "hi"}]});
    let request = http::Request::post(format!("{}/v1/chat/completions", gateway.url()))
        .header("authorization", format!("Bearer {}", other.chat_token))
        .header("x-svc-agent-id", other.agents[0].agent_id.to_string())
        .header("content-type", "application/json")
        .header("idempotency-key", "shared-key")
        .body(body(&body_json))
        .unwrap();
    let reply = send(&http, request).await;
    assert_eq!(reply.status, 200);
    assert!(
        reply.header("idempotent-replayed").is_none(),
        "another org's key never replays"
    );
    assert_eq!(stack.upstream.seen().len(), 2);
}

#[tokio::test]
async fn the_org_limit_holds_across_replicas() {
    let stack = Stack::start(Script::Json(200, completion("ok"), vec![])).await;
    let limit = [("SVC_RATE_LIMIT_RPM", "4")];
    let (a, b) = (stack.gateway(&limit).await, stack.gateway(&limit).await);
    let http = client();
    let mut statuses = Vec::new();
    let mut last = None;
    for i in 0..6 {
        let gateway = if i % 2 == 0 { &a } else { &b };
        let reply = send(
            &http,
            stack
                .chat(gateway)
                .body(body(&chat_body(LIVE_MODEL)))
                .unwrap(),
        )
        .await;
        statuses.push(reply.status.as_u16());
        last = Some(reply);
    }
    assert_eq!(statuses, [200, 200, 200, 200, 429, 429]);
    let last: Reply = last.unwrap();
    assert_eq!(last.header("x-ratelimit-limit"), Some("4"));
    assert_eq!(last.header("x-ratelimit-remaining"), Some("0"));
    assert!(last.header("retry-after").is_some());
    assert_eq!(
        stack.upstream.seen().len(),
        4,
        "refused requests never reach the provider"
    );
}

#[tokio::test]
async fn redis_down_fails_open() {
    let stack = Stack::start(Script::Json(200, completion("ok"), vec![])).await;
    let gateway = stack.gateway(&[("SVC_RATE_LIMIT_RPM", "2")]).await;
    let http = client();
    assert_eq!(
        send(&http, keyed(&stack, &gateway, "k-1", "hi"))
            .await
            .status,
        200
    );

    stack.redis_proxy.cut();
    // Over the limit and with a key already committed: with Redis gone, neither the limiter
    // nor the idempotency store can refuse or replay, and every request proceeds.
    for _ in 0..3 {
        let reply = send(&http, keyed(&stack, &gateway, "k-1", "hi")).await;
        assert_eq!(
            reply.status,
            200,
            "{:?}",
            String::from_utf8_lossy(&reply.body)
        );
        assert!(reply.header("idempotent-replayed").is_none());
    }
    assert_eq!(stack.upstream.seen().len(), 4);
    let ready = send(
        &http,
        http::Request::get(format!("{}/ready", gateway.url()))
            .body(Default::default())
            .unwrap(),
    )
    .await;
    assert_eq!(ready.status, 503);
    assert_eq!(ready.json()["checks"]["redis"]["status"], "failed");

    stack.redis_proxy.restore();
    assert!(
        svc_testkit::eventually(WITHIN, || async {
            let reply = send(&http, keyed(&stack, &gateway, "k-1", "hi")).await;
            reply.header("idempotent-replayed") == Some("true")
        })
        .await,
        "deduplication resumes once Redis is back"
    );
}

#[tokio::test]
async fn completed_calls_leave_one_checkpoint_and_replays_none() {
    let stack = Stack::start(Script::Json(200, completion("ok"), vec![])).await;
    let gateway = stack.gateway(&[]).await;
    let http = client();
    let session = format!("sess-{}", uuid::Uuid::new_v4().simple());
    let request = |key: &str| {
        let body_json = json!({"model": LIVE_MODEL, "messages": [{"role": "user", "content": "secret words"}, {"role": "user", "content": "more"}]});
        stack
            .chat(&gateway)
            .header("x-svc-session-id", session.as_str())
            .header("idempotency-key", key)
            .body(body(&body_json))
            .unwrap()
    };
    let first = send(&http, request("cp-1")).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.header("x-svc-session-id"), Some(session.as_str()));
    let replay = send(&http, request("cp-1")).await;
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    let second = send(&http, request("cp-2")).await;
    assert_eq!(second.status, 200);

    let pool = sqlx::PgPool::connect(stack.db.url()).await.unwrap();
    let recorded = || async {
        sqlx::query_scalar::<_, uuid::Uuid>(
            "SELECT request_id FROM session_checkpoints WHERE session_id = $1",
        )
        .bind(&session)
        .fetch_all(&pool)
        .await
        .unwrap()
        .into_iter()
        .map(|id| id.to_string())
        .collect::<Vec<_>>()
    };
    let last_id = second.header("x-request-id").unwrap().to_owned();
    assert!(
        svc_testkit::eventually(WITHIN, || async { recorded().await.contains(&last_id) }).await,
        "the last call's checkpoint is written"
    );
    let ids = recorded().await;
    assert_eq!(
        ids.len(),
        2,
        "one checkpoint per completed call, none for the replay"
    );
    assert!(!ids.contains(&replay.header("x-request-id").unwrap().to_owned()));
    let rows = sqlx::query(
        "SELECT c.org_id, c.request_id, c.model, c.message_count, c.status, c.latency_ms, c.stream,
                c.prompt_tokens, c.completion_tokens, c.total_tokens, s.agent_id
         FROM session_checkpoints c JOIN sessions s USING (org_id, session_id)
         WHERE c.session_id = $1 ORDER BY c.created_at",
    )
    .bind(&session)
    .fetch_all(&pool)
    .await
    .unwrap();
    let first_row = &rows[0];
    assert_eq!(first_row.get::<uuid::Uuid, _>("org_id"), stack.seed.org_id);
    assert_eq!(
        first_row.get::<uuid::Uuid, _>("request_id").to_string(),
        first.header("x-request-id").unwrap()
    );
    assert_eq!(first_row.get::<String, _>("model"), LIVE_MODEL);
    assert_eq!(first_row.get::<i32, _>("message_count"), 2);
    assert_eq!(first_row.get::<i32, _>("status"), 200);
    assert!(first_row.get::<i32, _>("latency_ms") >= 0);
    assert!(!first_row.get::<bool, _>("stream"));
    assert_eq!(first_row.get::<Option<i64>, _>("total_tokens"), Some(12));
    assert_eq!(
        first_row.get::<Option<uuid::Uuid>, _>("agent_id"),
        Some(stack.agent("active"))
    );
    // Metadata only: no message content anywhere in the session tables.
    let dump: String = sqlx::query_scalar(
        "SELECT coalesce(string_agg(t::text, ' '), '') FROM (SELECT * FROM session_checkpoints) t",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(!dump.contains("secret words"));

    // Row-level security: as the application role, another org sees nothing.
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("SET LOCAL ROLE svc_app")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query("SELECT set_config('svc.org_id', $1, true)")
        .bind(uuid::Uuid::new_v4().to_string())
        .execute(&mut *tx)
        .await
        .unwrap();
    let visible: i64 = sqlx::query_scalar("SELECT count(*) FROM session_checkpoints")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert_eq!(visible, 0);
    tx.rollback().await.unwrap();
    pool.close().await;
}
