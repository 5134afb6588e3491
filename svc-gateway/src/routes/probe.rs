//! `GET /v1/orgs/{org_id}/auth-probe`: proves that path binding follows the token's org.
//!
//! The token's org is authoritative. A path org that differs is 403 INSUFFICIENT_PERMISSIONS:
//! the token holds no permission in that org, and answering 403 (never 404) for every other
//! org reveals nothing about which orgs exist.

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Request};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use svc_tower::context::OrgContext;
use svc_tower::error::{ApiError, ErrorCode, FieldError, FieldErrorCode};
use uuid::Uuid;

#[derive(Debug, Serialize)]
struct Probe {
    org_id: Uuid,
    agent_id: Option<Uuid>,
    token_id: Uuid,
    permissions: i64,
}

pub(crate) async fn auth_probe(Path(org_id): Path<String>, request: Request) -> Response {
    let Some(org) = request.extensions().get::<OrgContext>() else {
        tracing::error!("auth-probe reached without an authenticated org");
        return ApiError::new(ErrorCode::InternalError).into_response_with(Body::empty());
    };
    let Ok(path_org) = Uuid::parse_str(&org_id) else {
        return ApiError::new(ErrorCode::ValidationError)
            .with_field_error(FieldError::new(
                "org_id",
                FieldErrorCode::InvalidFormat,
                "org_id must be a UUID",
            ))
            .into_response_with(Body::empty());
    };
    if path_org != org.org_id {
        return ApiError::new(ErrorCode::InsufficientPermissions)
            .with_message("The token is not valid for this organization.")
            .into_response_with(Body::empty());
    }
    Json(Probe {
        org_id: org.org_id,
        agent_id: org.agent_id,
        token_id: org.token_id,
        permissions: org.permissions.bits(),
    })
    .into_response()
}
