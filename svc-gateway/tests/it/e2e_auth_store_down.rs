//! The identity store going away under a running system, end to end: the auth server reaches
//! PostgreSQL through a proxy the test cuts. Protected routes must answer 503 (the auth plane
//! fails closed, never from a cache), the auth server's `/ready` must fail its postgres check,
//! and both must recover when the database returns.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use support::{assert_envelope, chat_body, client, config, send, start};
use svc_auth_server::seed::{self, SeedOptions};
use svc_auth_server::store::AgentStatus;
use svc_auth_server::store::postgres::PoolSettings;
use svc_auth_server::{Config as AuthConfig, Server};
use svc_testkit::{FaultProxy, TestDb};

const WITHIN: Duration = Duration::from_secs(15);

/// host:port of the test PostgreSQL server.
fn postgres_addr() -> SocketAddr {
    let url = svc_testkit::postgres_admin_url();
    let authority = url
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|authority| authority.rsplit('@').next())
        .unwrap_or("127.0.0.1:5432");
    let authority = if authority.contains(':') {
        authority.to_owned()
    } else {
        format!("{authority}:5432")
    };
    std::net::ToSocketAddrs::to_socket_addrs(&authority)
        .ok()
        .and_then(|mut addrs| addrs.next())
        .expect("the test PostgreSQL address resolves")
}

/// `url` with its host:port replaced by `addr`.
fn via(url: &str, addr: SocketAddr) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let userinfo = authority
        .rsplit_once('@')
        .map(|(user, _)| format!("{user}@"))
        .unwrap_or_default();
    format!("{scheme}://{userinfo}{addr}/{path}")
}

#[tokio::test]
async fn a_down_identity_store_fails_closed_and_recovers() {
    let db = TestDb::create().await;
    svc_auth_server::migrate::run(db.url(), &PoolSettings::default())
        .await
        .expect("migrate");
    let seeded = seed::run_with_config(
        &AuthConfig::local(db.url()),
        &SeedOptions {
            org_id: None,
            agent_statuses: vec![AgentStatus::Active],
        },
    )
    .await
    .expect("seed");

    let db_proxy = FaultProxy::start(postgres_addr()).await;
    let mut auth_config = AuthConfig::local(via(db.url(), db_proxy.addr()));
    auth_config.pool.connect_timeout = Duration::from_millis(300);
    auth_config.pool.acquire_timeout = Duration::from_millis(300);
    let auth = Server::start(auth_config)
        .await
        .expect("auth server starts");
    let gateway = start(config(auth.grpc_addr, &[("SVC_LLM_MODE", "mock")])).await;
    let http = client();

    let chat = || {
        http::Request::post(format!("{}/v1/chat/completions", gateway.url()))
            .header("authorization", format!("Bearer {}", seeded.chat_token))
            .header("x-svc-agent-id", seeded.agents[0].agent_id.to_string())
            .header("content-type", "application/json")
            .body(support::json_body(&chat_body("svc-mock-1")))
            .unwrap()
    };
    let ready = || {
        http::Request::get(format!("http://{}/ready", auth.http_addr))
            .body(http_body_util::Full::default())
            .unwrap()
    };

    // Warm: the token's digest is now remembered by the auth server.
    assert_eq!(send(&http, chat()).await.status, 200);
    assert_eq!(send(&http, ready()).await.status, 200);

    db_proxy.cut();
    let degraded = send(&http, chat()).await;
    assert_envelope(&degraded, 503, "SERVICE_DEGRADED");
    assert!(degraded.header("retry-after").is_some());
    let not_ready = send(&http, ready()).await;
    assert_eq!(not_ready.status, 503);
    let report = not_ready.json();
    assert_eq!(report["status"], "unhealthy");
    assert_eq!(report["checks"]["postgres"]["status"], "failed");
    assert_eq!(report["checks"]["grpc"]["status"], "ok");
    let message = report["checks"]["postgres"]["message"]
        .as_str()
        .expect("a failure message");
    assert!(
        !message.contains("postgres://") && !message.contains(db.name()),
        "no DSN in the readiness message: {message}"
    );

    db_proxy.restore();
    assert!(
        svc_testkit::eventually(WITHIN, || async { send(&http, chat()).await.status == 200 }).await,
        "chat recovers once the database is back"
    );
    assert_eq!(send(&http, ready()).await.status, 200);
}
