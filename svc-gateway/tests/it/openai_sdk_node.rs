//! The official OpenAI Node SDK (npm `openai`), unchanged, against a gateway in process: one
//! tool-calling round trip and one stream with usage, through the mock provider.
//!
//! The gateway runs in front of the real auth server on a fresh database and real Redis under
//! a random prefix; `tests/openai_sdk_node.mjs` runs with `baseURL` = the gateway, `apiKey` = a
//! PAT and `X-SVC-Agent-ID` as a default header, and every assertion is here. The SDK is
//! installed once under the target directory (`openai-node`, with `npm install openai`).
//! Without `node` or `npm`, or without a registry to install from, the test says why and
//! passes.
#![cfg(unix)]

use crate::openai_sdk::node;
use crate::openai_sdk::plane;

use serde_json::{Value, json};
use svc_gateway::provider::mock::MOCK_REPLY;

const MODEL: &str = "svc-mock-1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_node_sdk_works_unchanged() {
    let prefix = match tokio::task::spawn_blocking(node::sdk_prefix).await.unwrap() {
        Ok(prefix) => prefix,
        Err(why) => {
            println!("skipped: the OpenAI Node SDK cannot run: {why}");
            return;
        }
    };
    let (_db, auth, seed) = plane::auth_plane().await;
    let gateway = plane::gateway(auth.grpc_addr, &[("SVC_LLM_MODE", "mock")]).await;
    let config = json!({
        "prefix": prefix,
        "base_url": format!("{}/v1", gateway.url()),
        "token": seed.chat_token,
        "agent_id": plane::agent(&seed, "active"),
        "model": MODEL,
    });
    let results = node::run_script("openai_sdk_node.mjs", &config).await;
    println!(
        "openai {} (node {})",
        node::sdk_version(&prefix),
        results["node_version"].as_str().unwrap_or("unknown")
    );

    let tools = &results["tools"];
    assert!(tools.get("unexpected").is_none(), "{tools}");
    assert_eq!(tools["first_finish"], "tool_calls", "{tools}");
    assert_eq!(tools["first_content"], Value::Null);
    assert_eq!(tools["call_type"], "function");
    assert_eq!(tools["call_name"], "get_weather");
    // Made from the tool's schema: its one required property.
    assert_eq!(tools["call_arguments"], json!({"city": "mock"}));
    assert_eq!(tools["second_finish"], "stop", "{tools}");
    assert_eq!(tools["second_content"], MOCK_REPLY);
    assert!(tools["total_tokens"].as_u64().is_some_and(|t| t > 0));

    let stream = &results["stream"];
    assert!(stream.get("unexpected").is_none(), "{stream}");
    assert_eq!(
        stream["objects"],
        json!(["chat.completion.chunk"]),
        "{stream}"
    );
    assert_eq!(stream["text"], MOCK_REPLY);
    assert_eq!(stream["finish_reasons"], json!(["stop"]));
    assert!(
        stream["chunks"].as_u64().is_some_and(|c| c >= 3),
        "{stream}"
    );
    let usage = stream["usage"].as_array().expect("usage chunks");
    assert_eq!(usage.len(), 1, "the usage chunk asked for: {stream}");
    let count = |name: &str| usage[0][name].as_u64().unwrap_or_default();
    assert!(count("prompt_tokens") > 0, "{stream}");
    assert_eq!(
        count("total_tokens"),
        count("prompt_tokens") + count("completion_tokens")
    );
    gateway.shutdown().await;
}
