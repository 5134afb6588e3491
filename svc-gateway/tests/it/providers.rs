//! The provider registry through the gateway: routing by exact name and by prefix, fallback
//! on each kind of failure before the first byte (and none after), the circuit breaker, the
//! idempotency claim over a whole chain, and a bad registry file at start. Two fake
//! OpenAI-shaped upstreams on loopback stand for two providers.

use crate::registry;
use crate::support;

use std::process::Command;
use std::time::{Duration, Instant};

use http::Request;
use http_body_util::Full;
use serde_json::{Value, json};
use support::{
    Env, Reply, Script, Upstream, assert_envelope, chat_body, chunk, completion, json_body,
    next_data, open, send,
};
use svc_testkit::TempDir;

/// Bounds every wait on the gateway or the upstreams; never a synchronisation sleep.
const WITHIN: Duration = Duration::from_secs(10);
/// The variable the file names for both providers' key.
const KEY_VAR: &str = "FAKE_UPSTREAM_KEY";
const KEY: &str = "sk-upstream-0123456789abcdef";

/// A gateway whose registry is `file`, and the directory that holds the file.
async fn gateway(file: &str) -> (Env, TempDir) {
    registry::gateway(file, &[(KEY_VAR, KEY)]).await
}

/// Providers `a` and `b` (OpenAI-shaped, at `a_url` and `b_url`) with `a_extra` settings on
/// `a`, and the model `m` routed to `a` then `b`.
fn two_providers(a_url: &str, b_url: &str, a_extra: &str) -> String {
    format!(
        r#"
[[providers]]
name = "a"
kind = "openai"
base_url = "{a_url}"
api_key_env = "{KEY_VAR}"
{a_extra}

[[providers]]
name = "b"
kind = "openai"
base_url = "{b_url}"
api_key_env = "{KEY_VAR}"

[[models]]
name = "m"
targets = ["a", "b"]
"#
    )
}

/// A loopback URL where nothing listens.
fn refused_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}/v1")
}

async fn metrics(env: &Env) -> String {
    String::from_utf8(env.get("/metrics").await.body.to_vec()).unwrap()
}

async fn models(env: &Env) -> Reply {
    let request = Request::get(env.url("/v1/models"))
        .header("authorization", format!("Bearer {}", env.world.chat_token))
        .header("x-svc-agent-id", env.world.agent_id.to_string())
        .body(Full::default())
        .unwrap();
    send(&env.client, request).await
}

#[tokio::test]
async fn routes_by_exact_name_and_by_prefix_and_refuses_the_rest() {
    let openai = Upstream::start(Script::Json(200, completion("from openai"), vec![])).await;
    let vllm = Upstream::start(Script::Json(200, completion("from vllm"), vec![])).await;
    let file = format!(
        r#"
[[providers]]
name = "openai"
kind = "openai"
base_url = "{}"
api_key_env = "{KEY_VAR}"

[[providers]]
name = "vllm"
kind = "openai"
base_url = "{}"

[[models]]
name = "gpt-4o"
targets = ["openai:gpt-4o-2024-08-06"]

[[models]]
name = "llama-*"
targets = ["vllm"]

[[models]]
name = "llama-3-70b"
targets = ["openai"]
"#,
        openai.base_url(),
        vllm.base_url()
    );
    let (env, _dir) = gateway(&file).await;

    let reply = env.send_chat(chat_body("gpt-4o")).await;
    assert_eq!(reply.json(), completion("from openai"));
    let sent: Value = serde_json::from_slice(&openai.seen()[0].body).unwrap();
    assert_eq!(
        sent["model"], "gpt-4o-2024-08-06",
        "the target's model name"
    );
    assert_eq!(sent["messages"], chat_body("gpt-4o")["messages"]);
    assert_eq!(
        openai.seen()[0].headers["authorization"],
        format!("Bearer {KEY}")
    );

    // A prefix match sends the client's bytes as they came.
    let body = r#"{"model":"llama-3-8b",  "messages":[{"role":"user","content":"hi"}]}"#;
    let request = env
        .chat(&json!({}))
        .header("content-length", body.len())
        .body(Full::new(body.into()))
        .unwrap();
    let reply = send(&env.client, request).await;
    assert_eq!(reply.json(), completion("from vllm"));
    assert_eq!(vllm.seen()[0].body, body.as_bytes());
    assert!(vllm.seen()[0].headers.get("authorization").is_none());

    // An exact name wins over a prefix it also matches.
    env.send_chat(chat_body("llama-3-70b")).await;
    assert_eq!(openai.seen().len(), 2);
    assert_eq!(vllm.seen().len(), 1);

    let reply = env.send_chat(chat_body("mistral-large")).await;
    assert_envelope(&reply, 501, "PROVIDER_NOT_CONFIGURED");
    assert_eq!(openai.seen().len() + vllm.seen().len(), 3);

    // Provider metrics name the provider, never the model.
    let text = metrics(&env).await;
    assert!(text.contains("svc_provider_requests_total{provider=\"openai\",outcome=\"ok\"} 2"));
    assert!(text.contains("svc_provider_request_duration_seconds_count{provider=\"vllm\"} 1"));
    for line in text.lines().filter(|l| l.starts_with("svc_provider")) {
        assert!(
            !line.contains("gpt-4o") && !line.contains("llama"),
            "{line}"
        );
    }

    let list = models(&env).await.json();
    let ids: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["gpt-4o", "llama-3-70b"], "concrete names only");
    assert_eq!(list["data"][0]["owned_by"], "openai");
}

#[tokio::test]
async fn falls_back_on_each_failure_before_the_first_byte() {
    let error = json!({"error": {"message": "no"}});
    let cases: Vec<(&str, Option<Script>)> = vec![
        ("refused connection", None),
        ("head slower than the timeout", Some(Script::Hang)),
        (
            "429 with Retry-After",
            Some(Script::Json(
                429,
                error.clone(),
                vec![("retry-after", "7".into())],
            )),
        ),
        ("500", Some(Script::Json(500, error.clone(), vec![]))),
        (
            "502",
            Some(Script::Raw(502, "text/html", "<html>bad gateway</html>")),
        ),
        ("503", Some(Script::Json(503, error.clone(), vec![]))),
    ];
    for (case, script) in cases {
        let a = match &script {
            Some(script) => Some(Upstream::start(script.clone()).await),
            None => None,
        };
        let a_url = a.as_ref().map_or_else(refused_url, Upstream::base_url);
        let b = Upstream::start(Script::Json(200, completion("from b"), vec![])).await;
        let file = two_providers(&a_url, &b.base_url(), "timeout = \"300ms\"");
        let (env, _dir) = gateway(&file).await;

        let started = Instant::now();
        let reply = env.send_chat(chat_body("m")).await;
        assert_eq!(reply.status, 200, "{case}: {:?}", reply.body);
        assert_eq!(reply.json(), completion("from b"), "{case}");
        assert!(started.elapsed() < WITHIN, "{case}");
        if let Some(a) = &a {
            assert_eq!(a.seen().len(), 1, "{case}: one try at a");
        }
        assert_eq!(b.seen().len(), 1, "{case}: one try at b");
        assert!(
            metrics(&env)
                .await
                .contains("svc_provider_fallbacks_total{provider=\"a\"} 1"),
            "{case}"
        );
    }
}

#[tokio::test]
async fn the_last_targets_failure_is_what_the_client_sees() {
    let error = json!({"error": {"message": "no"}});
    let a = Upstream::start(Script::Json(500, error.clone(), vec![])).await;
    let b = Upstream::start(Script::Json(
        429,
        error.clone(),
        vec![("retry-after", "7".into())],
    ))
    .await;
    let (env, _dir) = gateway(&two_providers(&a.base_url(), &b.base_url(), "")).await;
    let reply = env.send_chat(chat_body("m")).await;
    assert_envelope(&reply, 429, "RATE_LIMITED");
    assert_eq!(reply.header("retry-after"), Some("7"));

    a.set(Script::Json(429, error.clone(), vec![]));
    b.set(Script::Json(500, error, vec![]));
    let reply = env.send_chat(chat_body("m")).await;
    assert_envelope(&reply, 503, "PROVIDER_UNAVAILABLE");
    assert_eq!((a.seen().len(), b.seen().len()), (2, 2), "one try each");
}

#[tokio::test]
async fn a_refused_payload_does_not_fall_back() {
    let a = Upstream::start(Script::Json(
        400,
        json!({"error": {"message": "max_tokens too large"}}),
        vec![],
    ))
    .await;
    let b = Upstream::start(Script::Json(200, completion("from b"), vec![])).await;
    let (env, _dir) = gateway(&two_providers(&a.base_url(), &b.base_url(), "")).await;
    let reply = env.send_chat(chat_body("m")).await;
    assert_envelope(&reply, 400, "INVALID_REQUEST");
    assert!(b.seen().is_empty());
}

#[tokio::test]
async fn no_fallback_once_a_stream_has_started() {
    let a = Upstream::start(Script::Stream {
        before: vec![chunk("Hel")],
        after: vec![],
        fail: true,
    })
    .await;
    let b = Upstream::start(Script::Json(200, completion("from b"), vec![])).await;
    let (env, _dir) = gateway(&two_providers(&a.base_url(), &b.base_url(), "")).await;
    let body =
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let response = open(&env.client, env.chat(&body).body(json_body(&body)).unwrap()).await;
    assert_eq!(response.status(), 200);
    let mut stream = response.into_body();
    let first = tokio::time::timeout(WITHIN, next_data(&mut stream))
        .await
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&first).contains("Hel"));
    a.release();
    let mut rest = Vec::new();
    while let Some(data) = tokio::time::timeout(WITHIN, next_data(&mut stream))
        .await
        .unwrap()
    {
        rest.extend_from_slice(&data);
    }
    let rest = String::from_utf8(rest).unwrap();
    let last = rest.trim_end().rsplit("\n\n").next().unwrap();
    let event: Value = serde_json::from_str(last.strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!(event["error"]["code"], "PROVIDER_UNAVAILABLE");
    assert!(b.seen().is_empty(), "b is never tried once a streamed");
}

#[tokio::test]
async fn the_breaker_skips_a_failing_target_then_lets_one_call_through_after_the_cooldown() {
    let error = json!({"error": {"message": "down"}});
    let a = Upstream::start(Script::Json(500, error, vec![])).await;
    let b = Upstream::start(Script::Json(200, completion("from b"), vec![])).await;
    let settings = "breaker_failures = 2\nbreaker_cooldown = \"500ms\"";
    let (env, _dir) = gateway(&two_providers(&a.base_url(), &b.base_url(), settings)).await;

    for _ in 0..2 {
        assert_eq!(
            env.send_chat(chat_body("m")).await.json(),
            completion("from b")
        );
    }
    assert_eq!(a.seen().len(), 2);
    // One org failed alone: it is shut out of a, the breaker stays closed for the others
    // (see one_orgs_timeouts_do_not_open_the_breaker_for_another_org).
    assert!(
        metrics(&env)
            .await
            .contains("svc_provider_breakers_open{provider=\"a\"} 0")
    );

    // Shut out: a is skipped for this org.
    assert_eq!(
        env.send_chat(chat_body("m")).await.json(),
        completion("from b")
    );
    assert_eq!(a.seen().len(), 2, "skipped while open");
    assert!(
        metrics(&env)
            .await
            .contains("svc_provider_breaker_skips_total{provider=\"a\"}")
    );

    // After the cool-down one probe reaches a; it succeeds and the breaker closes.
    a.set(Script::Json(200, completion("from a"), vec![]));
    let deadline = Instant::now() + WITHIN;
    loop {
        let reply = env.send_chat(chat_body("m")).await;
        if reply.json() == completion("from a") {
            break;
        }
        assert!(Instant::now() < deadline, "no probe within {WITHIN:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(a.seen().len(), 3, "exactly one probe");
    assert_eq!(
        env.send_chat(chat_body("m")).await.json(),
        completion("from a")
    );
    assert!(
        metrics(&env)
            .await
            .contains("svc_provider_breakers_open{provider=\"a\"} 0")
    );
}

#[tokio::test]
async fn a_key_sent_with_a_fallback_chain_reaches_the_upstreams_once_in_total() {
    let a = Upstream::start(Script::Json(
        500,
        json!({"error": {"message": "x"}}),
        vec![],
    ))
    .await;
    let b = Upstream::start(Script::Json(200, completion("from b"), vec![])).await;
    let (env, _dir) = gateway(&two_providers(&a.base_url(), &b.base_url(), "")).await;
    let body = chat_body("m");
    let keyed = || {
        env.chat(&body)
            .header("idempotency-key", "chain-key-1")
            .body(json_body(&body))
            .unwrap()
    };
    let first = send(&env.client, keyed()).await;
    let replay = send(&env.client, keyed()).await;
    assert_eq!(first.json(), completion("from b"));
    assert_eq!(replay.json(), first.json());
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!((a.seen().len(), b.seen().len()), (1, 1));
    for seen in a.seen().iter().chain(b.seen().iter()) {
        assert!(seen.headers.get("idempotency-key").is_none());
    }
}

#[test]
fn a_bad_registry_file_stops_the_binary_with_one_line() {
    let dir = TempDir::create();
    let path = dir.path().join("providers.toml");
    std::fs::write(
        &path,
        "[[providers]]\nname = \"a\"\nkind = \"x\"\n[[models]]\nname = \"m\"\ntargets = [\"a\"]\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_svc-gateway"))
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
            "error: SVC_PROVIDERS_FILE: {}: providers[0]: unknown kind \"x\" (openai, anthropic or mock)",
            path.display()
        )
    );
}

/// A chat call of `seed`'s org, through `gateway`, to model `m`.
async fn chat_as(
    gateway: &svc_gateway::Running,
    seed: &svc_auth_server::seed::SeedOutput,
) -> Reply {
    let agent = seed
        .agents
        .iter()
        .find(|a| a.status == "active")
        .expect("an active agent");
    let body = chat_body("m");
    let request = Request::post(format!("{}/v1/chat/completions", gateway.url()))
        .header("authorization", format!("Bearer {}", seed.chat_token))
        .header("x-svc-agent-id", agent.agent_id.to_string())
        .header("content-type", "application/json")
        .body(json_body(&body))
        .unwrap();
    send(&support::client(), request).await
}

#[tokio::test]
async fn one_orgs_timeouts_do_not_open_the_breaker_for_another_org() {
    // Two orgs on the real auth server, one target whose breaker opens after three failures.
    let stack = support::stack::Stack::start(Script::Hang).await;
    let other = stack.other_org().await;
    let file = format!(
        r#"
[[providers]]
name = "a"
kind = "openai"
base_url = "{}"
api_key_env = "{KEY_VAR}"
timeout = "300ms"
breaker_failures = 3
breaker_cooldown = "60s"

[[models]]
name = "m"
targets = ["a"]
"#,
        stack.upstream.base_url()
    );
    let dir = TempDir::create();
    let path = dir.path().join("providers.toml");
    std::fs::write(&path, file).unwrap();
    let path = path.to_str().unwrap().to_owned();
    let gateway = support::start(support::config(
        stack.auth_proxy.addr(),
        &[("SVC_PROVIDERS_FILE", path.as_str()), (KEY_VAR, KEY)],
    ))
    .await;

    // The first org's calls time out, three times: the breaker's threshold.
    for _ in 0..3 {
        assert_envelope(
            &chat_as(&gateway, &stack.seed).await,
            504,
            "PROVIDER_TIMEOUT",
        );
    }
    stack
        .upstream
        .set(Script::Json(200, completion("still up"), vec![]));

    // The other org still reaches the target...
    let reply = chat_as(&gateway, &other).await;
    assert_eq!(
        reply.status,
        200,
        "{:?}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(reply.json(), completion("still up"));
    // ...while the org that failed alone sits out the cool-down.
    let seen = stack.upstream.seen().len();
    assert_envelope(
        &chat_as(&gateway, &stack.seed).await,
        503,
        "PROVIDER_UNAVAILABLE",
    );
    assert_eq!(
        stack.upstream.seen().len(),
        seen,
        "the shut-out org reached the target"
    );
}
