//! Trace context crosses the gateway: the trace id the client sees in `X-Trace-ID` is the one
//! the auth service sees in the `traceparent` of ValidateToken and ValidateAgent, and the one
//! the provider sees in its `traceparent`; the provider also gets the `X-Request-ID`.

use crate::support;

use http::Request;
use support::fake_auth::{self, Calls};
use support::{
    HttpClient, LIVE_MODEL, PROVIDER_KEY, Reply, Script, Upstream, World, chat_body, client,
    completion, config, json_body, send, start,
};
use svc_gateway::Running;
use svc_tower::request_id::TraceId;

/// A client's `traceparent`, as an instrumented caller would send it.
const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_PARENT: &str = "00f067aa0ba902b7";

/// A live gateway over a recording auth stand-in and a fake upstream.
struct Traced {
    world: World,
    auth_calls: Calls,
    upstream: Upstream,
    gateway: Running,
    client: HttpClient,
}

impl Traced {
    async fn start() -> Traced {
        let world = World::random();
        let (auth_addr, auth_calls) = fake_auth::start_recording(&world).await;
        let upstream = Upstream::start(Script::Json(200, completion("Hello."), vec![])).await;
        let base = upstream.base_url();
        let gateway = start(config(
            auth_addr,
            &[
                ("SVC_PROVIDER_BASE_URL", &base),
                ("SVC_PROVIDER_API_KEY", PROVIDER_KEY),
                ("SVC_PROVIDER_MODELS", LIVE_MODEL),
            ],
        ))
        .await;
        Traced {
            world,
            auth_calls,
            upstream,
            gateway,
            client: client(),
        }
    }

    async fn chat(&self, extra: &[(&str, &str)]) -> Reply {
        let body = chat_body(LIVE_MODEL);
        let mut request = Request::post(format!("{}/v1/chat/completions", self.gateway.url()))
            .header("authorization", format!("Bearer {}", self.world.chat_token))
            .header("x-svc-agent-id", self.world.agent_id.to_string())
            .header("content-type", "application/json");
        for (name, value) in extra {
            request = request.header(*name, *value);
        }
        let reply = send(&self.client, request.body(json_body(&body)).unwrap()).await;
        assert_eq!(
            reply.status,
            200,
            "{:?}",
            String::from_utf8_lossy(&reply.body)
        );
        reply
    }

    /// The upstream's `traceparent` and `x-request-id` of its only call.
    fn upstream_headers(&self) -> (String, String) {
        let seen = self.upstream.seen();
        assert_eq!(seen.len(), 1, "one provider call");
        let header = |name: &str| {
            seen[0]
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_else(|| panic!("the provider got no {name}"))
                .to_owned()
        };
        (header("traceparent"), header("x-request-id"))
    }

    /// The `traceparent` of each validation call, by method.
    fn auth_traceparents(&self) -> Vec<(&'static str, String)> {
        self.auth_calls
            .lock()
            .unwrap()
            .iter()
            .map(|(method, parent)| {
                let parent = parent
                    .clone()
                    .unwrap_or_else(|| panic!("{method} carried no traceparent"));
                (*method, parent)
            })
            .collect()
    }
}

/// The trace id of a `traceparent`, which must be valid W3C with a sampled flag.
fn trace_of(traceparent: &str) -> String {
    let trace = TraceId::from_traceparent(traceparent.as_bytes())
        .unwrap_or_else(|| panic!("not a valid traceparent: {traceparent}"));
    assert!(traceparent.ends_with("-01"), "{traceparent}");
    trace.to_string()
}

/// The parent (span) id of a valid `traceparent`.
fn parent_of(traceparent: &str) -> &str {
    &traceparent[36..52]
}

#[tokio::test]
async fn the_provider_and_the_auth_service_see_the_trace_the_client_sees() {
    let env = Traced::start().await;
    let reply = env.chat(&[]).await;
    let trace = reply.header("x-trace-id").expect("X-Trace-ID").to_owned();
    let request_id = reply.header("x-request-id").expect("X-Request-ID");

    let (traceparent, upstream_request_id) = env.upstream_headers();
    assert_eq!(trace_of(&traceparent), trace);
    assert_eq!(upstream_request_id, request_id);

    let calls = env.auth_traceparents();
    let methods: Vec<&str> = calls.iter().map(|(method, _)| *method).collect();
    assert_eq!(methods, ["ValidateToken", "ValidateAgent"]);
    for (method, parent) in &calls {
        assert_eq!(trace_of(parent), trace, "{method}");
    }
    // One trace, three downstream calls, three distinct parent ids.
    let mut parents = vec![parent_of(&traceparent)];
    parents.extend(calls.iter().map(|(_, parent)| parent_of(parent)));
    parents.sort_unstable();
    parents.dedup();
    assert_eq!(parents.len(), 3, "{parents:?}");
}

#[tokio::test]
async fn an_inbound_traceparent_is_kept_end_to_end() {
    let env = Traced::start().await;
    let inbound = format!("00-{CLIENT_TRACE}-{CLIENT_PARENT}-01");
    let request_id = uuid::Uuid::new_v4().to_string();
    let reply = env
        .chat(&[("traceparent", &inbound), ("x-request-id", &request_id)])
        .await;
    assert_eq!(reply.header("x-trace-id"), Some(CLIENT_TRACE));
    assert_eq!(reply.header("x-request-id"), Some(request_id.as_str()));

    let (traceparent, upstream_request_id) = env.upstream_headers();
    assert_eq!(trace_of(&traceparent), CLIENT_TRACE);
    assert_eq!(upstream_request_id, request_id);
    // The gateway is a hop of its own: the client's span is not passed off as ours.
    assert_ne!(parent_of(&traceparent), CLIENT_PARENT);

    let calls = env.auth_traceparents();
    assert_eq!(calls.len(), 2, "{calls:?}");
    for (method, parent) in &calls {
        assert_eq!(trace_of(parent), CLIENT_TRACE, "{method}");
        assert_ne!(parent_of(parent), CLIENT_PARENT, "{method}");
    }
}

#[tokio::test]
async fn a_malformed_inbound_traceparent_starts_a_new_trace_downstream_too() {
    let env = Traced::start().await;
    // Upper-case hex is invalid in W3C trace context.
    let inbound = format!("00-{}-{CLIENT_PARENT}-01", CLIENT_TRACE.to_uppercase());
    let reply = env.chat(&[("traceparent", &inbound)]).await;
    let trace = reply.header("x-trace-id").expect("X-Trace-ID").to_owned();
    assert_ne!(trace, CLIENT_TRACE);

    let (traceparent, _) = env.upstream_headers();
    assert_eq!(trace_of(&traceparent), trace);
    for (method, parent) in env.auth_traceparents() {
        assert_eq!(trace_of(&parent), trace, "{method}");
    }
}
