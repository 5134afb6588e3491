//! The official OpenAI Python SDK, unchanged, against a gateway in process.
//!
//! One gateway (mock provider, real Redis under a random prefix) in front of the real auth
//! server on a fresh database, and one Python process running `tests/openai_sdk.py` with
//! `base_url` = the gateway, `api_key` = a PAT and `X-SVC-Agent-ID` as a default header. The
//! script records what the SDK made of each answer; every assertion is here.
//!
//! The SDK comes from the system `python3` when it has one, else from a virtualenv under the
//! target directory (`openai-venv`, made once with `pip install openai`, then reused). Without
//! `python3` at all the test says so and passes.
#![cfg(unix)]

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use svc_auth_server::seed::{self, SeedOptions, SeedOutput};
use svc_auth_server::store::AgentStatus;
use svc_auth_server::store::postgres::PoolSettings;
use svc_auth_server::{RunningServer, Server};
use svc_gateway::Gateway;
use svc_gateway::provider::mock::{MOCK_REPLY, MockProvider};
use svc_gateway::provider::{CallInfo, Provider, ProviderError, ProviderReply, Registry};
use svc_gateway::validate::ChatRequest;
use svc_testkit::{TempDir, TestDb};
use tokio::sync::Notify;

/// The mock's model.
const MODEL: &str = "svc-mock-1";
/// Answers only once [`RELEASE_MODEL`] was asked: keeps a keyed call in flight.
const HOLD_MODEL: &str = "svc-hold-1";
/// Lets the held call answer.
const RELEASE_MODEL: &str = "svc-release-1";
/// Low enough for the script to reach the limit quickly, high enough for its other checks.
const RATE_LIMIT_RPM: &str = "60";
/// Bounds the script; its own calls time out after 30 s each.
const SCRIPT_DEADLINE: Duration = Duration::from_secs(300);
/// Where the virtualenv lives, under the target directory.
const VENV_DIR: &str = "openai-venv";

/// The mock provider, plus a hold: a [`HOLD_MODEL`] call answers once a [`RELEASE_MODEL`] call
/// came in (before or after it), so the script decides how long a claim stays pending.
struct Holding {
    mock: MockProvider,
    release: Arc<Notify>,
}

impl Provider for Holding {
    fn name(&self) -> &'static str {
        "mock"
    }

    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
        call: &'a CallInfo,
    ) -> BoxFuture<'a, Result<ProviderReply, ProviderError>> {
        Box::pin(async move {
            match request.model.as_str() {
                HOLD_MODEL => self.release.notified().await,
                RELEASE_MODEL => self.release.notify_one(),
                _ => {}
            }
            self.mock.complete(request, call).await
        })
    }
}

/// The auth server on a fresh database, seeded with one org and an agent in every status.
async fn auth_plane() -> (TestDb, RunningServer, SeedOutput) {
    let db = TestDb::create().await;
    svc_auth_server::migrate::run(db.url(), &PoolSettings::default())
        .await
        .expect("migrate");
    let config = svc_auth_server::Config::local(db.url());
    let auth = Server::start(config.clone())
        .await
        .expect("auth server starts");
    let options = SeedOptions {
        org_id: None,
        agent_statuses: AgentStatus::ALL.to_vec(),
    };
    let seed = seed::run_with_config(&config, &options)
        .await
        .expect("seed");
    (db, auth, seed)
}

async fn gateway(auth: SocketAddr) -> svc_gateway::Running {
    let redis = svc_testkit::redis_url();
    let prefix = svc_testkit::redis_prefix();
    let config = support::config(
        auth,
        &[
            ("SVC_LLM_MODE", "mock"),
            ("REDIS_URL", &redis),
            ("SVC_REDIS_KEY_PREFIX", &prefix),
            ("SVC_RATE_LIMIT_RPM", RATE_LIMIT_RPM),
        ],
    );
    let provider = Holding {
        mock: MockProvider::new(),
        release: Arc::new(Notify::new()),
    };
    let models = [MODEL, HOLD_MODEL, RELEASE_MODEL].map(String::from);
    Gateway::new(config)
        .expect("gateway builds")
        .with_registry(Registry::new(Arc::new(provider), models))
        .start()
        .await
        .expect("gateway starts")
}

/// A Python with the `openai` package, or `None` without `python3`.
fn sdk_python() -> Option<PathBuf> {
    let system = PathBuf::from("python3");
    let version = Command::new(&system)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match version {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
        Err(error) => panic!("python3 does not run: {error}"),
        Ok(_) => {}
    }
    if has_sdk(&system) {
        return Some(system);
    }
    Some(venv_python())
}

/// Whether `python` imports a 1.x-or-later SDK (the client class and its transport).
fn has_sdk(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "from openai import OpenAI, DefaultHttpxClient"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// The virtualenv's Python, making the virtualenv first when it has no SDK yet.
fn venv_python() -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the tests' temp dir sits in the target dir");
    let venv = target.join(VENV_DIR);
    let python = venv.join("bin").join("python");
    if has_sdk(&python) {
        return python;
    }
    // Built aside and renamed into place: a concurrent run never sees a half-made one.
    let staging = target.join(format!("{VENV_DIR}.{}", uuid::Uuid::new_v4().simple()));
    run(
        Command::new("python3").args(["-m", "venv"]).arg(&staging),
        "python3 -m venv",
    );
    run(
        Command::new(staging.join("bin").join("python")).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "openai",
        ]),
        "pip install openai",
    );
    if std::fs::rename(&staging, &venv).is_err() {
        if has_sdk(&python) {
            // Another run put its own in place first; either will do.
            let _ = std::fs::remove_dir_all(&staging);
        } else {
            let _ = std::fs::remove_dir_all(&venv);
            std::fs::rename(&staging, &venv).expect("move the virtualenv into place");
        }
    }
    assert!(has_sdk(&python), "{} has no openai package", venv.display());
    python
}

fn run(command: &mut Command, what: &str) {
    let output = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runs the script with `config`, bounded by [`SCRIPT_DEADLINE`]; returns its JSON output.
async fn run_script(python: &Path, config: &Value) -> Value {
    let dir = TempDir::create();
    let config_path = dir.path().join("config.json");
    std::fs::write(&config_path, config.to_string()).unwrap();
    let stdout_path = dir.path().join("stdout.json");
    let stderr_path = dir.path().join("stderr.txt");
    let mut command = Command::new(python);
    command
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/openai_sdk.py"))
        .arg(&config_path)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap());
    // The SDK reads OPENAI_* (base URL, org, project) and proxies from the environment; the
    // script must talk to this gateway with exactly what it configures.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().to_ascii_uppercase();
        if name.starts_with("OPENAI_") || name.ends_with("_PROXY") {
            command
                .env_remove(&name)
                .env_remove(name.to_ascii_lowercase());
        }
    }
    let mut child = command.spawn().expect("spawn the SDK script");
    let deadline = Instant::now() + SCRIPT_DEADLINE;
    // Polled, not awaited in a blocking call: the gateway answers on this same runtime.
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the SDK script") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the SDK script did not finish in {SCRIPT_DEADLINE:?}: {}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    assert!(status.success(), "the SDK script failed: {stderr}");
    let stdout = std::fs::read_to_string(&stdout_path).unwrap();
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout:?}; stderr: {stderr}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_sdk_works_unchanged() {
    let Some(python) = tokio::task::spawn_blocking(sdk_python).await.unwrap() else {
        println!("skipped: python3 is not installed, so the OpenAI Python SDK cannot run");
        return;
    };
    let (_db, auth, seed) = auth_plane().await;
    let gateway = gateway(auth.grpc_addr).await;
    let agent = |status: &str| {
        seed.agents
            .iter()
            .find(|a| a.status == status)
            .map(|a| a.agent_id.to_string())
            .expect("seeded agent")
    };
    let config = json!({
        "base_url": format!("{}/v1", gateway.url()),
        "token": seed.chat_token,
        "agent_id": agent("active"),
        "suspended_agent_id": agent("suspended"),
        "model": MODEL,
        "hold_model": HOLD_MODEL,
        "release_model": RELEASE_MODEL,
    });
    let results = run_script(&python, &config).await;
    let version = results["sdk_version"].as_str().expect("the SDK version");
    println!("openai {version} ({})", python.display());

    checks::completions(&results);
    checks::errors(&results);
    checks::idempotency(&results);
    checks::rate_limit(&results);
    gateway.shutdown().await;
}

/// What the script observed, held against SPEC and the SDK's documented behaviour.
mod checks {
    use serde_json::Value;

    use super::{MOCK_REPLY, MODEL, RATE_LIMIT_RPM};

    fn is_uuid(value: &Value) -> bool {
        value
            .as_str()
            .is_some_and(|v| uuid::Uuid::parse_str(v).is_ok())
    }

    fn usage_adds_up(usage: &Value) {
        let count = |name: &str| {
            usage[name]
                .as_u64()
                .unwrap_or_else(|| panic!("{name}: {usage}"))
        };
        assert!(count("prompt_tokens") > 0, "{usage}");
        assert_eq!(
            count("total_tokens"),
            count("prompt_tokens") + count("completion_tokens"),
            "{usage}"
        );
    }

    /// `attempts` is every HTTP response the SDK saw for one call.
    fn statuses(check: &Value) -> Vec<u64> {
        check["attempts"]
            .as_array()
            .unwrap_or_else(|| panic!("attempts: {check}"))
            .iter()
            .map(|a| a["status"].as_u64().unwrap_or_default())
            .collect()
    }

    /// The SDK raised `class` for our envelope, and its fields carry our code and message.
    fn raised(results: &Value, name: &str, class: &str, status: u64, code: &str) -> Value {
        let error = results[name].clone();
        assert_eq!(error["class"], class, "{name}: {error}");
        assert_eq!(error["status"], status, "{name}: {error}");
        assert_eq!(error["code"], code, "{name}: e.code");
        assert_eq!(error["body_code"], code, "{name}: e.body");
        let message = error["body_message"].as_str().unwrap_or_default();
        assert!(!message.is_empty(), "{name}: {error}");
        assert!(
            error["message"]
                .as_str()
                .is_some_and(|m| m.contains(message)),
            "{name}: e.message carries ours: {error}"
        );
        assert!(is_uuid(&error["request_id"]), "{name}: {error}");
        assert_eq!(error["request_id"], error["body_request_id"], "{name}");
        error
    }

    pub(super) fn completions(results: &Value) {
        let create = &results["create"];
        assert_eq!(create["class"], "ChatCompletion", "{create}");
        assert_eq!(create["object"], "chat.completion");
        assert_eq!(create["model"], MODEL);
        assert_eq!(create["role"], "assistant");
        assert_eq!(create["content"], MOCK_REPLY);
        assert_eq!(create["finish_reason"], "stop");
        usage_adds_up(&create["usage"]);
        assert!(is_uuid(&create["request_id"]), "completion._request_id");
        assert_eq!(statuses(create), [200]);
        assert!(
            create["attempts"][0]["idempotency_key"].is_null(),
            "no key of its own"
        );

        let stream = &results["stream"];
        assert_eq!(
            stream["classes"],
            serde_json::json!(["ChatCompletionChunk"]),
            "{stream}"
        );
        assert_eq!(
            stream["objects"],
            serde_json::json!(["chat.completion.chunk"])
        );
        assert_eq!(stream["ids"], 1, "one id across the chunks");
        assert!(
            stream["chunks"].as_u64().unwrap_or_default() >= 3,
            "{stream}"
        );
        assert_eq!(stream["text"], MOCK_REPLY);
        assert_eq!(stream["finish_reasons"], serde_json::json!(["stop"]));
        assert_eq!(
            stream["usage"],
            serde_json::json!([]),
            "usage only when asked"
        );
        assert_eq!(stream["response_closed"], true, "ended cleanly on [DONE]");

        let usage = &results["stream_usage"];
        assert_eq!(usage["text"], MOCK_REPLY, "{usage}");
        let reported = usage["usage"].as_array().expect("usage chunks");
        assert_eq!(reported.len(), 1, "one usage chunk: {usage}");
        usage_adds_up(&reported[0]);

        let raw = &results["raw"];
        assert_eq!(raw["status"], 200, "{raw}");
        assert!(
            raw["content_type"]
                .as_str()
                .is_some_and(|c| c.starts_with("application/json"))
        );
        assert!(is_uuid(&raw["request_id"]));
        assert_eq!(raw["parsed_request_id"], raw["request_id"]);
        assert_eq!(raw["content"], MOCK_REPLY);
        assert_eq!(raw["stream_status"], 200);
        assert!(
            raw["stream_content_type"]
                .as_str()
                .is_some_and(|c| c.starts_with("text/event-stream"))
        );
        assert_eq!(raw["stream_text"], MOCK_REPLY);

        let headers = &results["sdk_headers"];
        assert_eq!(headers["content"], MOCK_REPLY, "{headers}");
        let sent: Vec<&str> = headers["sent"]
            .as_array()
            .expect("sent headers")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        for name in [
            "user-agent",
            "openai-organization",
            "openai-project",
            "x-stainless-lang",
        ] {
            assert!(sent.contains(&name), "the SDK sent {name}: {sent:?}");
        }
    }

    pub(super) fn errors(results: &Value) {
        let bad_token = raised(
            results,
            "bad_token",
            "AuthenticationError",
            401,
            "INVALID_TOKEN",
        );
        assert_eq!(bad_token["type"], "authentication_error");
        assert_eq!(statuses(&bad_token), [401], "a 401 is not retried");

        let missing = raised(
            results,
            "missing_agent",
            "BadRequestError",
            400,
            "MISSING_AGENT_ID",
        );
        assert_eq!(missing["type"], "invalid_request_error");

        let suspended = raised(
            results,
            "suspended_agent",
            "PermissionDeniedError",
            403,
            "AGENT_SUSPENDED",
        );
        assert_eq!(suspended["type"], "permission_error");
        assert_eq!(statuses(&suspended), [403]);

        // The SDK retries every 5xx unless told otherwise; an unknown model is not transient.
        for name in ["unknown_model", "unknown_model_stream"] {
            let error = raised(
                results,
                name,
                "InternalServerError",
                501,
                "PROVIDER_NOT_CONFIGURED",
            );
            assert_eq!(statuses(&error), [501], "{name}: not retried");
            assert_eq!(error["attempts"][0]["should_retry"], "false");
        }

        let invalid = raised(
            results,
            "invalid",
            "BadRequestError",
            400,
            "VALIDATION_ERROR",
        );
        assert_eq!(invalid["param"], "messages", "e.param names the field");
    }

    pub(super) fn idempotency(results: &Value) {
        let replay = &results["replay"];
        assert_eq!(replay["replay_status"], 200, "{replay}");
        assert_eq!(
            replay["replay_id"], replay["first_id"],
            "replayed, not recomputed"
        );
        assert_eq!(replay["replayed_header"], "true");
        let unkeyed = &replay["unkeyed_ids"];
        assert_ne!(unkeyed[0], unkeyed[1], "no key, no replay: {replay}");
        assert_ne!(unkeyed[0], replay["first_id"]);
        let keys: Vec<&Value> = replay["attempts"]
            .as_array()
            .expect("attempts")
            .iter()
            .map(|a| &a["idempotency_key"])
            .collect();
        let key = &replay["key"];
        assert_eq!(
            keys,
            [key, key, &Value::Null, &Value::Null],
            "sent only when given"
        );

        let reuse = raised(
            results,
            "key_reuse",
            "ConflictError",
            409,
            "IDEMPOTENCY_KEY_REUSE",
        );
        assert_eq!(reuse["type"], "conflict_error");
        assert_eq!(statuses(&reuse), [409], "x-should-retry: false is obeyed");
        assert_eq!(reuse["attempts"][0]["should_retry"], "false");

        let in_progress = &results["in_progress"];
        assert_eq!(in_progress["saw_conflict"], true, "{in_progress}");
        let (a, b) = (&in_progress["calls"]["a"], &in_progress["calls"]["b"]);
        assert_eq!(
            (&a["status"], &b["status"]),
            (&200.into(), &200.into()),
            "{in_progress}"
        );
        assert_eq!(a["id"], b["id"], "one completion for one key");
        let retried: Vec<&Value> = [a, b]
            .into_iter()
            .filter(|c| c["replayed"] == "true")
            .collect();
        assert_eq!(retried.len(), 1, "one answer is the replay: {in_progress}");
        assert_ne!(
            retried[0]["retry_count"], "0",
            "reached by the SDK's own retry"
        );
        let conflicts: Vec<&Value> = in_progress["attempts"]
            .as_array()
            .expect("attempts")
            .iter()
            .filter(|a| a["status"] == 409)
            .collect();
        assert!(!conflicts.is_empty(), "{in_progress}");
        for conflict in conflicts {
            assert!(
                conflict["retry_after"].is_string(),
                "Retry-After: {conflict}"
            );
            assert!(conflict["should_retry"].is_null(), "{conflict}");
        }
    }

    pub(super) fn rate_limit(results: &Value) {
        let limited = &results["rate_limit"];
        assert_eq!(limited["class"], "RateLimitError", "{limited}");
        assert_eq!(limited["code"], "RATE_LIMITED");
        assert_eq!(limited["limit"], RATE_LIMIT_RPM);
        assert_eq!(limited["remaining"], "0");
        let retry_after: u64 = limited["retry_after"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .expect("Retry-After in seconds");
        // Within the SDK's two-minute cap, so with retries it would wait and try again.
        assert!((1..=60).contains(&retry_after), "{limited}");
    }
}
