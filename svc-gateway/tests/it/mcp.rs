//! MCP servers behind the gateway, with the official MCP SDKs on both ends.
//!
//! The upstream is `tests/mcp/server.py`, a FastMCP server (official Python SDK, Streamable
//! HTTP on loopback) with `echo`, `add` and `count` (which streams progress), recording the
//! headers and calls it receives. Two gateway replicas share the real Redis and run in front
//! of the real auth server on a fresh database. The client is the official Python SDK's
//! Streamable HTTP client session (`tests/mcp/client.py`), whose requests alternate between
//! the replicas, and once the official TypeScript SDK (`tests/mcp/client.mjs`). The SDKs are
//! installed once under the target directory (`mcp-venv`, `mcp-node`); without `python3`,
//! `node` or a registry a test says why and passes.
#![cfg(unix)]

use crate::openai_sdk::install;
use crate::support;
mod upstream;

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use serde_json::{Value, json};
use support::stack::Stack;
use support::{Reply, Script, assert_envelope, client, completion, send};
use svc_proto::v1::UsageGroupBy;
use svc_testkit::TempDir;
use upstream::McpServer;

/// The header value the registry entry sends upstream, from the variable it names.
const UPSTREAM_AUTH: &str = "Bearer upstream-secret-0123";

/// A registry file with the mock provider and the test's MCP server as `srv`.
fn registry(dir: &Path, server: &McpServer) -> String {
    let path = dir.join("providers.toml");
    let text = format!(
        "[[providers]]\nname = \"mock\"\nkind = \"mock\"\n\n\
         [[models]]\nname = \"svc-mock-1\"\ntargets = [\"mock\"]\n\n\
         [[mcp_servers]]\nname = \"srv\"\nurl = \"{}\"\ntimeout = \"10s\"\n\
         headers_env = {{ \"Authorization\" = \"MCP_TEST_UPSTREAM_AUTH\" }}\n",
        server.url()
    );
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// A gateway replica with the MCP server registered, sessions in the stack's Redis, the
/// ledger in its database.
async fn replica(stack: &Stack, providers: &str) -> svc_gateway::Running {
    let redis = svc_testkit::redis_url();
    let vars = [
        ("SVC_PROVIDERS_FILE", providers),
        ("MCP_TEST_UPSTREAM_AUTH", UPSTREAM_AUTH),
        ("REDIS_URL", redis.as_str()),
        ("SVC_REDIS_KEY_PREFIX", stack.redis_prefix.as_str()),
        ("POSTGRES_DSN", stack.db.url()),
    ];
    support::start(support::config(stack.auth_proxy.addr(), &vars)).await
}

/// A JSON-RPC message to `/mcp/srv` of `gateway`, as `token` and `agent`.
fn mcp_post(
    gateway: &svc_gateway::Running,
    token: &str,
    agent: &str,
    session: Option<&str>,
    message: &Value,
) -> Request<Full<Bytes>> {
    let mut builder = Request::post(format!("{}/mcp/srv", gateway.url()))
        .header("authorization", format!("Bearer {token}"))
        .header("x-svc-agent-id", agent)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18");
    if let Some(session) = session {
        builder = builder.header("mcp-session-id", session);
    }
    builder
        .body(Full::new(Bytes::from(message.to_string())))
        .unwrap()
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "svc-test", "version": "1"}}})
}

fn ping(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
}

/// `svc_mcp_tool_calls_total{server="srv",outcome}` summed over `replicas`.
async fn tool_calls(replicas: &[&svc_gateway::Running], outcome: &str) -> u64 {
    let needle = format!("svc_mcp_tool_calls_total{{server=\"srv\",outcome=\"{outcome}\"}} ");
    let mut sum = 0;
    for gateway in replicas {
        let request = Request::get(format!("{}/metrics", gateway.url()))
            .body(Full::default())
            .unwrap();
        let text = String::from_utf8(send(&client(), request).await.body.to_vec()).unwrap();
        sum += text
            .lines()
            .find_map(|line| line.strip_prefix(&needle))
            .map_or(0, |n| n.trim().parse::<f64>().unwrap() as u64);
    }
    sum
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdks_reach_granted_tools_only_through_two_replicas() {
    let python = match tokio::task::spawn_blocking(upstream::sdk_python)
        .await
        .unwrap()
    {
        Ok(python) => python,
        Err(why) => {
            println!("skipped: the MCP Python SDK cannot run: {why}");
            return;
        }
    };
    let server = McpServer::start(&python, false).await;
    let stack = Stack::start(Script::Json(200, completion("hi"), vec![])).await;
    let dir = TempDir::create();
    let providers = registry(dir.path(), &server);
    let a = replica(&stack, &providers).await;
    let b = replica(&stack, &providers).await;
    let agent = stack.agent("active");
    let granted = stack
        .set_agent_tools(agent, &["srv/echo", "srv/count"])
        .await;
    assert_eq!(granted.tools, ["srv/echo", "srv/count"]);

    // The SDK's session, alternating between the replicas; halfway it waits while the grants
    // change.
    let (pause, resume) = (dir.path().join("pause"), dir.path().join("resume"));
    let config = json!({
        "urls": [format!("{}/mcp/srv", a.url()), format!("{}/proxy/mcp/srv", b.url())],
        "token": stack.seed.chat_token,
        "agent_id": agent.to_string(),
        "pause": pause,
        "resume": resume,
    });
    let script = format!("{}/tests/mcp/client.py", env!("CARGO_MANIFEST_DIR"));
    let run = tokio::spawn({
        let python = python.clone();
        async move { install::run_json(&python, &[script], &config, Duration::from_secs(120)).await }
    });
    let until = Instant::now() + Duration::from_secs(90);
    while !pause.exists() {
        assert!(!run.is_finished(), "the client ended before its pause");
        assert!(Instant::now() < until, "the client never paused");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let adds_before_grant = server.calls_of("add");
    stack.set_agent_tools(agent, &["srv/*"]).await;
    std::fs::write(&resume, "").unwrap();
    let out = run.await.unwrap();

    assert_eq!(out["server_name"], "svc-test", "{out}");
    assert_eq!(out["replicas_used"].as_array().unwrap().len(), 2, "{out}");
    // Listing shows only the granted tools, on both replicas.
    assert_eq!(
        out["listed_before"],
        json!([["count", "echo"], ["count", "echo"]]),
        "{out}"
    );
    assert_eq!(out["echo"]["text"], json!(["hello"]), "{out}");
    // A tool not granted is an unknown tool, and the server never heard of the call.
    assert_eq!(out["add_denied"]["error_code"], -32602, "{out}");
    assert_eq!(adds_before_grant, 0);
    // Progress notifications pass through in order, before the result.
    assert_eq!(out["count"]["text"], json!(["counted to 3"]), "{out}");
    assert_eq!(
        out["progress"],
        json!([
            [1.0, 3.0, "step 1"],
            [2.0, 3.0, "step 2"],
            [3.0, 3.0, "step 3"]
        ]),
        "{out}"
    );
    assert_eq!(out["pinged"], true);
    // The new grants apply to the session opened before them, on both replicas.
    assert_eq!(
        out["listed_after"],
        json!([["add", "count", "echo"], ["add", "count", "echo"]]),
        "{out}"
    );
    assert_eq!(out["add_granted"]["text"], json!(["3"]), "{out}");
    assert_eq!(server.calls_of("add"), 1);
    assert_eq!(server.calls_of("echo"), 1);

    // The server saw only the configured credential: never the PAT or the agent header.
    let requests = server.requests();
    assert!(!requests.is_empty());
    for request in &requests {
        let headers = &request["headers"];
        assert_eq!(headers["authorization"], UPSTREAM_AUTH, "{request}");
        assert!(headers.get("x-svc-agent-id").is_none(), "{request}");
        assert!(
            !request.to_string().contains(&stack.seed.chat_token),
            "{request}"
        );
    }
    // The client's DELETE ended the server's session, and the gateway's.
    assert!(requests.iter().any(|r| r["http"] == "DELETE"), "no DELETE");
    let http = client();
    let session = out["session_id"].as_str().expect("a session id");
    let token = stack.seed.chat_token.as_str();
    let agent_id = agent.to_string();
    let ended = send(
        &http,
        mcp_post(&b, token, &agent_id, Some(session), &ping(9)),
    )
    .await;
    assert_envelope(&ended, 404, "NOT_FOUND");

    // Every tool call counted once, across the replicas.
    assert_eq!(tool_calls(&[&a, &b], "ok").await, 3);
    assert_eq!(tool_calls(&[&a, &b], "denied").await, 1);
    // And recorded in the ledger: GetUsage by tool counts exactly the calls made.
    let expected = json!({
        "srv/add": [2, {"ok": 1, "error": 0, "denied": 1}],
        "srv/count": [1, {"ok": 1, "error": 0, "denied": 0}],
        "srv/echo": [1, {"ok": 1, "error": 0, "denied": 0}],
    });
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let usage = stack
            .usage("", UsageGroupBy::Tool, 50, String::new())
            .await
            .expect("GetUsage by tool");
        let seen: serde_json::Map<String, Value> = usage
            .groups
            .iter()
            .map(|g| (g.key.clone(), json!([g.requests, g.outcomes])))
            .collect();
        if Value::Object(seen.clone()) == expected {
            break;
        }
        assert!(Instant::now() < until, "usage by tool: {seen:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A session opened on A continues on B; another org's token with its id is 404.
    let opened = send(&http, mcp_post(&a, token, &agent_id, None, &initialize())).await;
    assert_eq!(opened.status, 200, "{:?}", opened.body);
    let session = opened
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();
    assert!(
        !requests
            .iter()
            .any(|r| r["headers"]["mcp-session-id"] == session.as_str()),
        "the gateway's session id is its own"
    );
    let continued = send(
        &http,
        mcp_post(&b, token, &agent_id, Some(&session), &ping(2)),
    )
    .await;
    assert_eq!(continued.status, 200, "{:?}", continued.body);
    assert!(String::from_utf8_lossy(&continued.body).contains("\"result\""));
    let other = stack.other_org().await;
    let other_agent = other.agents[0].agent_id.to_string();
    let stranger = mcp_post(
        &b,
        &other.chat_token,
        &other_agent,
        Some(&session),
        &ping(3),
    );
    assert_envelope(&send(&http, stranger).await, 404, "NOT_FOUND");
    let unknown = mcp_post(&b, token, &agent_id, Some("no-such-session"), &ping(4));
    assert_envelope(&send(&http, unknown).await, 404, "NOT_FOUND");

    // Refusals at the HTTP level are envelopes.
    let unknown_server = Request::post(format!("{}/mcp/nope", a.url()))
        .header("authorization", format!("Bearer {token}"))
        .header("x-svc-agent-id", &agent_id)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(ping(5).to_string())))
        .unwrap();
    assert_envelope(&send(&http, unknown_server).await, 404, "NOT_FOUND");
    let anonymous = Request::post(format!("{}/mcp/srv", a.url()))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(ping(6).to_string())))
        .unwrap();
    let anonymous: Reply = send(&http, anonymous).await;
    assert_envelope(&anonymous, 401, "MISSING_TOKEN");
    assert_eq!(anonymous.header("www-authenticate"), Some("Bearer"));
    let (_, chat_only) = stack.token_with(1).await;
    let no_bit = mcp_post(&a, &chat_only, &agent_id, None, &initialize());
    assert_envelope(&send(&http, no_bit).await, 403, "INSUFFICIENT_PERMISSIONS");

    // A paused agent's next MCP request is refused.
    stack.set_agent_status(agent, "paused").await;
    let paused = mcp_post(&b, token, &agent_id, Some(&session), &ping(7));
    assert_envelope(&send(&http, paused).await, 403, "AGENT_SUSPENDED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_typescript_sdk_reaches_granted_tools_only_from_a_json_server() {
    let sdks = tokio::task::spawn_blocking(|| {
        Ok::<_, install::Skip>((upstream::sdk_python()?, upstream::node_sdk_prefix()?))
    })
    .await
    .unwrap();
    let (python, prefix) = match sdks {
        Ok(sdks) => sdks,
        Err(why) => {
            println!("skipped: the MCP SDKs cannot run: {why}");
            return;
        }
    };
    // This server answers with JSON, not event streams: filtering and outcomes read it whole.
    let server = McpServer::start(&python, true).await;
    let stack = Stack::start(Script::Json(200, completion("hi"), vec![])).await;
    let dir = TempDir::create();
    let gateway = replica(&stack, &registry(dir.path(), &server)).await;
    let agent = stack.agent("active");
    stack.set_agent_tools(agent, &["srv/echo"]).await;
    let config = json!({
        "prefix": prefix,
        "url": format!("{}/mcp/srv", gateway.url()),
        "token": stack.seed.chat_token,
        "agent_id": agent.to_string(),
    });
    let script = format!("{}/tests/mcp/client.mjs", env!("CARGO_MANIFEST_DIR"));
    let out = install::run_json(
        Path::new("node"),
        &[script],
        &config,
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(out["tools"], json!(["echo"]), "{out}");
    assert_eq!(out["echo"], json!(["from node"]), "{out}");
    assert_eq!(out["add_code"], -32602, "{out}");
    assert_eq!(server.calls_of("add"), 0);
    assert_eq!(server.calls_of("echo"), 1);
    assert!(out["session_id"].is_string(), "{out}");
    // The outcome of a call answered with JSON is read from the whole answer.
    assert_eq!(tool_calls(&[&gateway], "ok").await, 1);
    assert_eq!(tool_calls(&[&gateway], "denied").await, 1);
    for request in server.requests() {
        assert_eq!(
            request["headers"]["authorization"], UPSTREAM_AUTH,
            "{request}"
        );
        assert!(
            request["headers"].get("x-svc-agent-id").is_none(),
            "{request}"
        );
    }
}

#[test]
fn a_bad_mcp_server_entry_stops_the_binary_with_one_line() {
    let dir = TempDir::create();
    let path = dir.path().join("providers.toml");
    std::fs::write(
        &path,
        "[[providers]]\nname = \"m\"\nkind = \"mock\"\n[[models]]\nname = \"x\"\n\
         targets = [\"m\"]\n[[mcp_servers]]\nname = \"github\"\nurl = \"https://mcp.example/mcp\"\n\
         headers_env = { \"Authorization\" = \"GITHUB_MCP_AUTH\" }\n",
    )
    .unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_svc-gateway"))
        .env_clear()
        .env("SVC_AUTH_GRPC_ADDR", "127.0.0.1:9091")
        .env("SVC_PROVIDERS_FILE", &path)
        .output()
        .expect("run the binary");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(
        stderr.trim_end(),
        format!(
            "error: SVC_PROVIDERS_FILE: {}: mcp_servers[0]: headers_env: GITHUB_MCP_AUTH is not set",
            path.display()
        )
    );
}
