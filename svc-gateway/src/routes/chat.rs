//! `POST /v1/chat/completions` and its alias: parse, validate, then hand over to the
//! idempotency + provider service.
//!
//! By the time this runs the outer layers have authenticated the token, verified the agent
//! and counted the request against the org's rate limit (SPEC's processing order).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use svc_tower::body_limit;
use svc_tower::context::OrgContext;
use svc_tower::error::{ApiError, ErrorCode};
use svc_tower::idempotency::IDEMPOTENT_REPLAYED;
use svc_tower::request_id::RequestId;
use tower::ServiceExt;
use tower::util::BoxCloneSyncService;

use crate::session::{Checkpoint, SessionId, SessionStore, Usage};
use crate::validate::{self, ChatRequest};

/// The service after validation: Idempotency over the provider.
pub type ForwardService = BoxCloneSyncService<Request<Full<Bytes>>, Response<Body>, Infallible>;

/// What the chat handler needs.
#[derive(Clone)]
pub(crate) struct ChatState {
    pub(crate) forward: ForwardService,
    pub(crate) sessions: Option<SessionStore>,
    pub(crate) max_body: usize,
}

pub(crate) async fn chat(State(state): State<ChatState>, request: Request) -> Response {
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    // BodyLimit refuses a declared length up front; reading through the limit here turns a
    // streamed body that grows past it into the same 413.
    let bytes = match body_limit::collect(body, state.max_body).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response_with(Body::empty()),
    };
    let chat = match validate::chat_request(&parts.headers, bytes.clone()) {
        Ok(chat) => Arc::new(chat),
        Err(error) => return (*error).into_response_with(Body::empty()),
    };
    let org = parts.extensions.get::<OrgContext>().cloned();
    let request_id = parts.extensions.get::<RequestId>().copied();
    let session = parts.extensions.get::<SessionId>().cloned();
    tracing::info!(
        org_id = org.as_ref().map(|o| o.org_id.to_string()),
        request_id = request_id.map(|r| r.to_string()),
        model = %chat.model,
        message_count = chat.messages.len(),
        stream = chat.stream,
        "chat completion"
    );

    let mut inner = Request::from_parts(parts, Full::new(bytes));
    inner.extensions_mut().insert(chat.clone());
    let response = match state.forward.oneshot(inner).await {
        Ok(response) => response,
        Err(never) => match never {},
    };

    // A replay or an idempotency conflict is not a call: the provider was not asked.
    let provider_called = !response.headers().contains_key(&IDEMPOTENT_REPLAYED)
        && response.status() != http::StatusCode::CONFLICT;
    match (state.sessions, org, session, request_id) {
        (Some(store), Some(org), Some(session), Some(request_id)) if provider_called => {
            checkpoint(store, org, session, request_id, &chat, started, response).await
        }
        _ => response,
    }
}

/// Records the call's checkpoint off the request path. A JSON answer is already in memory,
/// so reading its usage costs a parse, never a wait on the provider.
async fn checkpoint(
    store: SessionStore,
    org: OrgContext,
    session: SessionId,
    request_id: RequestId,
    chat: &ChatRequest,
    started: Instant,
    response: Response,
) -> Response {
    let latency_ms = i32::try_from(started.elapsed().as_millis()).unwrap_or(i32::MAX);
    let status = response.status().as_u16();
    let (response, usage) = if chat.stream || !response.status().is_success() {
        (response, None)
    } else {
        let (parts, body) = response.into_parts();
        match body.collect().await {
            Ok(collected) => {
                let bytes = collected.to_bytes();
                let usage = Usage::from_body(&bytes);
                (Response::from_parts(parts, Body::from(bytes)), usage)
            }
            Err(_) => return reject(ErrorCode::InternalError),
        }
    };
    let checkpoint = Checkpoint {
        request_id: request_id.uuid(),
        model: chat.model.clone(),
        message_count: i32::try_from(chat.messages.len()).unwrap_or(i32::MAX),
        status,
        latency_ms,
        stream: chat.stream,
        usage,
    };
    tokio::spawn(async move {
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
    });
    response
}

fn reject(code: ErrorCode) -> Response {
    ApiError::new(code).into_response_with(Body::empty())
}
