//! Mutual TLS from the gateway to the auth server, end to end: the real svc-auth-server serves
//! gRPC with `SVC_GRPC_TLS_CERT`, `SVC_GRPC_TLS_KEY` and `SVC_GRPC_TLS_CLIENT_CA`, and gateways
//! reach it at `https://localhost:<port>` or `https://127.0.0.1:<port>` (both in the server
//! certificate; by the address ValidateToken has a connection of its own) with
//! `SVC_AUTH_GRPC_TLS_*`. A gateway presenting the client certificate is served; one without
//! it, or one speaking plaintext, is refused at the handshake and fails closed.
//!
//! The certificates are svc-auth-server's test fixtures (`tests/fixtures/tls`, see its README).

use crate::support;

use support::{Reply, assert_envelope, chat_body, client, json_body, send};
use svc_auth_server::config::vars::Vars;
use svc_auth_server::seed::{self, SeedOptions, SeedOutput};
use svc_auth_server::store::AgentStatus;
use svc_auth_server::store::postgres::PoolSettings;
use svc_auth_server::{Config as AuthConfig, RunningServer, Server};
use svc_gateway::Running;
use svc_gateway::config::Config;
use svc_testkit::TestDb;

use svc_testkit::tls_fixture as fixture;

/// The auth server on a fresh database, gRPC over mutual TLS, with one seeded org.
struct MtlsAuth {
    _db: TestDb,
    server: RunningServer,
    seed: SeedOutput,
}

impl MtlsAuth {
    async fn start() -> MtlsAuth {
        let db = TestDb::create().await;
        svc_auth_server::migrate::run(db.url(), &PoolSettings::default())
            .await
            .expect("migrate");
        let config = AuthConfig::from_vars(&Vars::from_pairs([
            ("POSTGRES_DSN", db.url().to_owned()),
            ("SVC_BIND_ADDR", "127.0.0.1".to_owned()),
            ("SVC_PORT", "0".to_owned()),
            ("SVC_GRPC_PORT", "0".to_owned()),
            ("SVC_GRPC_TLS_CERT", fixture("server.pem")),
            ("SVC_GRPC_TLS_KEY", fixture("server.key")),
            ("SVC_GRPC_TLS_CLIENT_CA", fixture("ca.pem")),
        ]))
        .expect("valid auth server configuration");
        let server = Server::start(config.clone())
            .await
            .expect("auth server starts");
        let seed = seed::run_with_config(
            &config,
            &SeedOptions {
                org_id: None,
                agent_statuses: vec![AgentStatus::Active],
            },
        )
        .await
        .expect("seed");
        MtlsAuth {
            _db: db,
            server,
            seed,
        }
    }

    /// The address as the gateway names it: the certificate is for `localhost`.
    fn https_addr(&self) -> String {
        format!("https://localhost:{}", self.server.grpc_addr.port())
    }

    /// Both ways to name it: by `localhost` every call goes over the channel; by `127.0.0.1`
    /// (also in the certificate) ValidateToken has a TLS connection of its own.
    fn https_addrs(&self) -> [String; 2] {
        let port = self.server.grpc_addr.port();
        [self.https_addr(), format!("https://127.0.0.1:{port}")]
    }

    /// A gateway (mock provider, the shared Redis under a fresh prefix) with `auth` variables.
    async fn gateway(&self, auth: &[(&str, String)]) -> Running {
        let prefix = svc_testkit::redis_prefix();
        let vars = [
            ("SVC_LLM_MODE", "mock".to_owned()),
            ("SVC_AUTH_VALIDATE_TIMEOUT", "2s".to_owned()),
            ("REDIS_URL", svc_testkit::redis_url()),
            ("SVC_REDIS_KEY_PREFIX", prefix),
        ]
        .into_iter()
        .chain(auth.iter().map(|(k, v)| (*k, v.clone())));
        let mut config = Config::from_map(vars).expect("valid gateway configuration");
        config.listen = "127.0.0.1:0".parse().unwrap();
        support::start(config).await
    }

    async fn chat(&self, gateway: &Running) -> Reply {
        let request = http::Request::post(format!("{}/v1/chat/completions", gateway.url()))
            .header("authorization", format!("Bearer {}", self.seed.chat_token))
            .header("x-svc-agent-id", self.seed.agents[0].agent_id.to_string())
            .header("content-type", "application/json")
            .body(json_body(&chat_body("svc-mock-1")))
            .unwrap();
        send(&client(), request).await
    }
}

async fn ready(gateway: &Running) -> Reply {
    let request = http::Request::get(format!("{}/ready", gateway.url()))
        .body(http_body_util::Full::default())
        .unwrap();
    send(&client(), request).await
}

/// The readiness report's `auth_grpc` check.
fn auth_grpc_check(reply: &Reply) -> serde_json::Value {
    reply.json()["checks"]["auth_grpc"].clone()
}

/// Asserts the gateway failed closed: 503 SERVICE_DEGRADED on chat, `auth_grpc` failing on
/// `/ready` with a fixed phrase (no address, no TLS error text).
async fn assert_refused(auth: &MtlsAuth, gateway: &Running) {
    let reply = auth.chat(gateway).await;
    assert_envelope(&reply, 503, "SERVICE_DEGRADED");
    assert!(reply.header("retry-after").is_some());

    let report = ready(gateway).await;
    assert_eq!(report.status, 503, "{:?}", report.json());
    assert_eq!(report.json()["status"], "unhealthy");
    let check = auth_grpc_check(&report);
    assert_eq!(check["status"], "failed", "{check}");
    let message = check["message"].as_str().expect("a failure message");
    assert!(
        !message.contains("localhost") && !message.contains(&auth.server.grpc_addr.to_string()),
        "{message}"
    );
}

#[tokio::test]
async fn a_gateway_presenting_its_client_certificate_is_served_over_mutual_tls() {
    let auth = MtlsAuth::start().await;
    for addr in auth.https_addrs() {
        let gateway = auth
            .gateway(&[
                ("SVC_AUTH_GRPC_ADDR", addr),
                ("SVC_AUTH_GRPC_TLS_CA", fixture("ca.pem")),
                ("SVC_AUTH_GRPC_TLS_CERT", fixture("client.pem")),
                ("SVC_AUTH_GRPC_TLS_KEY", fixture("client.key")),
            ])
            .await;
        assert_served(&auth, &gateway).await;
    }
}

async fn assert_served(auth: &MtlsAuth, gateway: &Running) {
    let reply = auth.chat(gateway).await;
    assert_eq!(
        reply.status,
        200,
        "{:?}",
        String::from_utf8_lossy(&reply.body)
    );
    let json = reply.json();
    assert_eq!(json["object"], "chat.completion");
    assert!(json["choices"][0]["message"]["content"].is_string());

    let report = ready(gateway).await;
    assert_eq!(report.status, 200, "{:?}", report.json());
    assert_eq!(report.json()["status"], "ok");
    let check = auth_grpc_check(&report);
    assert_eq!(check["status"], "ok", "{check}");
    assert!(check.get("message").is_none(), "{check}");
}

#[tokio::test]
async fn a_gateway_without_a_client_certificate_is_refused_at_the_handshake() {
    let auth = MtlsAuth::start().await;
    for addr in auth.https_addrs() {
        let gateway = auth
            .gateway(&[
                ("SVC_AUTH_GRPC_ADDR", addr),
                ("SVC_AUTH_GRPC_TLS_CA", fixture("ca.pem")),
            ])
            .await;
        assert_refused(&auth, &gateway).await;
    }
}

#[tokio::test]
async fn a_gateway_speaking_plaintext_to_the_tls_port_is_refused() {
    let auth = MtlsAuth::start().await;
    let gateway = auth
        .gateway(&[(
            "SVC_AUTH_GRPC_ADDR",
            format!("http://127.0.0.1:{}", auth.server.grpc_addr.port()),
        )])
        .await;
    assert_refused(&auth, &gateway).await;
}
