//! The official Anthropic Python SDK (PyPI `anthropic`) against `/v1/messages`, and the
//! official OpenAI Python SDK running a tool call against the same Claude model through the
//! chat translation.
//!
//! The gateway's registry sends `claude-*` to an anthropic provider, a fake Messages API on
//! loopback. The SDK is configured as Claude Code is with `ANTHROPIC_AUTH_TOKEN`: the PAT as
//! `Authorization: Bearer`, and the agent as a default header. The SDKs come from a virtualenv
//! under the target directory (`anthropic-venv`, made once with `pip install anthropic
//! openai`, then reused). Without `python3` at all the test says so and passes.
#![cfg(unix)]

mod registry;
mod support;
#[path = "anthropic/upstream.rs"]
mod upstream;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use svc_gateway::provider::mock::MOCK_REPLY;
use svc_testkit::TempDir;
use upstream::Anthropic;

/// Bounds the script; its own calls time out after 30 s each.
const SCRIPT_DEADLINE: Duration = Duration::from_secs(300);
const VENV_DIR: &str = "anthropic-venv";
const IMPORTS: &str = "import anthropic, openai";

fn imports(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", IMPORTS])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn must(command: &mut Command, what: &str) {
    let output = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A Python with both SDKs, or `None` without `python3`.
fn sdk_python() -> Option<PathBuf> {
    if Command::new("python3").arg("--version").output().is_err() {
        return None;
    }
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the tests' temp dir sits in the target dir");
    let venv = target.join(VENV_DIR);
    let python = venv.join("bin").join("python");
    if imports(&python) {
        return Some(python);
    }
    // Built aside and renamed into place: a concurrent run never sees a half-made one.
    let staging = target.join(format!("{VENV_DIR}.{}", uuid::Uuid::new_v4().simple()));
    must(
        Command::new("python3").args(["-m", "venv"]).arg(&staging),
        "python3 -m venv",
    );
    must(
        Command::new(staging.join("bin").join("python")).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "anthropic",
            "openai",
        ]),
        "pip install anthropic openai",
    );
    if std::fs::rename(&staging, &venv).is_err() {
        // Another run put its own in place first; either will do.
        let _ = std::fs::remove_dir_all(&staging);
    }
    assert!(imports(&python), "{} lacks the SDKs", venv.display());
    Some(python)
}

/// Runs the script with `config`; returns what it printed.
async fn run_script(python: &Path, config: &Value) -> Value {
    let dir = TempDir::create();
    let config_path = dir.path().join("config.json");
    std::fs::write(&config_path, config.to_string()).unwrap();
    let (stdout, stderr) = (dir.path().join("out.json"), dir.path().join("err.txt"));
    let mut command = Command::new(python);
    command
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/anthropic_sdk.py"
        ))
        .arg(&config_path)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap());
    // The SDKs read keys, base URLs and proxies from the environment: only the config counts.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().to_ascii_uppercase();
        if name.starts_with("ANTHROPIC_") || name.starts_with("OPENAI_") || name.ends_with("_PROXY")
        {
            command
                .env_remove(&name)
                .env_remove(name.to_ascii_lowercase());
        }
    }
    let mut child = command.spawn().expect("spawn the SDK script");
    let deadline = Instant::now() + SCRIPT_DEADLINE;
    // Polled: the gateway answers on this same runtime.
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the SDK script did not finish in {SCRIPT_DEADLINE:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let err = std::fs::read_to_string(&stderr).unwrap_or_default();
    assert!(status.success(), "the SDK script failed: {err}");
    let out = std::fs::read_to_string(&stdout).unwrap();
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out:?}; {err}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdks_talk_to_a_claude_model() {
    let Some(python) = sdk_python() else {
        eprintln!("python3 not found: the Anthropic SDK test is skipped");
        return;
    };
    let anthropic = Anthropic::start().await;
    let file = format!(
        "[[providers]]\nname = \"anthropic\"\nkind = \"anthropic\"\nbase_url = \"{}\"\n\
         api_key_env = \"FAKE_ANTHROPIC_KEY\"\n\n[[models]]\nname = \"claude-*\"\n\
         targets = [\"anthropic\"]\n",
        anthropic.base_url()
    );
    let (env, _dir) = registry::gateway(&file, &[("FAKE_ANTHROPIC_KEY", "sk-ant-fake")]).await;
    let config = json!({
        "base_url": env.gateway.url(),
        "token": env.world.chat_token,
        "agent_id": env.world.agent_id.to_string(),
        "model": "claude-sonnet-4-5",
    });
    let out = run_script(&python, &config).await;

    assert_eq!(out["call"]["text"], MOCK_REPLY);
    assert_eq!(out["call"]["stop_reason"], "end_turn");
    assert!(out["call"]["input_tokens"].as_u64() > Some(0));
    assert_eq!(out["stream"]["text"], MOCK_REPLY);
    assert!(
        out["stream"]["pieces"].as_u64() > Some(1),
        "streamed in pieces"
    );
    assert_eq!(out["stream"]["stop_reason"], "end_turn");
    assert_eq!(out["tool"]["stop_reason"], "tool_use");
    assert_eq!(out["tool"]["name"], "get_weather");
    assert_eq!(out["tool"]["input"], json!({}));
    assert_eq!(out["tool"]["then"], MOCK_REPLY);

    assert_eq!(out["openai"]["finish_reason"], "tool_calls");
    assert_eq!(out["openai"]["name"], "get_weather");
    assert_eq!(out["openai"]["arguments"], "{}");
    assert_eq!(out["openai"]["then"], MOCK_REPLY);
    assert_eq!(out["openai"]["then_finish_reason"], "stop");
    assert!(out["openai"]["then_completion_tokens"].as_u64() > Some(0));

    // Every call reached the provider with its key, never the PAT.
    let seen = anthropic.seen();
    assert_eq!(seen.len(), 6);
    for exchange in &seen {
        assert_eq!(exchange.headers["x-api-key"], "sk-ant-fake");
        assert!(exchange.headers.get("authorization").is_none());
    }
}
