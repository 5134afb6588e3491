//! Claude Code (`claude -p`) with its default model, configured only through its variables:
//! `ANTHROPIC_BASE_URL`, `ANTHROPIC_AUTH_TOKEN` (the PAT), `ANTHROPIC_CUSTOM_HEADERS` (the
//! agent header), with non-essential traffic off and a fresh `HOME`.
//!
//! When a stream fails, Claude Code sends the turn again without streaming (unless
//! `CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK` is set) and says so only in its debug log: the
//! test checks that the gateway's error reaches it there, and that with the fallback off the
//! run ends with that error.

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use svc_gateway::provider::mock::MOCK_REPLY;
use svc_testkit::TempDir;

use super::stack::Stack;
use super::tools::{self, Run};
use super::upstream::CUT_MARKER;

/// The message of the gateway's PROVIDER_UNAVAILABLE envelope.
const PROVIDER_UNAVAILABLE_MESSAGE: &str = "The provider is unavailable.";

/// The tool the upstream calls: it only reads, so it needs no permission in `-p` mode.
const TOOL: &str = "ToolSearch";

/// `claude` configured for the gateway of `stack`, and its home (also its working directory).
fn claude(prefix: &Path, stack: &Stack) -> (Command, TempDir) {
    let (mut command, home) = tools::isolated(&tools::bin(prefix, "claude"));
    command
        .env("ANTHROPIC_BASE_URL", stack.url())
        .env("ANTHROPIC_AUTH_TOKEN", stack.token())
        .env(
            "ANTHROPIC_CUSTOM_HEADERS",
            format!("X-SVC-Agent-ID: {}", stack.agent()),
        )
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    (command, home)
}

/// `claude -p prompt` with `env` on top, its events as JSON lines, and its debug log.
async fn ask(
    prefix: &Path,
    stack: &Stack,
    prompt: &str,
    env: &[(&str, &str)],
) -> (Run, Vec<Value>, String) {
    let (mut command, home) = claude(prefix, stack);
    let debug = home.path().join("debug.log");
    command
        .envs(env.iter().copied())
        .args(["-p", prompt, "--output-format", "stream-json", "--verbose"])
        .arg("--debug-file")
        .arg(&debug);
    let run = tools::run(command, home.path()).await;
    let events = super::node::json_lines(&run);
    let log = std::fs::read_to_string(&debug).unwrap_or_default();
    (run, events, log)
}

/// The content blocks of the run's messages of `role`.
fn blocks<'a>(events: &'a [Value], role: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["type"] == role)
        .filter_map(|e| e["message"]["content"].as_array())
        .flatten()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_runs_a_tool_loop_and_shows_a_cut_stream() {
    let Some(prefix) =
        super::node::prefix("Claude Code", "claude-code-node", tools::CLAUDE_CODE).await
    else {
        return;
    };
    let stack = Stack::start().await;
    stack.upstream.prefer(&[TOOL]);

    let (run, events, _) = ask(&prefix, &stack, "Find the Rust files here.", &[]).await;
    let output = run.output();
    assert!(run.success, "{output}\n{}", stack.logs());
    let result = events
        .iter()
        .find(|e| e["type"] == "result")
        .unwrap_or_else(|| panic!("a result: {output}"));
    assert_eq!(result["is_error"], false, "{output}");
    assert_eq!(result["result"], MOCK_REPLY, "{output}");
    let called = blocks(&events, "assistant")
        .into_iter()
        .find(|b| b["type"] == "tool_use")
        .unwrap_or_else(|| panic!("a tool call: {output}\n{}", stack.upstream.summary()));
    assert_eq!(called["name"], TOOL);
    let answered = blocks(&events, "user")
        .into_iter()
        .find(|b| b["type"] == "tool_result")
        .unwrap_or_else(|| panic!("a tool result: {output}"));
    assert_eq!(answered["tool_use_id"], called["id"]);
    assert_ne!(answered["is_error"], true, "the tool ran: {answered}");
    // The loop went through the gateway: the tool's result reached the upstream.
    let turns = stack.upstream.seen_at("/v1/messages", "claude-");
    assert!(turns.iter().any(|t| t.has_tool_result()), "{turns:?}");
    assert!(turns.iter().all(|t| t.status == 200), "{turns:?}");

    // A stream the upstream cuts. Claude Code's own answer to a failed stream is to send the
    // turn again without streaming: the gateway's error must reach it (its log names the code)
    // and the stream must not be resent.
    let cut_so_far = || stack.upstream.seen().into_iter().filter(|e| e.cut).count();
    let prompt = format!("Say {CUT_MARKER}.");
    let (run, _, log) = ask(&prefix, &stack, &prompt, &[]).await;
    let summary = stack.upstream.summary();
    assert!(run.success, "{}", run.output());
    assert!(
        log.contains("PROVIDER_UNAVAILABLE"),
        "the gateway's error reached Claude Code: {log}\n{summary}"
    );
    assert_eq!(cut_so_far(), 1, "one stream cut, not resent: {summary}");

    // Without that fallback, the run ends with the gateway's error: Claude Code prints the
    // error's message (the code stays in its log).
    let fallback_off = [("CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK", "1")];
    let (run, events, log) = ask(&prefix, &stack, &prompt, &fallback_off).await;
    let output = run.output();
    let summary = stack.upstream.summary();
    assert!(
        output.contains(PROVIDER_UNAVAILABLE_MESSAGE) && log.contains("PROVIDER_UNAVAILABLE"),
        "the gateway's error shows: {output}\n{summary}"
    );
    let result = events.iter().find(|e| e["type"] == "result");
    assert!(
        !run.success || result.is_some_and(|r| r["is_error"] == true),
        "the run failed: {output}"
    );
    assert_eq!(cut_so_far(), 2, "the cut turn was sent once: {summary}");
}
