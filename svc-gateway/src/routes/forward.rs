//! The provider-backed routes (`/v1/chat/completions`, `/v1/embeddings`, `/v1/responses`,
//! `/v1/messages` and their `/proxy` aliases): read the body, parse and validate it once, and
//! hand the [`Call`] to Idempotency over the [`Accounting`] (see its module for the whole path).
//!
//! By the time this runs the outer layers have authenticated the token, verified the agent,
//! checked the route's permission and counted the request against the org's rate limit
//! (SPEC's processing order).

use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use futures_util::FutureExt;
use http_body_util::Full;
use svc_tower::body_limit;
use svc_tower::idempotency::Fingerprint;
use tower::ServiceExt;
use tower::util::BoxCloneSyncService;

use crate::access_log::CallFacts;
use crate::accounting::Accounting;
use crate::call::Call;
use crate::request::Endpoint;
use crate::validate;

/// Idempotency, as configured for the provider routes, over whatever answers a call.
pub(crate) type IdempotencyLayer = svc_tower::idempotency::IdempotencyLayer<
    std::sync::Arc<dyn svc_tower::idempotency::IdempotencyStore>,
>;

/// What a provider-backed route needs.
#[derive(Clone)]
pub(crate) struct ForwardState {
    pub(crate) endpoint: Endpoint,
    pub(crate) idempotency: IdempotencyLayer,
    pub(crate) accounting: Accounting,
}

pub(crate) async fn forward(State(state): State<ForwardState>, request: Request) -> Response {
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    // BodyLimit in front refuses a declared length up front and bounds the body it passes on:
    // reading it here turns a streamed body that grows past the limit into the same 413.
    let bytes = match body_limit::collect(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response_with(Body::empty()),
    };
    let api = match validate::request(state.endpoint, &parts.headers, bytes.clone()) {
        Ok(api) => std::sync::Arc::new(api),
        Err(error) => return (*error).into_response_with(Body::empty()),
    };
    // The call's line in the access log names the model.
    let facts = CallFacts::of(&api);
    // Idempotency fingerprints what was parsed here instead of parsing the body again.
    let fingerprint = parts
        .headers
        .contains_key(&validate::IDEMPOTENCY_KEY)
        .then(|| Fingerprint::of_object(&parts.method, state.endpoint.route(), &api.json));
    let call = Call::from_parts(&parts, api, started);

    // Idempotency sees the request head (its key, its org); what runs under its claim is this
    // call, handed over whole. A replay never reaches it, so it holds nothing.
    let accounting = state.accounting;
    let under_claim = tower::service_fn(move |_: Request<Full<Bytes>>| {
        accounting
            .call(call.clone())
            .map(Ok::<_, std::convert::Infallible>)
    });
    let mut head = Request::from_parts(parts, Full::new(bytes));
    if let Some(fingerprint) = fingerprint {
        head.extensions_mut().insert(fingerprint);
    }
    let service = tower::ServiceBuilder::new()
        .map_response(|response: http::Response<_>| response.map(Body::new))
        .layer(state.idempotency)
        .service(under_claim);
    let mut response = match BoxCloneSyncService::new(service).oneshot(head).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    response.extensions_mut().insert(facts);
    response
}
