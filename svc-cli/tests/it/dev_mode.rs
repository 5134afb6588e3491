//! `svc dev` in process: readiness without Redis, the in-process rate limit and
//! idempotency, and the printed credentials working against the real stack.

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use svc_cli::dev::{DevConfig, DevServer, SVC_DEV_DATA_DIR};
use svc_testkit::TempDir;

type HttpClient = Client<HttpConnector, Full<Bytes>>;

struct Reply {
    status: StatusCode,
    headers: http::HeaderMap,
    body: Value,
}

async fn start(dir: &TempDir, extra: &[(&str, &str)]) -> DevServer {
    let data_dir = dir.path().join("data");
    let data_dir = data_dir.to_str().unwrap();
    // A token's first call runs Argon2id, here in a debug build beside every other test's
    // calls: it can take longer than the 2 s the dev server allows it by default.
    let vars = [
        (SVC_DEV_DATA_DIR, data_dir),
        ("SVC_AUTH_VALIDATE_TIMEOUT", "30s"),
    ]
    .into_iter()
    .chain(extra.iter().copied());
    let mut config = DevConfig::from_map(vars).unwrap();
    config.gateway.listen = "127.0.0.1:0".parse().unwrap();
    DevServer::start(config).await.unwrap()
}

async fn send(client: &HttpClient, request: Request<Full<Bytes>>) -> Reply {
    let response = client.request(request).await.expect("gateway reachable");
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    }
}

fn chat(server: &DevServer, idempotency_key: Option<&str>) -> Request<Full<Bytes>> {
    let body = json!({"model": server.model, "messages": [{"role": "user", "content": "hi"}]});
    let mut request = Request::post(format!("http://{}/v1/chat/completions", server.http_addr))
        .header(
            "authorization",
            format!("Bearer {}", server.identity.chat_token),
        )
        .header("x-svc-agent-id", server.identity.agent_id.to_string())
        .header("content-type", "application/json");
    if let Some(key) = idempotency_key {
        request = request.header("idempotency-key", key);
    }
    request
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

#[tokio::test]
async fn ready_checks_the_embedded_auth_plane_and_store_not_redis() {
    let dir = TempDir::create();
    let server = start(&dir, &[("REDIS_URL", "redis://127.0.0.1:1")]).await;
    let url = format!("http://{}/ready", server.http_addr);
    let reply = send(&client(), Request::get(url).body(Full::default()).unwrap()).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["status"], "ok");
    let checks = reply.body["checks"].as_object().unwrap();
    let mut names: Vec<&str> = checks.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["auth_grpc", "sqlite"]);
    server.shutdown().await;
}

#[tokio::test]
async fn the_rate_limit_holds_in_process() {
    let dir = TempDir::create();
    let server = start(&dir, &[("SVC_RATE_LIMIT_RPM", "2")]).await;
    let client = client();
    for _ in 0..2 {
        let reply = send(&client, chat(&server, None)).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        assert_eq!(reply.body["object"], "chat.completion");
    }
    let reply = send(&client, chat(&server, None)).await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(reply.body["error"]["code"], "RATE_LIMITED");
    assert!(reply.headers.contains_key("retry-after"));
    server.shutdown().await;
}

#[tokio::test]
async fn idempotent_replays_come_from_the_process() {
    let dir = TempDir::create();
    let server = start(&dir, &[]).await;
    let client = client();
    let key = uuid::Uuid::new_v4().to_string();
    let first = send(&client, chat(&server, Some(&key))).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    let again = send(&client, chat(&server, Some(&key))).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(
        again.body["id"], first.body["id"],
        "replayed, not recomputed"
    );
    assert_eq!(
        again
            .headers
            .get("idempotent-replayed")
            .and_then(|v| v.to_str().ok()),
        Some("true")
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_restart_reuses_the_identity_and_old_chat_tokens_stay_valid() {
    let dir = TempDir::create();
    let first = start(&dir, &[]).await;
    let (org_id, agent_id) = (first.identity.org_id, first.identity.agent_id);
    let old_token = first.identity.chat_token.clone();
    first.shutdown().await;

    let second = start(&dir, &[]).await;
    assert!(second.identity.reused);
    assert_eq!(second.identity.org_id, org_id);
    assert_eq!(second.identity.agent_id, agent_id);
    assert_ne!(second.identity.chat_token, old_token);

    let mut request = chat(&second, None);
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {old_token}").parse().unwrap(),
    );
    let reply = send(&client(), request).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    second.shutdown().await;
}

#[tokio::test]
async fn a_taken_port_fails_to_start_and_names_the_problem() {
    let dir = TempDir::create();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let data_dir = dir.path().join("data");
    let config = DevConfig::from_map([
        (SVC_DEV_DATA_DIR, data_dir.to_str().unwrap()),
        ("SVC_PORT", port.as_str()),
    ])
    .unwrap();
    let error = DevServer::start(config).await.expect_err("port taken");
    assert!(error.to_string().contains("listen"), "{error}");
}

/// Runs the `svc` binary with `args` against the dev server's auth plane as its admin.
async fn svc_as_admin(server: &DevServer, args: &[&str]) -> std::process::Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_svc"));
    command
        .env_clear()
        .args(args)
        .env("SVC_AUTH_GRPC_ADDR", format!("http://{}", server.grpc_addr))
        .env("SVC_ADMIN_TOKEN", &server.identity.admin_token);
    tokio::task::spawn_blocking(move || command.output().expect("run svc"))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_ledger_lives_in_the_embedded_store_and_svc_usage_prints_it() {
    let dir = TempDir::create();
    let server = start(&dir, &[]).await;
    let client = client();
    let mut reported = (0, 0);
    for _ in 0..3 {
        let reply = send(&client, chat(&server, None)).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        reported.0 += reply.body["usage"]["prompt_tokens"].as_i64().unwrap();
        reported.1 += reply.body["usage"]["completion_tokens"].as_i64().unwrap();
    }
    // A replay is not a call: it is not in the ledger.
    let key = uuid::Uuid::new_v4().to_string();
    for _ in 0..2 {
        let reply = send(&client, chat(&server, Some(&key))).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        if reply.headers.get("idempotent-replayed").is_none() {
            reported.0 += reply.body["usage"]["prompt_tokens"].as_i64().unwrap();
            reported.1 += reply.body["usage"]["completion_tokens"].as_i64().unwrap();
        }
    }

    // The writer batches off the request path: poll, bounded.
    let mut last = Value::Null;
    for _ in 0..100 {
        let output = svc_as_admin(&server, &["usage", "--by", "model", "--json"]).await;
        assert!(output.status.success(), "{output:?}");
        last = serde_json::from_slice(&output.stdout).unwrap();
        if last["total"]["requests"] == 4 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(last["group_by"], "model");
    assert_eq!(last["groups"][0]["key"], server.model.as_str());
    assert_eq!(last["total"]["requests"], 4, "{last}");
    assert_eq!(last["total"]["prompt_tokens"], reported.0);
    assert_eq!(last["total"]["completion_tokens"], reported.1);
    // The mock's fixed price: $1 per million input tokens, $2 per million output tokens.
    let cost = reported.0 + 2 * reported.1;
    assert_eq!(last["total"]["cost_usd_micros"], cost, "{last}");

    // A budget on the org reads its spend from the embedded ledger.
    let output = svc_as_admin(
        &server,
        &[
            "budget", "set", "--org", "--usd", "1", "--per", "day", "--json",
        ],
    )
    .await;
    assert!(output.status.success(), "{output:?}");
    let output = svc_as_admin(&server, &["budget", "list", "--json"]).await;
    let listed: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(listed["budgets"][0]["spent_usd_micros"], cost, "{listed}");
    // And holds the next call to it, counted from that spend (no Redis: in the gateway's
    // memory).
    let reply = send(&client, chat(&server, None)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let left: f64 = reply.headers["x-svc-budget-remaining-usd"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        left < 1.0 - cost as f64 / 1e6,
        "{left}: the spend was rebuilt from the ledger"
    );
    let output = svc_as_admin(
        &server,
        &[
            "budget", "set", "--org", "--usd", "0.000001", "--per", "day",
        ],
    )
    .await;
    assert!(output.status.success(), "{output:?}");
    let refused = send(&client, chat(&server, None)).await;
    assert_eq!(
        refused.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        refused.body
    );
    assert_eq!(refused.body["error"]["code"], "BUDGET_EXCEEDED");

    let output = svc_as_admin(&server, &["usage", "--by", "day", "--since", "1h"]).await;
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.starts_with("DAY"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("total")), "{text}");

    // Another org's usage is refused, one line, exit 1.
    let other = uuid::Uuid::new_v4().to_string();
    let output = svc_as_admin(&server, &["usage", "--org-id", &other]).await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("GetUsage: PermissionDenied"), "{stderr}");
    server.shutdown().await;
}

#[tokio::test]
async fn tokens_per_minute_are_counted_in_process() {
    let dir = TempDir::create();
    let server = start(&dir, &[("SVC_RATE_LIMIT_TPM", "1000")]).await;
    // "hi" is 5 prompt tokens by the estimate; 995 more reserve the whole minute.
    let body = json!({
        "model": server.model, "max_tokens": 995,
        "messages": [{"role": "user", "content": "hi"}],
    });
    let mut request = chat(&server, None);
    *request.body_mut() = Full::new(Bytes::from(body.to_string()));
    let reply = send(&client(), request).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let header = |name: &str| {
        reply
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    assert_eq!(header("x-ratelimit-limit-tokens").as_deref(), Some("1000"));
    assert_eq!(header("x-ratelimit-remaining-tokens").as_deref(), Some("0"));
    server.shutdown().await;
}

/// `svc args --json` as the dev admin, which must succeed.
async fn admin_json(server: &DevServer, args: &[&str]) -> Value {
    let output = svc_as_admin(server, args).await;
    assert!(
        output.status.success(),
        "svc {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("--json prints JSON")
}

#[tokio::test(flavor = "multi_thread")]
async fn every_admin_command_works_against_the_embedded_store_and_the_kill_switch_holds() {
    let dir = TempDir::create();
    let server = start(&dir, &[]).await;
    let client = client();
    assert_eq!(
        send(&client, chat(&server, None)).await.status,
        StatusCode::OK
    );

    let agent_id = server.identity.agent_id.to_string();
    let paused = admin_json(
        &server,
        &["agent", "pause", &agent_id, "--reason", "drill", "--json"],
    )
    .await;
    assert_eq!(paused["status"], "paused");
    let refused = send(&client, chat(&server, None)).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(refused.body["error"]["code"], "AGENT_SUSPENDED");
    admin_json(&server, &["agent", "resume", &agent_id, "--json"]).await;
    assert_eq!(
        send(&client, chat(&server, None)).await.status,
        StatusCode::OK
    );

    let created = admin_json(&server, &["agent", "create", "--name", "second", "--json"]).await;
    let listed = admin_json(&server, &["agent", "list", "--json"]).await;
    let ids: Vec<&str> = listed["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["agent_id"].as_str())
        .collect();
    assert!(
        ids.contains(&created["agent_id"].as_str().unwrap()),
        "{listed}"
    );
    let got = admin_json(&server, &["agent", "get", &agent_id, "--json"]).await;
    assert_eq!(got["status"], "active");
    let user = admin_json(&server, &["user", "create", "--name", "ada", "--json"]).await;
    let users = admin_json(&server, &["user", "list", "--json"]).await;
    assert!(
        users["users"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["user_id"] == user["user_id"])
    );
    let trail = admin_json(&server, &["audit", "--since", "1h", "--json"]).await;
    let actions: Vec<&str> = trail["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert_eq!(
        actions,
        [
            "user.create",
            "agent.create",
            "agent.status",
            "agent.status"
        ],
        "{trail}"
    );
}
