//! Shared test support: a gateway in process on a real socket, in front of a loopback auth
//! service and, for live-provider tests, a fake upstream.
#![allow(dead_code, unused_imports, unreachable_pub)]

pub mod auth;
pub mod client;
pub mod logs;
pub mod stack;
pub mod upstream;

use std::net::SocketAddr;

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use svc_gateway::config::Config;
use svc_gateway::{Gateway, Running};

pub use auth as fake_auth;
pub use auth::World;
pub use client::{HttpClient, Reply, client, client_from, next_data, open, send};
pub use upstream::{Reported, Script, Upstream, chunk, completion};

/// The provider key the live tests configure; it must reach the upstream and nothing else.
pub const PROVIDER_KEY: &str = "sk-provider-secret-0123456789abcdef";
/// The model the live tests register.
pub const LIVE_MODEL: &str = "gpt-test";

/// A configuration from a map, listening on an ephemeral loopback port.
pub fn config(auth_addr: SocketAddr, extra: &[(&str, &str)]) -> Config {
    let auth = auth_addr.to_string();
    let vars = [
        ("SVC_AUTH_GRPC_ADDR", auth.as_str()),
        ("SVC_AUTH_VALIDATE_TIMEOUT", "2s"),
    ]
    .into_iter()
    .chain(extra.iter().copied());
    let mut config = Config::from_map(vars).expect("valid test configuration");
    config.listen = "127.0.0.1:0".parse().unwrap();
    config
}

/// A running gateway with its world and, in live mode, its upstream.
pub struct Env {
    pub world: World,
    pub auth_addr: SocketAddr,
    pub gateway: Running,
    pub client: HttpClient,
    pub upstream: Option<Upstream>,
}

impl Env {
    /// The mock provider, plus `extra` variables.
    pub async fn mock(extra: &[(&str, &str)]) -> Env {
        let world = World::random();
        let auth_addr = auth::start(&world).await;
        let gateway = start(config(auth_addr, extra)).await;
        Env {
            world,
            auth_addr,
            gateway,
            client: client(),
            upstream: None,
        }
    }

    /// A live provider pointed at a fake upstream answering `script`.
    pub async fn live(script: Script, extra: &[(&str, &str)]) -> Env {
        let upstream = Upstream::start(script).await;
        let base = upstream.base_url();
        let mut vars = vec![
            ("SVC_PROVIDER_BASE_URL", base.as_str()),
            ("SVC_PROVIDER_API_KEY", PROVIDER_KEY),
            ("SVC_PROVIDER_MODELS", LIVE_MODEL),
        ];
        vars.extend_from_slice(extra);
        let world = World::random();
        let auth_addr = auth::start(&world).await;
        let gateway = start(config(auth_addr, &vars)).await;
        Env {
            world,
            auth_addr,
            gateway,
            client: client(),
            upstream: Some(upstream),
        }
    }

    pub fn upstream(&self) -> &Upstream {
        self.upstream.as_ref().expect("a live environment")
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.gateway.url())
    }

    /// An authenticated chat request with `body`.
    pub fn chat(&self, body: &serde_json::Value) -> http::request::Builder {
        Request::post(self.url("/v1/chat/completions"))
            .header("authorization", format!("Bearer {}", self.world.chat_token))
            .header("x-svc-agent-id", self.world.agent_id.to_string())
            .header("content-type", "application/json")
            .header("content-length", body.to_string().len())
    }

    pub async fn send_chat(&self, body: serde_json::Value) -> Reply {
        send(
            &self.client,
            self.chat(&body).body(json_body(&body)).unwrap(),
        )
        .await
    }

    pub async fn get(&self, path: &str) -> Reply {
        send(
            &self.client,
            Request::get(self.url(path)).body(Full::default()).unwrap(),
        )
        .await
    }
}

pub fn json_body(body: &serde_json::Value) -> Full<Bytes> {
    Full::new(Bytes::from(body.to_string()))
}

/// A minimal valid chat body for `model`.
pub fn chat_body(model: &str) -> serde_json::Value {
    serde_json::json!({"model": model, "messages": [{"role": "user", "content": "Say hello."}]})
}

pub async fn start(config: Config) -> Running {
    Gateway::new(config)
        .expect("gateway builds")
        .start()
        .await
        .expect("gateway starts")
}

/// Asserts the envelope shape and the three headers every error carries.
pub fn assert_envelope(reply: &Reply, status: u16, code: &str) {
    assert_eq!(
        reply.status.as_u16(),
        status,
        "status of {code}: {:?}",
        String::from_utf8_lossy(&reply.body)
    );
    let json = reply.json();
    let error = &json["error"];
    assert_eq!(error["code"], code);
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "message"
    );
    let request_id = reply.header("x-request-id").expect("X-Request-ID");
    assert_eq!(error["request_id"], request_id);
    assert!(uuid::Uuid::parse_str(request_id).is_ok());
    let timestamp = error["timestamp"].as_str().expect("timestamp");
    assert!(chrono::DateTime::parse_from_rfc3339(timestamp).is_ok());
    assert!(
        reply.header("x-trace-id").is_some_and(|t| !t.is_empty()),
        "X-Trace-ID"
    );
    assert!(
        reply
            .header("x-response-time")
            .and_then(|t| t.parse::<u64>().ok())
            .is_some(),
        "X-Response-Time"
    );
    assert!(
        reply
            .header("content-type")
            .is_some_and(|c| c.starts_with("application/json"))
    );
}
