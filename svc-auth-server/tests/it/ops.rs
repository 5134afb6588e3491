//! The HTTP ops routes and the standard gRPC services (health, reflection).

use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;
use svc_auth_server::{Config, Server};
use svc_proto::v1;
use svc_testkit::FaultProxy;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_reflection::pb::v1::ServerReflectionRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[tokio::test]
async fn health_is_always_ok_without_checks() {
    let h = start().await;
    let (status, headers, body) = http_get(h.server.http_addr, "/health").await;
    assert_eq!(status, 200);
    assert!(
        header(&headers, "content-type")
            .unwrap()
            .starts_with("application/json")
    );
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body, serde_json::json!({"status": "ok", "checks": {}}));
}

#[tokio::test]
async fn ready_checks_postgres_and_grpc() {
    let h = start().await;
    let (status, _, body) = http_get(h.server.http_addr, "/ready").await;
    assert_eq!(status, 200, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["status"], "ok");
    for check in ["postgres", "grpc"] {
        assert_eq!(body["checks"][check]["status"], "ok", "{body}");
        assert!(body["checks"][check]["latency_ms"].is_u64());
        assert!(body["checks"][check].get("message").is_none());
    }
}

#[tokio::test]
async fn ready_is_503_when_postgres_is_unreachable() {
    let db = migrated_db().await;
    let (proxy, dsn) = FaultProxy::for_postgres(db.url()).await;
    let mut config = Config::local(dsn.clone());
    config.pool.acquire_timeout = Duration::from_millis(200);
    let server = Server::start(config).await.unwrap();
    let (status, _, _) = http_get(server.http_addr, "/ready").await;
    assert_eq!(status, 200);

    proxy.cut();
    let started = Instant::now();
    let (status, _, body) = http_get(server.http_addr, "/ready").await;
    assert!(started.elapsed() < Duration::from_millis(1500));
    assert_eq!(status, 503, "{body}");
    let parsed: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(parsed["status"], "unhealthy");
    assert_eq!(parsed["checks"]["postgres"]["status"], "failed");
    assert!(parsed["checks"]["postgres"]["message"].is_string());
    assert_eq!(parsed["checks"]["grpc"]["status"], "ok");
    assert!(!body.contains(&dsn) && !body.contains("postgres://"));

    // Liveness does not look at dependencies.
    let (status, _, _) = http_get(server.http_addr, "/health").await;
    assert_eq!(status, 200);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn metrics_expose_the_catalogue_with_bounded_labels() {
    let mut h = start().await;
    validate(&mut h.client, &h.seed.chat_token).await.unwrap();
    assert_unauthenticated(&mut h.client, "garbage").await;
    let agent = v1::ValidateAgentRequest {
        agent_id: agent_id(&h.seed, "active").to_string(),
        org_id: h.seed.org_id.to_string(),
    };
    h.client.validate_agent(agent).await.unwrap();

    let (status, headers, body) = http_get(h.server.http_addr, "/metrics").await;
    assert_eq!(status, 200);
    assert!(header(&headers, "content-type").unwrap().contains("text"));
    for line in [
        "svc_auth_validate_token_duration_seconds_count{result=\"ok\"} 1",
        "svc_auth_validate_token_duration_seconds_count{result=\"unauthenticated\"} 1",
        "svc_auth_validate_agent_duration_seconds_count{result=\"ok\"} 1",
        "svc_auth_grpc_requests_total 3",
        "svc_process_up 1",
        "svc_auth_validate_token_duration_seconds_bucket{le=\"0.001\",result=\"ok\"}",
        "svc_auth_validate_token_duration_seconds_bucket{le=\"5.0\",result=\"ok\"}",
    ] {
        assert!(body.contains(line), "missing {line:?} in\n{body}");
    }
    assert!(body.contains("svc_db_query_duration_seconds_count "));
    assert!(!body.contains(&h.seed.org_id.to_string()));
    assert!(!body.contains(&h.seed.chat_token));
}

#[tokio::test]
async fn grpc_health_reports_the_auth_service_serving() {
    let h = start().await;
    let channel = channel(h.server.grpc_addr).await;
    let mut health = HealthClient::new(channel);
    for service in ["", "svc.auth.v1.AuthService"] {
        let response = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(response.status(), ServingStatus::Serving, "{service:?}");
    }
}

#[tokio::test]
async fn reflection_lists_the_auth_service() {
    let h = start().await;
    let channel = channel(h.server.grpc_addr).await;
    let mut reflection = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = reflection
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let response = responses.message().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else {
        panic!("unexpected reflection answer");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    assert!(
        names.contains(&"svc.auth.v1.AuthService".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"grpc.health.v1.Health".to_owned()),
        "{names:?}"
    );
}

#[tokio::test]
async fn shutdown_reports_not_serving_to_health_watchers_first_and_fails_ready() {
    let h = start().await;
    let server_http_addr = h.server.http_addr;
    let channel = channel(h.server.grpc_addr).await;
    let mut watch = HealthClient::new(channel)
        .watch(HealthCheckRequest {
            service: "svc.auth.v1.AuthService".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let first = watch.message().await.unwrap().unwrap();
    assert_eq!(first.status(), ServingStatus::Serving);

    let stopping = tokio::spawn(h.server.shutdown());
    let next = tokio::time::timeout(Duration::from_secs(5), watch.message())
        .await
        .expect("a status change")
        .unwrap()
        .unwrap();
    assert_eq!(next.status(), ServingStatus::NotServing);

    // The open watch holds the gRPC drain; meanwhile the ops listener still answers, 503.
    let (status, _, body) = http_get(server_http_addr, "/ready").await;
    assert_eq!(status, 503, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body["checks"]["shutdown"]["message"], "shutting down",
        "{body}"
    );
    drop(watch);
    tokio::time::timeout(Duration::from_secs(5), stopping)
        .await
        .expect("shutdown completes once the watcher leaves")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn grpc_connections_past_the_cap_wait_while_the_others_are_served() {
    // Two: the harness's own client holds one connection, `first` the other.
    let h = start_with(|config| config.grpc_listener.max_connections = 2).await;
    let check = |channel: tonic::transport::Channel| async move {
        HealthClient::new(channel)
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .map(|_| ())
    };
    let first = channel(h.server.grpc_addr).await;
    check(first.clone())
        .await
        .expect("the first connection is served");

    // A second connection is taken by the kernel's backlog, but nothing answers on it.
    let second = tonic::transport::Endpoint::from_shared(format!("http://{}", h.server.grpc_addr))
        .unwrap()
        .connect_lazy();
    let waiting = tokio::time::timeout(Duration::from_millis(500), check(second.clone())).await;
    assert!(waiting.is_err(), "a connection past the cap was served");
    check(first.clone()).await.expect("the first keeps working");

    // Once the first leaves, the second is served.
    drop(first);
    let served = tokio::time::timeout(Duration::from_secs(10), check(second)).await;
    assert!(matches!(served, Ok(Ok(()))), "{served:?}");
}
