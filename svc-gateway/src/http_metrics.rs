//! `svc_proxy_requests_total{route, method, code}` and `svc_proxy_request_duration_seconds`.
//!
//! Labels stay bounded: the route is the matched template (`/v1/orgs/{org_id}/auth-probe`),
//! never the raw path, and `unmatched` for the 404 fallback; methods outside the standard
//! set count as `OTHER`.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::Method;
use svc_tower::metrics::{ProxyMetrics, RequestLabels};

/// Records one request; runs inside the router so the matched route is known.
pub async fn record(State(metrics): State<ProxyMetrics>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|path| path.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".to_owned());
    let method = bounded_method(request.method()).to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    metrics
        .request_duration
        .observe(started.elapsed().as_secs_f64());
    metrics
        .requests_total
        .get_or_create(&RequestLabels {
            route,
            method,
            code: response.status().as_u16(),
        })
        .inc();
    response
}

fn bounded_method(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "OTHER",
    }
}
