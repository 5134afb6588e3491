//! A stream that breaks midway fails in the protocol of the route the client called, and the
//! official SDKs raise on it with the gateway's code: the Anthropic Python SDK on
//! `/v1/messages`, the OpenAI Python and Node SDKs on `/v1/responses` and
//! `/v1/chat/completions`.
//!
//! One gateway in process, in front of the real auth server on a fresh database, with a
//! provider that answers every stream with one whole event in the route's protocol, half of
//! the next, and then a lost connection. The scripts (`stream_errors_sdk.py`,
//! `stream_errors_sdk.mjs`) record what each SDK made of it; every assertion is here. The
//! Python SDKs come from the `anthropic-venv` virtualenv and the Node SDK from `openai-node`
//! under the target directory; without an interpreter or a registry to install them from, the
//! test says why and passes.
#![cfg(unix)]

use crate::openai_sdk::install;
use crate::openai_sdk::node;
use crate::openai_sdk::plane;
use crate::support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use svc_gateway::Gateway;
use svc_gateway::provider::{CallInfo, Provider, ProviderError, ProviderReply, Registry};
use svc_gateway::request::{ApiRequest, Endpoint};

/// The one model: every stream it answers breaks.
const MODEL: &str = "svc-cut-1";
/// The text of the one whole event before the break.
const CUT_TEXT: &str = "Hel";
/// What the provider says when its stream breaks (never shown to the client).
const CUT_REASON: &str = "provider stream failed";
/// Bounds the Python script; its own calls time out after 30 s each.
const SCRIPT_DEADLINE: Duration = Duration::from_secs(300);

/// Streams one whole event in the protocol of the route called, half of the next, then fails.
struct Cutting;

impl Provider for Cutting {
    fn name(&self) -> &'static str {
        "cutting"
    }

    fn complete<'a>(
        &'a self,
        request: &'a ApiRequest,
        _call: &'a CallInfo,
    ) -> BoxFuture<'a, Result<ProviderReply, ProviderError>> {
        let first = match request.endpoint {
            Endpoint::Messages => format!(
                "event: message_start\ndata: {}\n\nevent: content_block_start\ndata: {}\n\n\
                 event: content_block_delta\ndata: {}\n\n",
                json!({"type": "message_start", "message": {"id": "msg_cut", "type": "message",
                    "role": "assistant", "model": MODEL, "content": [], "stop_reason": null,
                    "stop_sequence": null, "usage": {"input_tokens": 3, "output_tokens": 0}}}),
                json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}}),
                json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": CUT_TEXT}}),
            ),
            Endpoint::Responses => format!(
                "event: response.created\ndata: {}\n\nevent: response.output_text.delta\ndata: {}\n\n",
                json!({"type": "response.created", "sequence_number": 0, "response": {
                    "id": "resp_cut", "object": "response", "created_at": 0,
                    "status": "in_progress", "model": MODEL, "output": []}}),
                json!({"type": "response.output_text.delta", "sequence_number": 1,
                    "item_id": "msg_cut", "output_index": 0, "content_index": 0,
                    "delta": CUT_TEXT, "logprobs": []}),
            ),
            _ => format!(
                "data: {}\n\n",
                json!({"id": "chatcmpl-cut", "object": "chat.completion.chunk", "created": 0,
                    "model": MODEL, "choices": [{"index": 0, "delta": {"content": CUT_TEXT},
                    "finish_reason": null}]}),
            ),
        };
        let frames = [
            Ok(Bytes::from(first)),
            Ok(Bytes::from_static(b"event: message_delta\ndata: {\"ty")),
            Err(ProviderError::Unavailable { reason: CUT_REASON }),
        ];
        Box::pin(async move {
            Ok(ProviderReply::Stream {
                status: http::StatusCode::OK,
                events: Box::pin(futures_util::stream::iter(frames)),
            })
        })
    }
}

/// What a script must have seen on `route`: the SDK raised, with the gateway's code and the
/// request id, after the text of the whole event.
fn assert_raised(results: &Value, route: &str, class: &str) {
    let seen = &results[route];
    assert_eq!(seen["class"], class, "{route}: {seen}");
    assert_eq!(seen["code"], "PROVIDER_UNAVAILABLE", "{route}: {seen}");
    assert_eq!(seen["text"], CUT_TEXT, "{route}: {seen}");
    let request_id = seen["request_id"].as_str().unwrap_or_default();
    assert_eq!(request_id.len(), 36, "{route}: a request id, {seen}");
    assert!(
        !seen.to_string().contains(CUT_REASON),
        "{route}: the provider's reason stays in the logs: {seen}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_sdk_raises_on_a_broken_stream_with_the_gateways_code() {
    let python = tokio::task::spawn_blocking(|| {
        install::venv(
            "anthropic-venv",
            &["anthropic", "openai"],
            "import anthropic, openai",
        )
    });
    let node = tokio::task::spawn_blocking(node::sdk_prefix);
    let (python, node) = (python.await.unwrap(), node.await.unwrap());
    if let (Err(python), Err(node)) = (&python, &node) {
        println!("skipped: no SDK can run: {python}; {node}");
        return;
    }
    let (_db, auth, seed) = plane::auth_plane().await;
    let config = support::config(auth.grpc_addr, &[("SVC_LLM_MODE", "mock")]);
    let gateway = Gateway::new(config)
        .expect("gateway builds")
        .with_registry(Registry::new(Arc::new(Cutting), [MODEL.to_owned()]))
        .start()
        .await
        .expect("gateway starts");
    let config = json!({
        "base_url": gateway.url(),
        "token": seed.chat_token,
        "agent_id": plane::agent(&seed, "active"),
        "model": MODEL,
    });

    match python {
        Ok(python) => {
            let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/stream_errors_sdk.py");
            let results = install::run_json(&python, &[script], &config, SCRIPT_DEADLINE).await;
            println!("python: {results}");
            assert_raised(&results, "messages", "APIStatusError");
            assert_eq!(results["messages"]["type"], "api_error");
            assert_raised(&results, "messages_helper", "APIStatusError");
            assert_raised(&results, "responses", "APIError");
            assert_raised(&results, "chat", "APIError");
        }
        Err(why) => println!("skipped the Python SDKs: {why}"),
    }
    match node {
        Ok(prefix) => {
            let mut config = config;
            config["prefix"] = json!(&prefix);
            let results = node::run_script("stream_errors_sdk.mjs", &config).await;
            println!("openai {} (node): {results}", node::sdk_version(&prefix));
            assert_raised(&results, "responses", "APIError");
            assert_raised(&results, "chat", "APIError");
        }
        Err(why) => println!("skipped the Node SDK: {why}"),
    }
    gateway.shutdown().await;
}
