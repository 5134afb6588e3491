//! svc-tower in an axum app: the protected stack as one `Router::layer`, the permission guard
//! per route.
//!
//! Run: `cargo run -p svc-examples --example axum_app` (see that file for requests to try).

use std::io;

use axum::body::Body;
use axum::extract::Extension;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use svc_tower::agent::AgentCheckLayer;
use svc_tower::auth::{PatAuthLayer, RequirePermissionLayer};
use svc_tower::body_limit;
use svc_tower::body_limit::BodyLimitLayer;
use svc_tower::context::OrgContext;
use svc_tower::envelope::ErrorEnvelopeLayer;
use svc_tower::error::{ApiError, ErrorCode};
use svc_tower::request_id::RequestIdLayer;
use tokio::net::TcpListener;
use tower::ServiceBuilder;

use crate::demo::{Demo, MAX_BODY_BYTES};

/// The app: `POST /v1/chat/completions` (needs `CHAT_COMPLETIONS`) and `GET /v1/whoami`
/// (needs only a valid token and agent), both behind the whole stack.
pub fn app(demo: &Demo) -> Router {
    Router::new()
        .route(
            "/v1/chat/completions",
            post(chat).layer(RequirePermissionLayer::chat_completions()),
        )
        .route("/v1/whoami", get(whoami))
        .layer(
            // Outermost first, as DESIGN.md orders them: ids, then the envelope that renders
            // every rejection below it, then the cheap checks before the ones doing I/O.
            ServiceBuilder::new()
                .layer(RequestIdLayer::new())
                .layer(ErrorEnvelopeLayer::new())
                .layer(BodyLimitLayer::new(MAX_BODY_BYTES))
                .layer(PatAuthLayer::new(demo.tokens()))
                .layer(AgentCheckLayer::new(demo.agents())),
        )
}

/// Serves [`app`] on `listener` until the process stops.
pub async fn serve(listener: TcpListener, demo: &Demo) -> io::Result<()> {
    use axum::serve::ListenerExt;

    // Without TCP_NODELAY a response written as head then body waits on the delayed ACK.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app(demo)).await
}

async fn chat(Extension(context): Extension<OrgContext>, body: Body) -> Response {
    // Reading through `collect` turns a body over the limit into the 413 envelope.
    let bytes = match body_limit::collect(body, MAX_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(rejection) => return rejection.into_response().into_response(),
    };
    let Ok(request) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return ApiError::new(ErrorCode::InvalidJson)
            .into_response()
            .into_response();
    };
    Json(json!({
        "object": "chat.completion",
        "model": request["model"],
        "org_id": context.org_id,
        "agent_id": context.agent_id,
    }))
    .into_response()
}

async fn whoami(Extension(context): Extension<OrgContext>) -> Json<serde_json::Value> {
    Json(json!({
        "org_id": context.org_id,
        "agent_id": context.agent_id,
        "token_id": context.token_id,
        "permissions": context.permissions.bits(),
    }))
}
