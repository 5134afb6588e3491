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
    let mut pending = Pending {
        metrics,
        labels: Some(RequestLabels {
            route,
            method: bounded_method(request.method()).to_owned(),
            code: 0,
        }),
        started: Instant::now(),
    };
    let response = next.run(request).await;
    pending.finish(response.status().as_u16());
    response
}

/// One request being measured. A handler that panics never returns a response here (the
/// error envelope outside answers 500), so dropping the guard while unwinding records that 500.
struct Pending {
    metrics: ProxyMetrics,
    labels: Option<RequestLabels>,
    started: Instant,
}

impl Pending {
    fn finish(&mut self, code: u16) {
        let Some(mut labels) = self.labels.take() else {
            return;
        };
        labels.code = code;
        self.metrics
            .request_duration
            .observe(self.started.elapsed().as_secs_f64());
        self.metrics.requests_total.get_or_create(&labels).inc();
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.finish(500);
        }
    }
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
