//! `GET /openapi.json`: the OpenAPI 3.1 document of the gateway's HTTP surface, served as
//! checked in. A test holds it against the route table and the error codes, and schemathesis
//! against a running gateway.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, header};

/// The document.
pub const DOCUMENT: &str = include_str!("openapi.json");

pub(crate) async fn document() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        DOCUMENT,
    )
        .into_response()
}
