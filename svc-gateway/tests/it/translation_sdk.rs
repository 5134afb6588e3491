//! The official OpenAI and Anthropic Python SDKs across protocols, through the translation:
//! the OpenAI SDK's `responses.create` (a function tool, then streamed), `responses.stream`,
//! `chat.completions.parse` and `responses.parse` with a pydantic model against a Claude model,
//! and the Anthropic SDK's `messages.create` and `messages.stream` with a tool against an
//! OpenAI-compatible model.
//!
//! One fake upstream on loopback speaks both protocols (the registry sends `claude-*` to it as
//! an anthropic provider and `gpt-*` as an OpenAI-compatible one) and checks every request it
//! gets with the gateway's validator of its route. The SDKs come from the virtualenv
//! `anthropic-venv` under the target directory (`pip install anthropic openai`, made once and
//! reused). Without `python3`, or without a registry to install them from, the test says why
//! and passes.
#![cfg(unix)]

use crate::anthropic::upstream;
use crate::openai_sdk::install;
use crate::registry;

use std::time::Duration;

use serde_json::{Value, json};
use svc_gateway::provider::mock::MOCK_REPLY;
use upstream::Anthropic;

/// The providers' key.
const KEY: &str = "sk-fake-0123456789";
/// Bounds the script; its own calls time out after 30 s each.
const SCRIPT_DEADLINE: Duration = Duration::from_secs(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdks_talk_across_protocols() {
    let Some(python) = install::both_python_sdks().await else {
        return;
    };
    let fake = Anthropic::start().await;
    let file = format!(
        "[[providers]]\nname = \"anthropic\"\nkind = \"anthropic\"\nbase_url = \"{base}\"\n\
         api_key_env = \"FAKE_KEY\"\n\n[[providers]]\nname = \"openai\"\nkind = \"openai\"\n\
         base_url = \"{base}\"\napi_key_env = \"FAKE_KEY\"\n\n[[models]]\nname = \"claude-*\"\n\
         targets = [\"anthropic\"]\n\n[[models]]\nname = \"gpt-*\"\ntargets = [\"openai\"]\n",
        base = fake.base_url()
    );
    let (env, _dir) = registry::gateway(&file, &[("FAKE_KEY", KEY)]).await;
    let config = json!({
        "base_url": env.gateway.url(),
        "token": env.world.chat_token,
        "agent_id": env.world.agent_id.to_string(),
        "claude_model": "claude-sonnet-4-5",
        "openai_model": "gpt-4o",
    });
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/translation_sdk.py");
    let out = install::run_json(&python, &[script], &config, SCRIPT_DEADLINE).await;

    let responses = &out["responses"];
    assert_eq!(responses["status"], "completed");
    assert_eq!(responses["call_name"], "get_weather");
    // The mock fills the tool's one required property.
    assert_eq!(responses["call_arguments"], r#"{"city":"mock"}"#);
    assert!(responses["input_tokens"].as_u64() > Some(0));
    let kinds: Vec<&str> = responses["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"response.created"));
    assert_eq!(kinds.last(), Some(&"response.completed"));
    for kind in [
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }
    assert!(responses["deltas"].as_u64() > Some(1), "streamed in pieces");
    assert_eq!(responses["text"], MOCK_REPLY);
    assert_eq!(responses["output_text"], MOCK_REPLY);
    assert!(responses["output_tokens"].as_u64() > Some(0));
    assert_eq!(responses["helper_text"], MOCK_REPLY);
    assert_eq!(responses["helper_output_text"], MOCK_REPLY);

    let parse = &out["parse"];
    assert_eq!(parse["finish_reason"], "stop");
    assert_eq!(parse["person"], json!({"name": "Ada", "age": 36}));
    assert_eq!(parse["responses_person"], json!({"name": "Ada", "age": 36}));

    let messages = &out["messages"];
    assert_eq!(messages["stop_reason"], "tool_use");
    assert_eq!(messages["name"], "get_weather");
    assert_eq!(messages["input"], json!({}));
    assert!(messages["input_tokens"].as_u64() > Some(0));
    assert!(messages["output_tokens"].as_u64() > Some(0));
    assert!(messages["pieces"].as_u64() > Some(1), "streamed in pieces");
    assert_eq!(messages["then"], MOCK_REPLY);
    assert_eq!(messages["then_stop_reason"], "end_turn");
    assert!(messages["then_output_tokens"].as_u64() > Some(0));
    assert!(
        messages["then_input_tokens"].as_u64() > Some(0),
        "the input counted at the end"
    );
    assert_eq!(messages["streamed_stop_reason"], "tool_use");
    assert_eq!(messages["streamed_tool"], "get_weather");
    assert_eq!(messages["streamed_input"], json!({}));

    // Each SDK call reached the upstream in its protocol, with the provider's key only.
    let seen = fake.seen();
    let paths: Vec<&str> = seen.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths.iter().filter(|p| **p == "/v1/messages").count(), 5);
    assert_eq!(
        paths
            .iter()
            .filter(|p| **p == "/v1/chat/completions")
            .count(),
        3
    );
    for exchange in &seen {
        let answer = String::from_utf8_lossy(&exchange.answer);
        assert!(
            !answer.contains("\"type\":\"error\""),
            "{} was refused: {answer}",
            exchange.path
        );
        match exchange.path.as_str() {
            "/v1/messages" => assert_eq!(exchange.headers["x-api-key"], KEY),
            _ => assert_eq!(exchange.headers["authorization"], format!("Bearer {KEY}")),
        }
    }
    let forced: Value = serde_json::from_slice(&seen[3].body).unwrap();
    assert_eq!(
        forced["tool_choice"],
        json!({"type": "tool", "name": "Person"})
    );
}
