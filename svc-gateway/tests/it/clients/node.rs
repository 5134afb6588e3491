//! The Node clients, each from its own npm prefix: Claude Code and Codex CLI as commands, the
//! Vercel AI SDK as a script.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use svc_gateway::provider::mock::MOCK_REPLY;
use svc_testkit::TempDir;

use super::stack::{CLAUDE, GPT, Stack};
use super::tools::{self, Run};

/// The npm prefix `name` with `packages`, or why the test skips.
pub(crate) async fn prefix(
    client: &str,
    name: &'static str,
    packages: &'static [&'static str],
) -> Option<PathBuf> {
    match tools::npm(name, packages).await {
        Ok(prefix) => Some(prefix),
        Err(why) => {
            println!("skipped: {client} cannot run: {why}");
            None
        }
    }
}

/// The JSON lines a client printed.
pub(crate) fn json_lines(run: &Run) -> Vec<Value> {
    run.stdout
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vercel_ai_sdk_runs_tools_and_streams_on_both_providers() {
    let Some(prefix) = prefix("the Vercel AI SDK", "ai-sdk-node", tools::AI_SDK).await else {
        return;
    };
    let stack = Stack::start().await;
    let mut config = stack.config();
    config["prefix"] = json!(prefix);
    let out = tools::script(Path::new("node"), "vercel.mjs", &config).await;
    let mut failures = Vec::new();
    for case in ["openai_responses", "openai_chat", "anthropic"] {
        let result = &out[case];
        if result.get("error").is_some() {
            failures.push(format!("{case}: {} {}", result["error"], result["message"]));
            continue;
        }
        assert_eq!(result["tool_calls"], json!(["mock"]), "{case}: {result}");
        assert_eq!(result["text"], MOCK_REPLY, "{case}: {result}");
        assert_eq!(result["steps"], 2, "{case}: {result}");
        assert_eq!(result["streamed"], MOCK_REPLY, "{case}: {result}");
        assert!(result["pieces"].as_u64() > Some(1), "{case}: {result}");
        assert_eq!(result["finish"], "stop", "{case}: {result}");
    }
    assert!(
        failures.is_empty(),
        "{failures:#?}\n{}",
        stack.upstream.summary()
    );
}

/// Codex's tools that do their work without a shell, then those with one.
const CODEX_TOOLS: [&str; 4] = ["update_plan", "shell_command", "shell", "exec_command"];

/// `codex exec` configured for the gateway of `stack` with `model`: a model provider in a
/// fresh `CODEX_HOME/config.toml` (base URL, the variable holding the PAT, the agent header).
fn codex(prefix: &Path, stack: &Stack, model: &str) -> (Command, TempDir) {
    let (mut command, home) = tools::isolated(&tools::bin(prefix, "codex"));
    let codex_home = home.path().join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    let config = format!(
        "model = \"{model}\"\nmodel_provider = \"svc\"\n\n[model_providers.svc]\n\
         name = \"svc gateway\"\nbase_url = \"{}/v1\"\nenv_key = \"SVC_TOKEN\"\n\
         wire_api = \"responses\"\nhttp_headers = {{ \"X-SVC-Agent-ID\" = \"{}\" }}\n",
        stack.url(),
        stack.agent()
    );
    std::fs::write(codex_home.join("config.toml"), config).unwrap();
    command
        .env("CODEX_HOME", &codex_home)
        .env("SVC_TOKEN", stack.token())
        .args([
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--sandbox",
            "read-only",
        ]);
    (command, home)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_runs_a_tool_loop_on_an_openai_and_a_claude_model() {
    let Some(prefix) = prefix("Codex CLI", "codex-node", tools::CODEX).await else {
        return;
    };
    let stack = Stack::start().await;
    stack.upstream.prefer(&CODEX_TOOLS);
    let mut failures = Vec::new();
    for (model, path) in [(GPT, "/v1/responses"), (CLAUDE, "/v1/messages")] {
        let (mut command, home) = codex(&prefix, &stack, model);
        command.arg("Make a plan, then say done.");
        let run = tools::run(command, home.path()).await;
        let events = json_lines(&run);
        let said: Vec<&str> = events
            .iter()
            .filter(|e| e["type"] == "item.completed" && e["item"]["type"] == "agent_message")
            .filter_map(|e| e["item"]["text"].as_str())
            .collect();
        let looped = stack
            .upstream
            .seen_at(path, model)
            .iter()
            .any(|t| t.has_tool_result());
        if !(run.success && said.last() == Some(&MOCK_REPLY) && looped) {
            failures.push(format!(
                "{model}: success {}, said {said:?}, tool result upstream {looped}\n{}",
                run.success,
                run.output()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{}\n{}",
        failures.join("\n"),
        stack.upstream.summary()
    );
}
