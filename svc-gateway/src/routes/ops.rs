//! `/health`, `/ready` and `/metrics`: unauthenticated, outside every protected layer.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use prometheus_client::registry::Registry;
use svc_runtime::health::{Readiness, ReadinessReport};
use svc_runtime::shutdown::Drain;

/// The content type of prometheus-client's text encoding.
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Liveness: always 200, no dependency looked at.
pub(crate) async fn health() -> Json<ReadinessReport> {
    Json(ReadinessReport::alive())
}

/// Readiness: every checker in parallel, 200 or 503; 503 without checking once the shutdown
/// has begun, so load balancers stop sending before the connections close.
pub(crate) async fn ready(State((readiness, drain)): State<(Arc<Readiness>, Drain)>) -> Response {
    let report = readiness.run_while_serving(&drain).await;
    (report.http_status(), Json(report)).into_response()
}

/// The Prometheus exposition.
pub(crate) async fn metrics(State(registry): State<Arc<Registry>>) -> Response {
    let mut text = String::new();
    if prometheus_client::encoding::text::encode(&mut text, &registry).is_err() {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    let mut response = text.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(METRICS_CONTENT_TYPE),
    );
    response
}
