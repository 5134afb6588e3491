//! `POST /v1/messages/count_tokens` (and its `/proxy` alias): the input tokens a Messages
//! request would use, so Anthropic's SDKs and Claude Code can size a prompt.
//!
//! It needs the CHAT_COMPLETIONS permission and is not rate limited: it generates nothing and
//! spends no tokens, so it takes nothing from the org's budgets, keeps no idempotency record
//! and writes no ledger row or session checkpoint. The model's first admitted target answers:
//! an anthropic provider is asked (`{base}/messages/count_tokens`, the body unchanged); the
//! mock and OpenAI-compatible targets answer `{"input_tokens": N}` from the gateway's own
//! upper-bound estimate ([`crate::token_estimate`]).

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use svc_tower::body_limit;

use crate::access_log::CallFacts;
use crate::call::Call;
use crate::forward::Forward;
use crate::request::Endpoint;
use crate::validate;

/// What the route needs: the provider call alone, without idempotency or accounting.
#[derive(Clone)]
pub(crate) struct CountState {
    pub(crate) forward: Forward,
}

pub(crate) async fn count_tokens(State(state): State<CountState>, request: Request) -> Response {
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    let bytes = match body_limit::collect(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response_with(Body::empty()),
    };
    let api = match validate::request(Endpoint::CountTokens, &parts.headers, bytes) {
        Ok(api) => Arc::new(api),
        Err(error) => return (*error).into_response_with(Body::empty()),
    };
    let facts = CallFacts::of(&api);
    let call = Call::from_parts(&parts, api, started);
    let mut response = state.forward.answer(&call).await.map(Body::new);
    // The call's line in the access log names the model.
    response.extensions_mut().insert(facts);
    response
}
