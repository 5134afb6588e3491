//! The official Anthropic Python SDK (PyPI `anthropic`) against `/v1/messages` (its beta
//! namespace, as Claude Code calls it, included) and `/v1/messages/count_tokens`, and the
//! official OpenAI Python SDK running a tool call against the same Claude model through the
//! chat translation.
//!
//! The gateway's registry sends `claude-*` to an anthropic provider, a fake Messages API on
//! loopback. The SDK is configured as Claude Code is with `ANTHROPIC_AUTH_TOKEN`: the PAT as
//! `Authorization: Bearer`, and the agent as a default header. The SDKs come from a virtualenv
//! under the target directory (`anthropic-venv`, made once with `pip install anthropic
//! openai`, then reused). Without `python3`, or without a registry to install them from, the
//! test says why and passes.
#![cfg(unix)]

use crate::anthropic::upstream;
use crate::openai_sdk::install;
use crate::registry;

use std::time::Duration;

use serde_json::json;
use svc_gateway::provider::mock::MOCK_REPLY;
use upstream::{Anthropic, COUNTED};

/// Bounds the script; its own calls time out after 30 s each.
const SCRIPT_DEADLINE: Duration = Duration::from_secs(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdks_talk_to_a_claude_model() {
    let Some(python) = install::both_python_sdks().await else {
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
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/anthropic_sdk.py");
    let out = install::run_json(&python, &[script], &config, SCRIPT_DEADLINE).await;

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
    assert_eq!(out["beta"]["text"], MOCK_REPLY);
    assert_eq!(out["count"]["input_tokens"], COUNTED);

    assert_eq!(out["openai"]["finish_reason"], "tool_calls");
    assert_eq!(out["openai"]["name"], "get_weather");
    assert_eq!(out["openai"]["arguments"], "{}");
    assert_eq!(out["openai"]["then"], MOCK_REPLY);
    assert_eq!(out["openai"]["then_finish_reason"], "stop");
    assert!(out["openai"]["then_completion_tokens"].as_u64() > Some(0));

    // Every call reached the provider with its key, never the PAT.
    let seen = anthropic.seen();
    assert_eq!(seen.len(), 8);
    assert_eq!(
        seen[4].headers["anthropic-beta"],
        "interleaved-thinking-2025-05-14"
    );
    assert_eq!(seen[5].path, "/v1/messages/count_tokens");
    for exchange in &seen {
        assert_eq!(exchange.headers["x-api-key"], "sk-ant-fake");
        assert!(exchange.headers.get("authorization").is_none());
    }
}
