//! The official OpenAI Python SDK, unchanged, against a gateway in process.
//!
//! One gateway (mock provider, real Redis under a random prefix) in front of the real auth
//! server on a fresh database, and one Python process running `tests/openai_sdk.py` with
//! `base_url` = the gateway, `api_key` = a PAT and `X-SVC-Agent-ID` as a default header. The
//! script records what the SDK made of each answer; every assertion is here. Beside the mock's
//! model the provider serves two of the test's own: one held in flight until the script lets it
//! go (so a second call with its key meets 409 IDEMPOTENCY_IN_PROGRESS), and one that dies in
//! the middle of a stream.
//!
//! The SDK comes from the system `python3` when it has one, else from a virtualenv under the
//! target directory (`openai-venv`, made once with `pip install openai`, then reused). Without
//! `python3`, or without a registry to install it from, the test says why and passes.
#![cfg(unix)]

mod checks;
use crate::support;

// The SDK fixtures the other client tests share: installing the clients, the plane behind the
// gateway, running a script, and the fake OpenAI upstream with what the surface test expects.
pub(crate) mod install;
pub(crate) mod node;
pub(crate) mod plane;
pub(crate) mod python;
pub(crate) mod surface;
pub(crate) mod upstream;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use serde_json::json;
use svc_gateway::Gateway;
use svc_gateway::provider::mock::{MOCK_REPLY, MockProvider};
use svc_gateway::provider::{CallInfo, Provider, ProviderError, ProviderReply, Registry};
use svc_gateway::request::ApiRequest;
use tokio::sync::Notify;

/// The mock's model.
const MODEL: &str = "svc-mock-1";
/// Answers only once [`RELEASE_MODEL`] was asked: keeps a keyed call in flight.
const HOLD_MODEL: &str = "svc-hold-1";
/// Lets the held call answer.
const RELEASE_MODEL: &str = "svc-release-1";
/// Streams one chunk, then fails with the connection cut in the middle of the next event.
const CUT_MODEL: &str = "svc-cut-1";
/// The text of [`CUT_MODEL`]'s one whole chunk.
const CUT_TEXT: &str = "Hel";
/// Low enough for the script to reach the limit quickly, high enough for its other checks.
const RATE_LIMIT_RPM: &str = "60";

/// The mock provider, plus a hold: a [`HOLD_MODEL`] call answers once a [`RELEASE_MODEL`] call
/// came in (before or after it), so the script decides how long a claim stays pending; and a
/// provider that dies mid-stream, [`CUT_MODEL`].
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
        request: &'a ApiRequest,
        call: &'a CallInfo,
    ) -> BoxFuture<'a, Result<ProviderReply, ProviderError>> {
        Box::pin(async move {
            match request.model.as_str() {
                HOLD_MODEL => self.release.notified().await,
                RELEASE_MODEL => self.release.notify_one(),
                CUT_MODEL => return Ok(cut_stream()),
                _ => {}
            }
            self.mock.complete(request, call).await
        })
    }
}

fn cut_stream() -> ProviderReply {
    let chunk = json!({
        "id": "chatcmpl-cut",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": CUT_MODEL,
        "choices": [{"index": 0, "delta": {"content": CUT_TEXT}, "finish_reason": null}],
    });
    let frames = [
        Ok(Bytes::from(format!("data: {chunk}\n\n"))),
        Ok(Bytes::from_static(
            b"data: {\"id\": \"chatcmpl-cut\", \"obj",
        )),
        Err(ProviderError::Unavailable {
            reason: "provider stream failed",
        }),
    ];
    ProviderReply::Stream {
        status: http::StatusCode::OK,
        events: Box::pin(futures_util::stream::iter(frames)),
    }
}

async fn gateway(auth: SocketAddr, extra: &[(&str, &str)]) -> svc_gateway::Running {
    let redis = svc_testkit::redis_url();
    let prefix = svc_testkit::redis_prefix();
    let mut vars = vec![
        ("SVC_LLM_MODE", "mock"),
        ("REDIS_URL", redis.as_str()),
        ("SVC_REDIS_KEY_PREFIX", prefix.as_str()),
        ("SVC_RATE_LIMIT_RPM", RATE_LIMIT_RPM),
    ];
    vars.extend_from_slice(extra);
    let config = support::config(auth, &vars);
    let provider = Holding {
        mock: MockProvider::new(),
        release: Arc::new(Notify::new()),
    };
    let models = [MODEL, HOLD_MODEL, RELEASE_MODEL, CUT_MODEL].map(String::from);
    Gateway::new(config)
        .expect("gateway builds")
        .with_registry(Registry::new(Arc::new(provider), models))
        .start()
        .await
        .expect("gateway starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_sdk_works_unchanged() {
    python_sdk_script(&[]).await;
}

/// The same script where every call is under a token limit (one no call reaches), so each
/// request is counted in its reservation's script once its body is parsed: its answers, its
/// errors and its 429s are the same to the SDK.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_sdk_works_unchanged_when_requests_count_with_reservations() {
    python_sdk_script(&[("SVC_RATE_LIMIT_TPM", "100000000")]).await;
}

async fn python_sdk_script(extra: &[(&str, &str)]) {
    let python = match tokio::task::spawn_blocking(python::sdk_python)
        .await
        .unwrap()
    {
        Ok(python) => python,
        Err(why) => {
            println!("skipped: the OpenAI Python SDK cannot run: {why}");
            return;
        }
    };
    let (_db, auth, seed) = plane::auth_plane().await;
    let gateway = gateway(auth.grpc_addr, extra).await;
    let config = json!({
        "base_url": format!("{}/v1", gateway.url()),
        "token": seed.chat_token,
        "agent_id": plane::agent(&seed, "active"),
        "suspended_agent_id": plane::agent(&seed, "suspended"),
        "model": MODEL,
        "hold_model": HOLD_MODEL,
        "release_model": RELEASE_MODEL,
        "cut_model": CUT_MODEL,
    });
    let results = python::run_script(&python, "openai_sdk.py", &config).await;
    let version = results["sdk_version"].as_str().expect("the SDK version");
    println!("openai {version} ({})", python.display());

    checks::completions(&results);
    checks::errors(&results);
    checks::idempotency(&results);
    checks::rate_limit(&results);
    gateway.shutdown().await;
}
