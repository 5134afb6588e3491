//! A fault nobody handled: the provider panics mid-request. The client must get a 500
//! INTERNAL_ERROR envelope (not a dropped connection), the panic must be counted in the request
//! metrics and, with `SENTRY_DSN`, reported once with the request's ids and without its
//! message, and the gateway must keep serving.

use crate::support;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::json;
use support::{Env, World, assert_envelope, config};
use svc_gateway::Gateway;
use svc_gateway::provider::{
    CallInfo, Provider, ProviderError, ProviderReply, Registry, mock::MockProvider,
};
use svc_gateway::request::ApiRequest;
use svc_testkit::sentry_sink::{SentrySink, tag};

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

/// The gateway in process with the [`Panicking`] provider, plus `extra` variables.
async fn panicking_gateway(extra: &[(&str, &str)]) -> Env {
    let world = World::random();
    let auth_addr = support::auth::start(&world).await;
    let models = [BOOM, "svc-mock-1"].map(String::from);
    let mut vars = vec![("SVC_LLM_MODE", "mock")];
    vars.extend_from_slice(extra);
    let gateway = Gateway::new(config(auth_addr, &vars))
        .expect("gateway builds")
        .with_registry(Registry::new(
            Arc::new(Panicking(MockProvider::new())),
            models,
        ))
        .start()
        .await
        .expect("gateway starts");
    Env {
        world,
        auth_addr,
        gateway,
        client: support::client(),
        upstream: None,
    }
}

#[tokio::test]
async fn a_panicking_handler_answers_500_and_is_counted() {
    let env = panicking_gateway(&[]).await;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_is_reported_once_with_the_request_ids_and_without_its_message() {
    let sink = SentrySink::start().await;
    let dsn = sink.dsn();
    // Process-wide, as in the binary: the panic hook reports any panic of this test process,
    // so only the events tagged with this request's id are looked at.
    let reports = svc_runtime::error_report::init(
        Some(&dsn),
        "svc-gateway@test",
        svc_runtime::config::Environment::Staging,
    )
    .expect("a DSN starts the client");
    let env = panicking_gateway(&[("SENTRY_DSN", &dsn)]).await;

    let reply = env
        .send_chat(json!({"model": BOOM, "messages": [{"role": "user", "content": "hi"}]}))
        .await;
    assert_envelope(&reply, 500, "INTERNAL_ERROR");
    let request_id = reply
        .header("x-request-id")
        .expect("X-Request-ID")
        .to_owned();
    // Flushing is bounded; after it, whatever this request caused has arrived.
    reports.shutdown().await;

    let events = sink.events_of(&request_id);
    assert_eq!(events.len(), 1, "one event for the panic: {events:#?}");
    let event = &events[0];
    assert_eq!(
        tag(event, "trace_id"),
        reply.header("x-trace-id"),
        "{event:#}"
    );
    assert_eq!(tag(event, "route"), Some("/v1/chat/completions"));
    assert_eq!(tag(event, "status"), Some("500"));
    assert_eq!(tag(event, "error_code"), Some("INTERNAL_ERROR"));
    assert_eq!(
        event["exception"]["values"][0]["type"], "panic",
        "{event:#}"
    );
    let sent = String::from_utf8_lossy(&sink.bodies().concat()).into_owned();
    assert!(
        !sent.contains("provider bug"),
        "the panic message stays home"
    );
    assert!(!sent.contains(&env.world.chat_token), "no token");
}
