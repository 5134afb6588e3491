//! One case per row of SPEC's client, server and provider error tables, end to end: the real
//! auth server on a fresh database, the shared Redis, two gateway replicas, a fake upstream.
//! Each case asserts the status, the code, the envelope shape and the three headers.

use crate::support;

use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use serde_json::json;
use support::stack::{Stack, body};
use support::{LIVE_MODEL, Reply, Script, assert_envelope, chat_body, client, completion, send};

const WITHIN: Duration = Duration::from_secs(10);

fn error_json(message: &str) -> serde_json::Value {
    json!({"error": {"message": message, "type": "invalid_request_error"}})
}

#[tokio::test]
async fn every_error_table_row() {
    let stack = Stack::start(Script::Json(200, completion("ok"), vec![])).await;
    let gateway = stack.gateway(&[]).await;
    let http = client();
    let ok = chat_body(LIVE_MODEL);

    // The happy path first, so every refusal below is the row's own doing.
    let reply = send(&http, stack.chat(&gateway).body(body(&ok)).unwrap()).await;
    assert_eq!(
        reply.status,
        200,
        "{:?}",
        String::from_utf8_lossy(&reply.body)
    );

    let with_header = |name: &'static str, value: Option<String>| {
        let mut request = stack.chat(&gateway).body(body(&ok)).unwrap();
        match value {
            Some(value) => request.headers_mut().insert(name, value.parse().unwrap()),
            None => request.headers_mut().remove(name),
        };
        request
    };

    // Client errors.
    let request = stack
        .chat(&gateway)
        .body(Full::new(Bytes::from_static(b"{\"model\": [}")))
        .unwrap();
    assert_envelope(&send(&http, request).await, 400, "INVALID_JSON");

    let request = stack
        .chat(&gateway)
        .body(body(&json!({"model": LIVE_MODEL})))
        .unwrap();
    let reply = send(&http, request).await;
    assert_envelope(&reply, 400, "VALIDATION_ERROR");
    assert_eq!(
        reply.json()["error"]["field_errors"][0]["field"],
        "messages"
    );

    assert_envelope(
        &send(&http, with_header("x-svc-agent-id", None)).await,
        400,
        "MISSING_AGENT_ID",
    );
    assert_envelope(
        &send(&http, with_header("authorization", None)).await,
        401,
        "MISSING_TOKEN",
    );
    assert_envelope(
        &send(
            &http,
            with_header("authorization", Some("Bearer not-a-pat".into())),
        )
        .await,
        401,
        "INVALID_TOKEN",
    );
    let (revoked_id, revoked) = stack.token_with(1).await;
    stack.revoke(revoked_id).await;
    assert_envelope(
        &send(
            &http,
            with_header("authorization", Some(format!("Bearer {revoked}"))),
        )
        .await,
        401,
        "INVALID_TOKEN",
    );
    let (_, list_only) = stack.token_with(1 << 3).await;
    assert_envelope(
        &send(
            &http,
            with_header("authorization", Some(format!("Bearer {list_only}"))),
        )
        .await,
        403,
        "INSUFFICIENT_PERMISSIONS",
    );
    let other = stack.other_org().await;
    for agent in [uuid::Uuid::new_v4(), other.agents[0].agent_id] {
        let reply = send(
            &http,
            with_header("x-svc-agent-id", Some(agent.to_string())),
        )
        .await;
        assert_envelope(&reply, 403, "AGENT_NOT_AUTHORIZED");
    }
    for status in ["paused", "suspended", "archived"] {
        let reply = send(
            &http,
            with_header("x-svc-agent-id", Some(stack.agent(status).to_string())),
        )
        .await;
        assert_envelope(&reply, 403, "AGENT_SUSPENDED");
    }
    let request = Request::get(format!("{}/v1/chat/completions", gateway.url()))
        .body(Full::default())
        .unwrap();
    assert_envelope(&send(&http, request).await, 405, "METHOD_NOT_ALLOWED");
    let request = Request::get(format!("{}/v1/no-such-route", gateway.url()))
        .body(Full::default())
        .unwrap();
    assert_envelope(&send(&http, request).await, 404, "NOT_FOUND");

    let key_body = json!({"model": LIVE_MODEL, "messages": [{"role": "user", "content": "one"}]});
    let request = stack
        .chat(&gateway)
        .header("idempotency-key", "reuse-1")
        .body(body(&key_body))
        .unwrap();
    assert_eq!(send(&http, request).await.status, 200);
    let changed = json!({"model": LIVE_MODEL, "messages": [{"role": "user", "content": "two"}]});
    let request = stack
        .chat(&gateway)
        .header("idempotency-key", "reuse-1")
        .body(body(&changed))
        .unwrap();
    let reply = send(&http, request).await;
    assert_envelope(&reply, 409, "IDEMPOTENCY_KEY_REUSE");
    assert_eq!(reply.header("x-should-retry"), Some("false"));

    let big = json!({"model": LIVE_MODEL, "messages": [{"role": "user", "content": "x".repeat(1024 * 1024)}]});
    assert_envelope(
        &send(&http, stack.chat(&gateway).body(body(&big)).unwrap()).await,
        413,
        "PAYLOAD_TOO_LARGE",
    );

    let mut request = stack.chat(&gateway).body(body(&ok)).unwrap();
    request
        .headers_mut()
        .insert("content-type", "text/plain".parse().unwrap());
    assert_envelope(&send(&http, request).await, 415, "UNSUPPORTED_MEDIA_TYPE");

    // The org limit: another org, on a replica limited to one request a minute.
    let limited = stack.gateway(&[("SVC_RATE_LIMIT_RPM", "1")]).await;
    let as_other = || {
        Request::post(format!("{}/v1/chat/completions", limited.url()))
            .header("authorization", format!("Bearer {}", other.chat_token))
            .header("x-svc-agent-id", other.agents[0].agent_id.to_string())
            .header("content-type", "application/json")
            .body(body(&ok))
            .unwrap()
    };
    assert_eq!(send(&http, as_other()).await.status, 200);
    let reply = send(&http, as_other()).await;
    assert_envelope(&reply, 429, "RATE_LIMITED");
    assert_rate_limit_headers(&reply);
    assert!(
        reply
            .header("retry-after")
            .and_then(|v| v.parse::<u64>().ok())
            .is_some()
    );

    // Server and dependency errors.
    assert_envelope(
        &send(
            &http,
            stack
                .chat(&gateway)
                .body(body(&chat_body("gpt-unregistered")))
                .unwrap(),
        )
        .await,
        501,
        "PROVIDER_NOT_CONFIGURED",
    );

    // Provider errors.
    let provider_rows: Vec<(Script, u16, &str)> = vec![
        (
            Script::Json(400, error_json("bad payload"), vec![]),
            400,
            "INVALID_REQUEST",
        ),
        (
            Script::Json(
                429,
                error_json("slow down"),
                vec![("retry-after", "9".into())],
            ),
            429,
            "RATE_LIMITED",
        ),
        (
            Script::Json(401, error_json("bad key"), vec![]),
            503,
            "PROVIDER_UNAVAILABLE",
        ),
        (
            Script::Json(403, error_json("no"), vec![]),
            503,
            "PROVIDER_UNAVAILABLE",
        ),
        (
            Script::Json(404, error_json("no model"), vec![]),
            503,
            "PROVIDER_UNAVAILABLE",
        ),
        (
            Script::Json(500, error_json("boom"), vec![]),
            503,
            "PROVIDER_UNAVAILABLE",
        ),
    ];
    for (script, status, code) in provider_rows {
        stack.upstream.set(script);
        let reply = send(&http, stack.chat(&gateway).body(body(&ok)).unwrap()).await;
        assert_envelope(&reply, status, code);
        assert_rate_limit_headers(&reply);
    }
    stack.upstream.set(Script::Json(
        429,
        error_json("slow down"),
        vec![("retry-after", "9".into())],
    ));
    let reply = send(&http, stack.chat(&gateway).body(body(&ok)).unwrap()).await;
    assert_eq!(
        reply.header("retry-after"),
        Some("9"),
        "the provider's Retry-After is forwarded"
    );
    let fast_timeout = stack.gateway(&[("SVC_PROVIDER_TIMEOUT", "300ms")]).await;
    stack.upstream.set(Script::Hang);
    let request = stack.chat(&fast_timeout).body(body(&ok)).unwrap();
    let reply = tokio::time::timeout(WITHIN, send(&http, request))
        .await
        .unwrap();
    assert_envelope(&reply, 504, "PROVIDER_TIMEOUT");

    // In flight: the upstream holds the first call; the same key meanwhile is 409.
    let before = stack.upstream.seen().len();
    let first = tokio::spawn({
        let http = http.clone();
        let request = stack
            .chat(&gateway)
            .header("idempotency-key", "busy-1")
            .body(body(&ok))
            .unwrap();
        async move { send(&http, request).await }
    });
    assert!(
        svc_testkit::eventually(WITHIN, || async { stack.upstream.seen().len() > before }).await,
        "the first call reached the upstream"
    );
    let request = stack
        .chat(&gateway)
        .header("idempotency-key", "busy-1")
        .body(body(&ok))
        .unwrap();
    let reply = send(&http, request).await;
    assert_envelope(&reply, 409, "IDEMPOTENCY_IN_PROGRESS");
    assert!(reply.header("retry-after").is_some());
    first.abort();

    // The auth service unreachable: token validation cannot answer.
    stack
        .upstream
        .set(Script::Json(200, completion("ok"), vec![]));
    stack.auth_proxy.cut();
    let reply = send(&http, stack.chat(&gateway).body(body(&ok)).unwrap()).await;
    assert_envelope(&reply, 503, "SERVICE_DEGRADED");
    stack.auth_proxy.restore();
    assert!(
        svc_testkit::eventually(WITHIN, || async {
            send(&http, stack.chat(&gateway).body(body(&ok)).unwrap())
                .await
                .status
                == 200
        })
        .await,
        "the gateway recovers once the auth service is back"
    );
}

fn assert_rate_limit_headers(reply: &Reply) {
    for name in [
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
    ] {
        assert!(
            reply.header(name).is_some(),
            "{name} missing on {}",
            reply.status
        );
    }
}
