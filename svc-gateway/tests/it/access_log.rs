//! The access log of the `svc-gateway` binary, read from its own output: one line per
//! request, refusals included, with the route template, status and envelope code; a
//! provider call's line names the org, agent, token id, model, provider and upstream status;
//! no token, key, raw path or message content ever appears; `SVC_ACCESS_LOG=false` writes
//! none.

use crate::support;

use http::Request;
use http_body_util::Full;
use serde_json::{Value, json};
use support::logs::LoggedGateway;
use support::{
    LIVE_MODEL, PROVIDER_KEY, Reply, Script, Upstream, World, auth, chunk, client, completion,
    json_body, send,
};

/// The body limit the gateway runs with: small, so a 413 is cheap to provoke.
const MAX_BODY: usize = 4096;
/// Requests per minute per org: the test's calls reach it on purpose.
const RPM: u32 = 4;
/// What no line may carry.
const SECRET_CONTENT: &str = "TOP-SECRET-CONTENT-0815";
const SECRET_PATH: &str = "/v1/no-such-route-SECRETPATH";

/// The gateway binary in live mode in front of `world`'s auth and a fake upstream.
async fn gateway(world: &World, extra: &[(&str, &str)]) -> (LoggedGateway, Upstream) {
    let script = Script::Json(200, completion("fine"), vec![]);
    gateway_with(world, script, extra).await
}

/// As [`gateway`], the upstream answering `script`.
async fn gateway_with(
    world: &World,
    script: Script,
    extra: &[(&str, &str)],
) -> (LoggedGateway, Upstream) {
    let auth_addr = auth::start(world).await.to_string();
    let upstream = Upstream::start(script).await;
    let base_url = upstream.base_url();
    let (redis, prefix) = (svc_testkit::redis_url(), svc_testkit::redis_prefix());
    let (max_body, rpm) = (MAX_BODY.to_string(), RPM.to_string());
    let mut vars = vec![
        ("SVC_AUTH_GRPC_ADDR", auth_addr.as_str()),
        ("SVC_AUTH_VALIDATE_TIMEOUT", "2s"),
        ("SVC_AUTH_REFUSAL_DELAY", "0s"),
        ("SVC_PROVIDER_BASE_URL", base_url.as_str()),
        ("SVC_PROVIDER_API_KEY", PROVIDER_KEY),
        ("SVC_PROVIDER_MODELS", LIVE_MODEL),
        ("SVC_MAX_REQUEST_BODY_BYTES", max_body.as_str()),
        ("SVC_RATE_LIMIT_RPM", rpm.as_str()),
        ("REDIS_URL", redis.as_str()),
        ("SVC_REDIS_KEY_PREFIX", prefix.as_str()),
    ];
    vars.extend_from_slice(extra);
    (LoggedGateway::start(&vars).await, upstream)
}

/// A chat request with `token` and `body`, as is.
fn chat(base: &str, world: &World, token: &str, body: &Value) -> Request<Full<bytes::Bytes>> {
    Request::post(format!("{base}/v1/chat/completions"))
        .header("authorization", format!("Bearer {token}"))
        .header("x-svc-agent-id", world.agent_id.to_string())
        .header("content-type", "application/json")
        .body(json_body(body))
        .unwrap()
}

fn is_access(line: &Value) -> bool {
    line["fields"]["message"] == "access"
}

/// The access line of the request `reply` answered (by its request id).
async fn line_of(gateway: &LoggedGateway, reply: &Reply) -> Value {
    let id = reply
        .header("x-request-id")
        .expect("a request id")
        .to_owned();
    let line = gateway
        .line(|l| is_access(l) && l["fields"]["request_id"] == id.as_str())
        .await;
    assert_eq!(line["level"], "INFO", "{line}");
    line["fields"].clone()
}

/// A refusal's line: its route template, status and the envelope's code.
async fn assert_refusal(gateway: &LoggedGateway, reply: &Reply, status: u16, route: &str) {
    assert_eq!(reply.status, status, "{:?}", reply.body);
    let fields = line_of(gateway, reply).await;
    assert_eq!(fields["status"], status, "{fields}");
    assert_eq!(fields["route"], route, "{fields}");
    assert_eq!(fields["code"], reply.code(), "{fields}");
    assert!(fields["duration_ms"].as_f64().is_some(), "{fields}");
    assert!(fields.get("upstream_status").is_none(), "{fields}");
}

#[tokio::test]
async fn every_request_has_one_line_and_none_carries_a_secret() {
    let world = World::random();
    let (gateway, _upstream) = gateway(&world, &[]).await;
    let (http, base) = (client(), gateway.base.clone());
    let body =
        json!({"model": LIVE_MODEL, "messages": [{"role": "user", "content": SECRET_CONTENT}]});

    // A call through to the provider.
    let ok = send(&http, chat(&base, &world, &world.chat_token, &body)).await;
    assert_eq!(ok.status, 200);
    let fields = line_of(&gateway, &ok).await;
    assert_eq!(fields["method"], "POST");
    assert_eq!(fields["route"], "/v1/chat/completions");
    assert_eq!(fields["status"], 200);
    assert!(fields.get("code").is_none(), "{fields}");
    assert_eq!(fields["org_id"], world.org_id.to_string());
    assert_eq!(fields["agent_id"], world.agent_id.to_string());
    assert_eq!(fields["token_id"], world.chat_token_id.to_string());
    assert_eq!(fields["model"], LIVE_MODEL);
    assert_eq!(fields["stream"], false);
    assert_eq!(fields["message_count"], 1);
    assert_eq!(fields["provider"], "live", "{fields}");
    assert_eq!(fields["upstream_status"], 200);

    // Refusals, from the outermost layer inward.
    let unmatched = Request::get(format!("{base}{SECRET_PATH}"))
        .body(Full::default())
        .unwrap();
    assert_refusal(&gateway, &send(&http, unmatched).await, 404, "unmatched").await;
    let wrong = format!("svc_pat_{}_{}", uuid::Uuid::new_v4(), "WRONGSECRETabcdef");
    let refused = send(&http, chat(&base, &world, &wrong, &body)).await;
    assert_refusal(&gateway, &refused, 401, "/v1/chat/completions").await;
    let big = json!({"model": LIVE_MODEL, "messages": [{"role": "user", "content": "x".repeat(MAX_BODY)}]});
    let too_big = send(&http, chat(&base, &world, &world.chat_token, &big)).await;
    assert_refusal(&gateway, &too_big, 413, "/v1/chat/completions").await;
    let bare = send(&http, chat(&base, &world, &world.bare_token, &body)).await;
    assert_refusal(&gateway, &bare, 403, "/v1/chat/completions").await;
    assert_eq!(
        line_of(&gateway, &bare).await["org_id"],
        world.org_id.to_string()
    );
    let invalid = send(
        &http,
        chat(&base, &world, &world.chat_token, &json!({"model": 1})),
    )
    .await;
    assert_refusal(&gateway, &invalid, 400, "/v1/chat/completions").await;
    assert_eq!(
        line_of(&gateway, &invalid).await["token_id"],
        world.chat_token_id.to_string()
    );
    // The org's requests per minute run out: the next is refused.
    let mut limited = None;
    for _ in 0..3 * RPM {
        let reply = send(&http, chat(&base, &world, &world.chat_token, &body)).await;
        if reply.status == 429 {
            limited = Some(reply);
            break;
        }
    }
    let limited = limited.expect("the rate limit refuses a request");
    assert_refusal(&gateway, &limited, 429, "/v1/chat/completions").await;

    let logs = gateway.stop().await;
    let lines: Vec<Value> = logs
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(is_access)
        .collect();
    let ids: std::collections::HashSet<_> = lines
        .iter()
        .map(|l| l["fields"]["request_id"].to_string())
        .collect();
    assert_eq!(ids.len(), lines.len(), "one line per request:\n{logs}");
    for secret in [
        world.chat_token.as_str(),
        world.bare_token.as_str(),
        "WRONGSECRETabcdef",
        PROVIDER_KEY,
        SECRET_CONTENT,
        "SECRETPATH",
    ] {
        assert!(!logs.contains(secret), "{secret} reached the logs:\n{logs}");
    }
}

#[tokio::test]
async fn a_broken_stream_keeps_its_status_and_names_the_code_it_ended_with() {
    let world = World::random();
    // The upstream sends one chunk and stalls: the provider timeout ends the stream.
    let script = Script::Stream {
        before: vec![chunk("Hel")],
        after: vec![chunk("never sent")],
        fail: false,
    };
    let (gateway, _upstream) =
        gateway_with(&world, script, &[("SVC_PROVIDER_TIMEOUT", "300ms")]).await;
    let body = json!({"model": LIVE_MODEL, "stream": true,
        "messages": [{"role": "user", "content": SECRET_CONTENT}]});
    let http = client();
    let reply = send(&http, chat(&gateway.base, &world, &world.chat_token, &body)).await;
    assert_eq!(reply.status, 200);
    assert!(
        String::from_utf8_lossy(&reply.body).contains("PROVIDER_TIMEOUT"),
        "{:?}",
        reply.body
    );
    let fields = line_of(&gateway, &reply).await;
    assert_eq!(fields["status"], 200, "{fields}");
    assert_eq!(fields["stream"], true, "{fields}");
    assert_eq!(fields["stream_error"], "PROVIDER_TIMEOUT", "{fields}");
    assert_eq!(fields["upstream_status"], 200, "{fields}");
    assert!(fields.get("code").is_none(), "{fields}");
    assert!(
        fields["duration_ms"].as_f64() >= Some(300.0),
        "the whole stream: {fields}"
    );
}

#[tokio::test]
async fn svc_access_log_false_writes_no_line() {
    let world = World::random();
    let (gateway, _upstream) = gateway(&world, &[("SVC_ACCESS_LOG", "false")]).await;
    let (http, base) = (client(), gateway.base.clone());
    let body = json!({"model": LIVE_MODEL, "messages": [{"role": "user", "content": "hi"}]});
    assert_eq!(
        send(&http, chat(&base, &world, &world.chat_token, &body))
            .await
            .status,
        200
    );
    let wrong = format!("svc_pat_{}_{}", uuid::Uuid::new_v4(), "WRONGSECRETabcdef");
    assert_eq!(
        send(&http, chat(&base, &world, &wrong, &body)).await.status,
        401
    );
    let logs = gateway.stop().await;
    assert!(logs.lines().count() > 0, "the binary logged nothing at all");
    assert!(
        !logs
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|l| is_access(&l)),
        "{logs}"
    );
}

#[test]
fn a_bad_svc_access_log_stops_the_binary_naming_it() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_svc-gateway"))
        .env_clear()
        .env("SVC_AUTH_GRPC_ADDR", "127.0.0.1:9091")
        .env("SVC_ACCESS_LOG", "maybe")
        .output()
        .expect("run the binary");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("SVC_ACCESS_LOG"), "{stderr}");
}
