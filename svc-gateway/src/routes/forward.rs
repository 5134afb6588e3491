//! The provider-backed routes (`/v1/chat/completions`, `/v1/embeddings`, `/v1/responses` and
//! their `/proxy` aliases): parse and validate once, then hand over to the idempotency +
//! provider service.
//!
//! By the time this runs the outer layers have authenticated the token, verified the agent,
//! checked the route's permission and counted the request against the org's rate limit
//! (SPEC's processing order).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use http_body_util::Full;
use svc_tower::body_limit;
use svc_tower::context::OrgContext;
use svc_tower::idempotency::Fingerprint;
use svc_tower::request_id::RequestId;
use tokio::sync::oneshot;
use tower::ServiceExt;
use tower::util::BoxCloneSyncService;

use crate::request::{ApiRequest, Endpoint};
use crate::session::{Checkpoint, SessionId, SessionStore};
use crate::usage::{Report, TokenMetrics, UsageReporter};
use crate::validate;

/// The service after validation: Idempotency over the provider.
pub type ForwardService = BoxCloneSyncService<Request<Full<Bytes>>, Response<Body>, Infallible>;

/// What a provider-backed route needs.
#[derive(Clone)]
pub(crate) struct ForwardState {
    pub(crate) endpoint: Endpoint,
    pub(crate) forward: ForwardService,
    pub(crate) sessions: Option<SessionStore>,
    pub(crate) tokens: TokenMetrics,
    pub(crate) max_body: usize,
}

pub(crate) async fn forward(State(state): State<ForwardState>, request: Request) -> Response {
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    // BodyLimit refuses a declared length up front; reading through the limit here turns a
    // streamed body that grows past it into the same 413.
    let bytes = match body_limit::collect(body, state.max_body).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response_with(Body::empty()),
    };
    let api = match validate::request(state.endpoint, &parts.headers, bytes.clone()) {
        Ok(api) => Arc::new(api),
        Err(error) => return (*error).into_response_with(Body::empty()),
    };
    let org = parts.extensions.get::<OrgContext>().cloned();
    let request_id = parts.extensions.get::<RequestId>().copied();
    let session = parts.extensions.get::<SessionId>().cloned();
    tracing::info!(
        org_id = org.as_ref().map(|o| o.org_id.to_string()),
        request_id = request_id.map(|r| r.to_string()),
        route = state.endpoint.route(),
        model = %api.model,
        message_count = api.message_count,
        stream = api.stream,
        "{}",
        state.endpoint.noun()
    );

    let (reporter, report) = UsageReporter::new();
    // Idempotency fingerprints what was parsed here instead of parsing the body again.
    let fingerprint = parts
        .headers
        .contains_key(&validate::IDEMPOTENCY_KEY)
        .then(|| Fingerprint::of_object(&parts.method, state.endpoint.route(), &api.json));
    let mut inner = Request::from_parts(parts, Full::new(bytes));
    if let Some(fingerprint) = fingerprint {
        inner.extensions_mut().insert(fingerprint);
    }
    inner.extensions_mut().insert(api.clone());
    inner.extensions_mut().insert(reporter);
    let response = match state.forward.oneshot(inner).await {
        Ok(response) => response,
        Err(never) => match never {},
    };

    let call = Call {
        api,
        status: response.status().as_u16(),
        latency_ms: i32::try_from(started.elapsed().as_millis()).unwrap_or(i32::MAX),
    };
    let sessions = match (state.sessions, org, session, request_id) {
        (Some(store), Some(org), Some(session), Some(request_id)) => {
            Some((store, org, session, request_id))
        }
        _ => None,
    };
    // The usage of a stream is known at its end: accounted off the request path.
    tokio::spawn(account(report, state.tokens, sessions, call));
    response
}

/// The facts of one call known when its head went out.
struct Call {
    api: Arc<ApiRequest>,
    status: u16,
    latency_ms: i32,
}

/// Counts the call's tokens and records its checkpoint once the provider's answer is complete.
/// A request the provider never saw (a replay, an idempotency conflict) reports nothing and
/// records nothing.
async fn account(
    report: oneshot::Receiver<Report>,
    tokens: TokenMetrics,
    sessions: Option<(SessionStore, OrgContext, SessionId, RequestId)>,
    call: Call,
) {
    let Ok(report) = report.await else {
        return;
    };
    if let Some(usage) = &report.usage {
        tokens.record(usage);
    }
    let Some((store, org, session, request_id)) = sessions else {
        return;
    };
    let checkpoint = Checkpoint {
        request_id: request_id.uuid(),
        model: call.api.model.clone(),
        message_count: i32::try_from(call.api.message_count).unwrap_or(i32::MAX),
        status: call.status,
        latency_ms: call.latency_ms,
        stream: call.api.stream,
        usage: report.usage,
    };
    if let Err(error) = store
        .record(org.org_id, org.agent_id, session.as_str(), &checkpoint)
        .await
    {
        tracing::warn!(
            org_id = %org.org_id,
            request_id = %checkpoint.request_id,
            error = %error,
            "session checkpoint not recorded"
        );
    }
}
