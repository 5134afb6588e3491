//! A fault nobody handled: the provider panics mid-request. The client must get a 500
//! INTERNAL_ERROR envelope (not a dropped connection), the panic must be counted in the request
//! metrics, and the gateway must keep serving.

mod support;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::json;
use support::{Env, World, assert_envelope, config};
use svc_gateway::Gateway;
use svc_gateway::provider::{
    CallInfo, Provider, ProviderError, ProviderReply, Registry, mock::MockProvider,
};
use svc_gateway::request::ApiRequest;

const BOOM: &str = "svc-boom-1";

/// Answers like the mock, except for [`BOOM`], where it panics.
struct Panicking(MockProvider);

impl Provider for Panicking {
    fn name(&self) -> &'static str {
        "panicking"
    }

    fn complete<'a>(
        &'a self,
        request: &'a ApiRequest,
        call: &'a CallInfo,
    ) -> BoxFuture<'a, Result<ProviderReply, ProviderError>> {
        if request.model == BOOM {
            panic!("provider bug");
        }
        self.0.complete(request, call)
    }
}

#[tokio::test]
async fn a_panicking_handler_answers_500_and_is_counted() {
    let world = World::random();
    let auth_addr = support::auth::start(&world).await;
    let models = [BOOM, "svc-mock-1"].map(String::from);
    let gateway = Gateway::new(config(auth_addr, &[("SVC_LLM_MODE", "mock")]))
        .expect("gateway builds")
        .with_registry(Registry::new(
            Arc::new(Panicking(MockProvider::new())),
            models,
        ))
        .start()
        .await
        .expect("gateway starts");
    let env = Env {
        world,
        auth_addr,
        gateway,
        client: support::client(),
        upstream: None,
    };

    let reply = env
        .send_chat(json!({"model": BOOM, "messages": [{"role": "user", "content": "hi"}]}))
        .await;
    assert_envelope(&reply, 500, "INTERNAL_ERROR");
    assert!(
        !reply.body.windows(11).any(|w| w == b"provider bu"),
        "the panic message stays out of the body"
    );

    let metrics = String::from_utf8(env.get("/metrics").await.body.to_vec()).unwrap();
    assert!(
        metrics
            .lines()
            .any(|line| line.starts_with("svc_proxy_requests_total{")
                && line.contains("route=\"/v1/chat/completions\"")
                && line.contains("code=\"500\"")
                && line.ends_with(" 1")),
        "the panic is counted as a 500:\n{metrics}"
    );

    let after = env
        .send_chat(json!({"model": "svc-mock-1", "messages": [{"role": "user", "content": "hi"}]}))
        .await;
    assert_eq!(after.status, 200, "the gateway keeps serving");
}
