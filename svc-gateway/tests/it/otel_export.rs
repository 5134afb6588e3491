//! OTLP trace export with the real binaries: the gateway's span of a request carries the
//! `X-Trace-ID` it answers with, the auth server's spans continue that trace as children of the
//! gateway's request span, a ratio of 0 exports nothing for a request that starts a trace (in
//! the gateway, and in the auth server, which follows the gateway's decision), an `https://`
//! collector is reached over TLS trusting `OTEL_EXPORTER_OTLP_CERTIFICATE`, and bad `OTEL_*`
//! values exit 2.

use crate::otel::collector;
use crate::otel::procs;
use crate::support;

use std::time::Duration;

use http::Request;
use serde_json::json;
use svc_auth_server::seed::{self, SeedOptions, SeedOutput};
use svc_auth_server::store::AgentStatus;
use svc_auth_server::store::postgres::PoolSettings;
use svc_testkit::TestDb;

use collector::Collector;
use procs::{Child, GATEWAY_BIN, auth_bin, spawn, wait_healthy};
use support::{Reply, client, json_body, send};

const WITHIN: Duration = Duration::from_secs(20);
const MOCK_MODEL: &str = "svc-mock-1";

/// The auth server binary on a fresh migrated database with one seeded org, and a gateway
/// binary in front of it; both export to `collector` when given.
struct Binaries {
    _db: TestDb,
    seed: SeedOutput,
    _auth: Child,
    _gateway: Child,
    gateway_port: u16,
}

impl Binaries {
    async fn start(auth_otel: &[(&str, String)], gateway_otel: &[(&str, String)]) -> Binaries {
        let db = TestDb::create().await;
        svc_auth_server::migrate::run(db.url(), &PoolSettings::default())
            .await
            .expect("migrate");
        let seed = seed::run_with_config(
            &svc_auth_server::Config::local(db.url()),
            &SeedOptions {
                org_id: None,
                agent_statuses: vec![AgentStatus::Active],
            },
        )
        .await
        .expect("seed");

        let (auth_http, auth_grpc) = (svc_testkit::free_port(), svc_testkit::free_port());
        let mut vars = vec![
            ("POSTGRES_DSN", db.url().to_owned()),
            ("SVC_BIND_ADDR", "127.0.0.1".to_owned()),
            ("SVC_PORT", auth_http.to_string()),
            ("SVC_GRPC_PORT", auth_grpc.to_string()),
        ];
        vars.extend_from_slice(auth_otel);
        let auth = spawn(&auth_bin(), &vars);
        assert!(wait_healthy(auth_http).await, "the auth server serves");

        let gateway_port = svc_testkit::free_port();
        let mut vars = vec![
            ("SVC_PORT", gateway_port.to_string()),
            ("SVC_AUTH_GRPC_ADDR", format!("127.0.0.1:{auth_grpc}")),
            ("SVC_AUTH_VALIDATE_TIMEOUT", "5s".to_owned()),
            ("SVC_LLM_MODE", "mock".to_owned()),
        ];
        vars.extend_from_slice(gateway_otel);
        let gateway = spawn(std::path::Path::new(GATEWAY_BIN), &vars);
        assert!(wait_healthy(gateway_port).await, "the gateway serves");
        Binaries {
            _db: db,
            seed,
            _auth: auth,
            _gateway: gateway,
            gateway_port,
        }
    }

    /// One chat completion, with `traceparent` when given.
    async fn chat(&self, traceparent: Option<&str>) -> Reply {
        let mut request = Request::post(format!(
            "http://127.0.0.1:{}/v1/chat/completions",
            self.gateway_port
        ))
        .header("authorization", format!("Bearer {}", self.seed.chat_token))
        .header("x-svc-agent-id", self.seed.agents[0].agent_id.to_string())
        .header("content-type", "application/json");
        if let Some(traceparent) = traceparent {
            request = request.header("traceparent", traceparent);
        }
        let body = json!({"model": MOCK_MODEL, "messages": [{"role": "user", "content": "hi"}]});
        let reply = send(&client(), request.body(json_body(&body)).unwrap()).await;
        assert_eq!(reply.status, 200, "{:?}", reply.body);
        reply
    }
}

/// The `OTEL_*` variables exporting to `collector` as `service` with `ratio`; batches leave
/// every 100 ms so the test waits little.
fn otel(collector: &Collector, service: &str, ratio: &str) -> Vec<(&'static str, String)> {
    otel_at(collector.addr.to_string(), service, ratio)
}

fn otel_at(endpoint: String, service: &str, ratio: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
        ("OTEL_SAMPLE_RATIO", ratio.to_owned()),
        ("SVC_SERVICE_NAME", service.to_owned()),
        ("SVC_ENV", "staging".to_owned()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
    ]
}

fn trace_id(reply: &Reply) -> String {
    reply
        .header("x-trace-id")
        .expect("X-Trace-ID on every response")
        .to_owned()
}

#[tokio::test]
async fn the_gateway_span_carries_x_trace_id_and_the_auth_server_continues_the_trace() {
    let collector = Collector::start().await;
    let stack = Binaries::start(
        &otel(&collector, "svc-auth-server", "1"),
        &otel(&collector, "svc-gateway", "1"),
    )
    .await;

    let reply = stack.chat(None).await;
    let trace = trace_id(&reply);
    let both = svc_testkit::eventually(WITHIN, || async {
        !collector.in_trace("svc-gateway", &trace).is_empty()
            && !collector.in_trace("svc-auth-server", &trace).is_empty()
    })
    .await;
    assert!(both, "spans of {trace}: {:#?}", collector.spans());

    let gateway = collector.in_trace("svc-gateway", &trace);
    let request = gateway
        .iter()
        .find(|s| s.name == "request")
        .expect("the request span");
    assert_eq!(request.attribute("route"), Some("/v1/chat/completions"));
    assert_eq!(request.attribute("method"), Some("POST"));
    assert_eq!(request.attribute("status"), Some("200"));
    assert_eq!(request.environment, "staging");
    let auth = collector.in_trace("svc-auth-server", &trace);
    let methods: Vec<_> = auth.iter().filter_map(|s| s.attribute("method")).collect();
    // One auth round trip per request: ValidateToken answers for the agent too.
    assert_eq!(methods, ["ValidateToken"], "{auth:#?}");
    assert_children_of_request(&auth, request);
    for span in collector.spans() {
        assert!(
            !span
                .attributes
                .iter()
                .any(|(_, v)| v.contains(&stack.seed.chat_token)),
            "a token reached an exported span: {span:?}"
        );
    }
}

#[tokio::test]
async fn an_https_collector_is_reached_over_tls_trusting_the_configured_ca() {
    let collector = Collector::start_tls().await;
    let tls = |service| {
        let mut vars = otel_at(format!("https://{}", collector.addr), service, "1");
        vars.push((
            "OTEL_EXPORTER_OTLP_CERTIFICATE",
            svc_testkit::tls_fixture("ca.pem"),
        ));
        vars
    };
    let stack = Binaries::start(&tls("svc-auth-server"), &tls("svc-gateway")).await;

    let trace = trace_id(&stack.chat(None).await);
    let both = svc_testkit::eventually(WITHIN, || async {
        !collector.in_trace("svc-gateway", &trace).is_empty()
            && rpc_methods(&collector.in_trace("svc-auth-server", &trace)) == 1
    })
    .await;
    assert!(both, "spans of {trace}: {:#?}", collector.spans());
}

#[tokio::test]
async fn ratio_zero_exports_no_trace_started_here_but_follows_a_sampled_caller() {
    let collector = Collector::start().await;
    // The auth server would keep every trace it starts: whatever it drops, it drops because
    // the gateway's traceparent said the gateway had dropped it. The gateway is told to trust
    // its callers' sampling (by default it does not: see the next test).
    let mut gateway_otel = otel(&collector, "svc-gateway", "0");
    gateway_otel.push(("SVC_TRUST_INBOUND_SAMPLING", "true".to_owned()));
    let stack = Binaries::start(&otel(&collector, "svc-auth-server", "1"), &gateway_otel).await;

    let unsampled = trace_id(&stack.chat(None).await);
    // A caller that sampled its trace: parent-based sampling keeps it whatever the ratio.
    let caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let sampled = trace_id(&stack.chat(Some(caller)).await);
    assert_eq!(sampled, "0af7651916cd43dd8448eb211c80319c");

    let followed = svc_testkit::eventually(WITHIN, || async {
        // The request span ends with the answer's body, after the spans inside it.
        (collector.in_trace("svc-gateway", &sampled).iter()).any(|s| s.name == "request")
            && rpc_methods(&collector.in_trace("svc-auth-server", &sampled)) == 1
    })
    .await;
    assert!(
        followed,
        "the sampled caller's trace is exported by both: {:#?}",
        collector.spans()
    );
    // Spans leave each service in the order they end: the earlier request's would be in by
    // now, from either service.
    assert!(
        collector.spans().iter().all(|s| s.trace_id != unsampled),
        "{:#?}",
        collector.spans()
    );
    let gateway = collector.in_trace("svc-gateway", &sampled);
    let request = gateway
        .iter()
        .find(|s| s.name == "request")
        .expect("the request span");
    assert_eq!(request.parent_span_id, "b7ad6b7169203331");
    assert_children_of_request(&collector.in_trace("svc-auth-server", &sampled), request);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_caller_cannot_force_export_but_keeps_its_trace_id() {
    let collector = Collector::start().await;
    let stack = Binaries::start(
        &otel(&collector, "svc-auth-server", "1"),
        &otel(&collector, "svc-gateway", "0"),
    )
    .await;
    // An internet client asking for its trace to be sampled everywhere.
    let caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let forced = trace_id(&stack.chat(Some(caller)).await);
    assert_eq!(
        forced, "4bf92f3577b34da6a3ce929d0e0e4736",
        "the client's trace id is kept"
    );
    // A later request with export on both sides proves the pipeline flushes: once its spans
    // are in, the earlier request's would be too, had anything exported them.
    let sampled_stack = Binaries::start(
        &otel(&collector, "svc-auth-server", "1"),
        &otel(&collector, "svc-gateway", "1"),
    )
    .await;
    let marker = trace_id(&sampled_stack.chat(None).await);
    let flushed = svc_testkit::eventually(WITHIN, || async {
        !collector.in_trace("svc-gateway", &marker).is_empty()
    })
    .await;
    assert!(
        flushed,
        "the marker trace arrived: {:#?}",
        collector.spans()
    );
    assert!(
        collector.spans().iter().all(|s| s.trace_id != forced),
        "ratio 0 and an untrusted caller: nothing of its trace is exported: {:#?}",
        collector.spans()
    );
}

/// How many of `spans` are auth calls (the auth server's spans carrying a `method`).
fn rpc_methods(spans: &[collector::Exported]) -> usize {
    spans
        .iter()
        .filter(|s| s.attribute("method").is_some())
        .count()
}

/// Each auth call's span has the gateway's exported request span as its parent.
fn assert_children_of_request(auth: &[collector::Exported], request: &collector::Exported) {
    let calls: Vec<_> = auth
        .iter()
        .filter(|s| s.attribute("method").is_some())
        .collect();
    assert!(!calls.is_empty(), "{auth:#?}");
    assert_eq!(request.span_id.len(), 16, "{request:?}");
    for call in calls {
        assert_eq!(call.parent_span_id, request.span_id, "{call:#?}");
    }
}

#[test]
fn bad_otel_values_exit_2_naming_the_variable() {
    let gateway = std::path::Path::new(GATEWAY_BIN);
    let gateway_base = [("SVC_AUTH_GRPC_ADDR", "127.0.0.1:9091")];
    let auth = auth_bin();
    let auth_base = [("POSTGRES_DSN", "postgres://svc@127.0.0.1:5432/svc")];
    let https = ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://127.0.0.1:4317");
    let plaintext = ("OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4317");
    let (ca, key) = (
        svc_testkit::tls_fixture("ca.pem"),
        svc_testkit::tls_fixture("server.key"),
    );
    let certificate = "OTEL_EXPORTER_OTLP_CERTIFICATE";
    for (variable, value, with) in [
        ("OTEL_SAMPLE_RATIO", "1.5", None),
        ("OTEL_SAMPLE_RATIO", "often", None),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector", None),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://collector:4317", None),
        // The CA file must exist, hold certificates, and go with an https:// collector.
        (certificate, "/nonexistent/ca.pem", Some(https)),
        (certificate, key.as_str(), Some(https)),
        (certificate, ca.as_str(), Some(plaintext)),
    ] {
        for (bin, base) in [(gateway, &gateway_base), (auth.as_path(), &auth_base)] {
            let mut vars = base.to_vec();
            vars.extend(with);
            vars.push((variable, value));
            let (code, stderr) = procs::run(bin, &vars);
            assert_eq!(code, Some(2), "{bin:?} {variable}={value}: {stderr}");
            assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
            assert!(stderr.contains(variable), "{stderr}");
        }
    }
}
