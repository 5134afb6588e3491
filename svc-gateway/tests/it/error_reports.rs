//! Error reports with the real binary and a Sentry stand-in on loopback: with `SENTRY_DSN`, a
//! 5xx answer (a 501 for an unconfigured model included) becomes one event tagged with the `X-Request-ID` and `X-Trace-ID` the client got,
//! its route, status and error code, and carrying no token, key or message content; a 4xx
//! becomes none. Without a DSN nothing is sent, also on the way out.

use crate::otel::procs;
use crate::support;

use std::path::Path;
use std::time::Duration;

use http::Request;
use serde_json::json;
use support::{LIVE_MODEL, PROVIDER_KEY, Reply, Script, Upstream, World, auth, client, send};
use svc_testkit::sentry_sink::{SentrySink, tag};

use procs::{Child, GATEWAY_BIN, spawn, wait_healthy};

const WITHIN: Duration = Duration::from_secs(20);
const CONTENT: &str = "TOP-SECRET-CONTENT-4711";

/// The gateway binary in front of the fake auth service and an upstream answering 500, with
/// `SENTRY_DSN` set to `dsn`.
struct Stack {
    world: World,
    _upstream: Upstream,
    gateway: Child,
    port: u16,
}

impl Stack {
    async fn start(dsn: &str) -> Stack {
        let world = World::random();
        let auth_addr = auth::start(&world).await;
        let upstream = Upstream::start(Script::Json(
            500,
            json!({"error": {"message": "upstream exploded"}}),
            vec![],
        ))
        .await;
        let port = svc_testkit::free_port();
        let gateway = spawn(
            Path::new(GATEWAY_BIN),
            &[
                ("SVC_PORT", port.to_string()),
                ("SVC_AUTH_GRPC_ADDR", auth_addr.to_string()),
                ("SVC_AUTH_VALIDATE_TIMEOUT", "5s".to_owned()),
                ("SVC_PROVIDER_BASE_URL", upstream.base_url()),
                ("SVC_PROVIDER_API_KEY", PROVIDER_KEY.to_owned()),
                ("SVC_PROVIDER_MODELS", LIVE_MODEL.to_owned()),
                ("SVC_ENV", "staging".to_owned()),
                ("SENTRY_DSN", dsn.to_owned()),
            ],
        );
        assert!(wait_healthy(port).await, "the gateway serves");
        Stack {
            world,
            _upstream: upstream,
            gateway,
            port,
        }
    }

    async fn chat(&self, token: &str) -> Reply {
        self.chat_with(token, LIVE_MODEL).await
    }

    async fn chat_with(&self, token: &str, model: &str) -> Reply {
        let body = json!({"model": model, "messages": [{"role": "user", "content": CONTENT}]});
        let request = Request::post(format!(
            "http://127.0.0.1:{}/v1/chat/completions",
            self.port
        ))
        .header("authorization", format!("Bearer {token}"))
        .header("x-svc-agent-id", self.world.agent_id.to_string())
        .header("content-type", "application/json")
        .body(support::json_body(&body))
        .unwrap();
        send(&client(), request).await
    }
}

fn header(reply: &Reply, name: &str) -> String {
    reply.header(name).expect(name).to_owned()
}

#[tokio::test]
async fn a_5xx_is_reported_once_with_its_ids_and_a_4xx_is_not() {
    let sink = SentrySink::start().await;
    let stack = Stack::start(&sink.dsn()).await;

    // A 4xx first: events leave in order, so once the 5xx's event is in, a 4xx event would be.
    let wrong = format!("svc_pat_{}_{}", uuid::Uuid::new_v4(), "WRONGSECRETabcdef");
    assert_eq!(stack.chat(&wrong).await.status, 401);
    let failed = stack.chat(&stack.world.chat_token).await;
    assert!(failed.status.is_server_error(), "{failed:?}");
    let request_id = header(&failed, "x-request-id");

    let arrived = svc_testkit::eventually(WITHIN, || async { !sink.events().is_empty() }).await;
    assert!(arrived, "the 5xx was reported");
    let events = sink.events();
    assert_eq!(events.len(), 1, "one event, for the 5xx only: {events:#?}");
    let event = &events[0];
    assert_eq!(tag(event, "request_id"), Some(request_id.as_str()));
    assert_eq!(
        tag(event, "trace_id"),
        Some(header(&failed, "x-trace-id").as_str())
    );
    assert_eq!(
        event["contexts"]["trace"]["trace_id"],
        header(&failed, "x-trace-id")
    );
    assert_eq!(tag(event, "route"), Some("/v1/chat/completions"));
    assert_eq!(tag(event, "method"), Some("POST"));
    assert_eq!(tag(event, "status"), Some(failed.status.as_str()));
    assert_eq!(tag(event, "error_code"), Some(failed.code().as_str()));
    assert_eq!(event["environment"], "staging");
    assert!(event.get("request").is_none(), "{event:#}");

    let sent: Vec<u8> = sink.bodies().concat();
    let sent = String::from_utf8_lossy(&sent);
    for secret in [
        stack.world.chat_token.as_str(),
        "WRONGSECRETabcdef",
        PROVIDER_KEY,
        CONTENT,
        "upstream exploded",
        "Bearer",
    ] {
        assert!(!sent.contains(secret), "{secret} reached Sentry:\n{sent}");
    }
    drop(stack.gateway);
}

#[tokio::test]
async fn a_501_for_a_model_nobody_configured_is_reported_too() {
    let sink = SentrySink::start().await;
    let stack = Stack::start(&sink.dsn()).await;
    let refused = stack
        .chat_with(&stack.world.chat_token, "model-nobody-configured")
        .await;
    assert_eq!(refused.status, 501, "{refused:?}");
    let request_id = header(&refused, "x-request-id");
    let arrived =
        svc_testkit::eventually(WITHIN, || async { !sink.events_of(&request_id).is_empty() }).await;
    assert!(arrived, "the 501 was reported");
    let events = sink.events_of(&request_id);
    assert_eq!(tag(&events[0], "status"), Some("501"));
    assert_eq!(
        tag(&events[0], "error_code"),
        Some("PROVIDER_NOT_CONFIGURED")
    );
    drop(stack.gateway);
}

#[tokio::test]
async fn without_a_dsn_nothing_is_sent_even_on_the_way_out() {
    let sink = SentrySink::start().await;
    // An empty SENTRY_DSN is unset.
    let stack = Stack::start("").await;
    let failed = stack.chat(&stack.world.chat_token).await;
    assert!(failed.status.is_server_error(), "{failed:?}");
    // SIGTERM: a client, had one been started, would flush its queue on the way out.
    let code = stack.gateway.terminate(WITHIN).await;
    assert_eq!(code, Some(0), "the gateway stops on SIGTERM");
    assert!(sink.bodies().is_empty(), "{:?}", sink.bodies());
}
