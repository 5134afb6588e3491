//! `/health`, `/ready`, `/metrics` and the envelope for unknown routes and methods.

use crate::support;

use std::time::{Duration, Instant};

use http::Request;
use http_body_util::Full;
use support::{Env, assert_envelope, chat_body, config, send, start};

#[tokio::test]
async fn health_is_always_ok() {
    let env = Env::mock(&[]).await;
    let reply = env.get("/health").await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.json(),
        serde_json::json!({"status": "ok", "checks": {}})
    );
    assert!(reply.header("x-request-id").is_some());
}

#[tokio::test]
async fn ready_fails_without_redis() {
    let env = Env::mock(&[]).await;
    let reply = env.get("/ready").await;
    assert_eq!(reply.status, 503);
    let json = reply.json();
    assert_eq!(json["status"], "unhealthy");
    assert_eq!(json["checks"]["redis"]["status"], "failed");
    assert!(json["checks"]["redis"]["message"].as_str().is_some());
    assert_eq!(json["checks"]["auth_grpc"]["status"], "ok", "{json}");
    assert!(json["checks"]["auth_grpc"].get("message").is_none());
    assert!(json["checks"]["auth_grpc"]["latency_ms"].as_u64().is_some());
}

#[tokio::test]
async fn ready_is_ok_with_redis_and_auth_up() {
    let redis = svc_testkit::redis_url();
    let env = Env::mock(&[("REDIS_URL", redis.as_str())]).await;
    let reply = env.get("/ready").await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let json = reply.json();
    assert_eq!(json["status"], "ok");
    assert_eq!(json["checks"]["redis"]["status"], "ok");
    assert_eq!(json["checks"]["auth_grpc"]["status"], "ok");
}

#[tokio::test]
async fn ready_fails_fast_when_auth_is_unreachable() {
    let closed: std::net::SocketAddr = format!("127.0.0.1:{}", svc_testkit::free_port())
        .parse()
        .unwrap();
    let redis = svc_testkit::redis_url();
    let gateway = start(config(closed, &[("REDIS_URL", redis.as_str())])).await;
    let client = support::client();
    let started = Instant::now();
    let request = Request::get(format!("{}/ready", gateway.url()))
        .body(Full::default())
        .unwrap();
    let reply = send(&client, request).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the /ready budget holds"
    );
    assert_eq!(reply.status, 503);
    let json = reply.json();
    assert_eq!(json["checks"]["auth_grpc"]["status"], "failed");
    assert_eq!(json["checks"]["redis"]["status"], "ok");
    let text = String::from_utf8_lossy(&reply.body);
    assert!(
        !text.contains(&closed.port().to_string()),
        "no address in the report"
    );
}

#[tokio::test]
async fn unknown_route_is_404_in_the_envelope() {
    let env = Env::mock(&[]).await;
    assert_envelope(&env.get("/v2/nothing").await, 404, "NOT_FOUND");
}

#[tokio::test]
async fn wrong_method_is_405_in_the_envelope() {
    let env = Env::mock(&[]).await;
    assert_envelope(
        &env.get("/v1/chat/completions").await,
        405,
        "METHOD_NOT_ALLOWED",
    );
    let request = Request::post(env.url("/health"))
        .body(Full::default())
        .unwrap();
    assert_envelope(&send(&env.client, request).await, 405, "METHOD_NOT_ALLOWED");
}

#[tokio::test]
async fn docs_url_follows_the_configuration() {
    let env = Env::mock(&[("SVC_ERROR_DOCS_BASE", "https://docs.example.com/errors/")]).await;
    let reply = env.get("/nope").await;
    assert_eq!(
        reply.json()["error"]["docs_url"],
        "https://docs.example.com/errors/not-found"
    );
}

#[tokio::test]
async fn renamed_id_headers() {
    let env = Env::mock(&[
        ("SVC_REQUEST_ID_HEADER", "X-Correlation-ID"),
        ("SVC_TRACE_ID_HEADER", "X-Trace"),
    ])
    .await;
    let reply = env.get("/health").await;
    assert!(reply.header("x-correlation-id").is_some());
    assert!(reply.header("x-trace").is_some());
    assert!(reply.header("x-request-id").is_none());
}

#[tokio::test]
async fn metrics_count_by_route_template() {
    let env = Env::mock(&[]).await;
    assert_eq!(env.send_chat(chat_body("svc-mock-1")).await.status, 200);
    let org = env.world.org_id;
    let probe = Request::get(env.url(&format!("/v1/orgs/{org}/auth-probe")))
        .header("authorization", format!("Bearer {}", env.world.chat_token))
        .header("x-svc-agent-id", env.world.agent_id.to_string())
        .body(Full::default())
        .unwrap();
    assert_eq!(send(&env.client, probe).await.status, 200);
    assert_eq!(
        env.get(&format!("/v1/orgs/{}/nothing", uuid::Uuid::new_v4()))
            .await
            .status,
        404
    );

    let reply = env.get("/metrics").await;
    assert_eq!(reply.status, 200);
    let text = String::from_utf8(reply.body.to_vec()).unwrap();
    for expected in [
        r#"svc_proxy_requests_total{route="/v1/chat/completions",method="POST",code="200"} 1"#,
        r#"svc_proxy_requests_total{route="/v1/orgs/{org_id}/auth-probe",method="GET",code="200"} 1"#,
        r#"svc_proxy_requests_total{route="unmatched",method="GET",code="404"} 1"#,
        "svc_proxy_request_duration_seconds_bucket",
        "svc_proxy_auth_validate_duration_seconds",
        "svc_process_up 1",
    ] {
        assert!(text.contains(expected), "{expected} missing from:\n{text}");
    }
    assert!(
        !text.contains(&org.to_string()),
        "an org id leaked into a label"
    );
    assert!(
        !text.contains(&env.world.chat_token),
        "a token leaked into the metrics"
    );
}
