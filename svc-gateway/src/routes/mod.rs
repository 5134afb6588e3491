//! The route handlers. The stack around them is assembled in [`crate::app`](mod@crate::app).

pub(crate) mod count_tokens;
pub(crate) mod forward;
pub(crate) mod models;
pub(crate) mod openapi;
pub(crate) mod ops;
pub(crate) mod probe;

use axum::body::Body;
use axum::response::Response;
use svc_tower::error::{ApiError, ErrorCode};

pub use openapi::DOCUMENT as OPENAPI_DOCUMENT;
pub use ops::METRICS_CONTENT_TYPE;

/// No route matches: 404 NOT_FOUND in the envelope.
pub(crate) async fn not_found() -> Response {
    ApiError::new(ErrorCode::NotFound).into_response_with(Body::empty())
}

/// The route exists, the method does not: 405 METHOD_NOT_ALLOWED in the envelope.
pub(crate) async fn method_not_allowed() -> Response {
    ApiError::new(ErrorCode::MethodNotAllowed).into_response_with(Body::empty())
}
