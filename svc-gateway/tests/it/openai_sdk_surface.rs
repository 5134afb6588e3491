//! The whole OpenAI surface, through the gateway, with the official Python SDK unchanged:
//! a two-turn tool-calling conversation, a vision message, `response_format` with a JSON
//! schema, streams with and without `include_usage`, embeddings (base64 as the SDK asks by
//! default, and float), the Responses API streamed and not, and the model routes.
//!
//! Each test runs a gateway in process in front of the real auth server on a fresh database
//! and real Redis under a random prefix, and `tests/openai_sdk_surface.py` against it. In mock
//! mode the mock provider answers; in live mode the live provider calls a fake OpenAI on
//! loopback that answers in OpenAI's shapes and records what it received, which is then held
//! against what the SDK sent. The SDK comes as in `openai_sdk.rs`; without `python3`, or
//! without a registry to install it from, the tests say why and pass.
#![cfg(unix)]

use crate::openai_sdk::plane;
use crate::openai_sdk::python;
use crate::openai_sdk::surface;
use crate::openai_sdk::upstream;
use crate::support;

use serde_json::{Value, json};
use svc_gateway::provider::mock::MOCK_REPLY;
use upstream::OpenAi;

use surface::Expect;

/// The live registry: a chat model and an embedding model.
const LIVE_MODELS: [&str; 2] = ["gpt-sdk-chat", "text-embedding-sdk"];

/// The SDK's Python, or `None` (said why) when it cannot be had here.
async fn sdk() -> Option<std::path::PathBuf> {
    match tokio::task::spawn_blocking(python::sdk_python)
        .await
        .unwrap()
    {
        Ok(python) => Some(python),
        Err(why) => {
            println!("skipped: the OpenAI Python SDK cannot run: {why}");
            None
        }
    }
}

/// Starts a gateway with `vars` (plus Redis) on the auth plane, runs the script with
/// `model` and `embedding_model`; returns its results and the client's token.
async fn run(vars: &[(&str, &str)], model: &str, embedding_model: &str) -> Option<(Value, String)> {
    let python = sdk().await?;
    let (_db, auth, seed) = plane::auth_plane().await;
    let gateway = plane::gateway(auth.grpc_addr, vars).await;
    let config = json!({
        "base_url": format!("{}/v1", gateway.url()),
        "token": seed.chat_token,
        "agent_id": plane::agent(&seed, "active"),
        "model": model,
        "embedding_model": embedding_model,
    });
    let results = python::run_script(&python, "openai_sdk_surface.py", &config).await;
    let version = results["sdk_version"].as_str().expect("the SDK version");
    println!("openai {version} ({})", python.display());
    gateway.shutdown().await;
    Some((results, seed.chat_token))
}

fn assert_surface(results: &Value, expect: &Expect) {
    surface::tools(results, expect);
    surface::vision_and_json(results, expect);
    surface::streams(results, expect);
    surface::embeddings(results, expect);
    surface::responses(results, expect);
    surface::models(results, expect);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_covers_the_surface_in_mock_mode() {
    const MODEL: &str = "svc-mock-1";
    let Some((results, _)) = run(&[("SVC_LLM_MODE", "mock")], MODEL, MODEL).await else {
        return;
    };
    let expect = Expect {
        text: MOCK_REPLY,
        // Made from the tool's schema and the response format's.
        tool_arguments: json!({"city": "mock"}),
        json_reply: Some(json!({"city": "mock", "temperature_c": 1})),
        models: &[MODEL],
        model: MODEL,
        owned_by: "mock",
        dimensions: 8,
    };
    assert_surface(&results, &expect);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_covers_the_surface_in_live_mode() {
    let openai = OpenAi::start().await;
    let base = openai.base_url();
    let models = LIVE_MODELS.join(",");
    let vars = [
        ("SVC_LLM_MODE", "live"),
        ("SVC_PROVIDER_BASE_URL", base.as_str()),
        ("SVC_PROVIDER_API_KEY", support::PROVIDER_KEY),
        ("SVC_PROVIDER_MODELS", &models),
        ("SVC_PROVIDER_TIMEOUT", "10s"),
    ];
    let Some((results, token)) = run(&vars, LIVE_MODELS[0], LIVE_MODELS[1]).await else {
        return;
    };
    let expect = Expect {
        text: upstream::UPSTREAM_REPLY,
        tool_arguments: serde_json::from_str(upstream::TOOL_ARGUMENTS).unwrap(),
        json_reply: Some(serde_json::from_str(upstream::JSON_REPLY).unwrap()),
        models: &LIVE_MODELS,
        model: LIVE_MODELS[0],
        owned_by: "live",
        dimensions: upstream::DIMENSIONS,
    };
    assert_surface(&results, &expect);
    surface::forwarded(&results, &openai.seen(), &token, support::PROVIDER_KEY);
}
