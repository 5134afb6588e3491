//! Error reporting to Sentry (`SENTRY_DSN`) at the HTTP edge: every 5xx answer and every panic
//! becomes one event ([`svc_runtime::error_report`] holds the client and the scrubbing).
//!
//! [`report`] sits right inside the error envelope and, per request:
//!
//! - runs the rest of the stack with a hub of its own, tagged `request_id`, `trace_id`
//!   (the `X-Request-ID` and `X-Trace-ID` the client gets back; the trace id is also the
//!   event's trace context), `route` (the matched template, never the raw path) and `method`,
//!   so a panic below it is reported with those tags;
//! - reports every 5xx answer, tagged with its `status` and envelope `error_code`, but
//!   `/ready`'s 503, which reports a dependency's state to a prober every few seconds and is not
//!   a failed request. A 501 `PROVIDER_NOT_CONFIGURED` is reported like any other: a client
//!   asking for a model nobody configured is worth an operator's look, and its code tells it
//!   apart.

use std::collections::BTreeMap;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use http::StatusCode;
use sentry::SentryFutureExt;
use svc_runtime::error_report::{answer_event, request_hub};
use svc_tower::error::ApiError;
use svc_tower::request_id::{RequestId, TraceId};

use crate::http_metrics::bounded_method;

/// Reports a 5xx answer, and a panic below with the request's tags; sits right inside the
/// error envelope, where an [`ApiError`] is still in the response. The gateway adds it only
/// when a DSN is configured.
pub async fn report(request: Request, next: Next) -> Response {
    let mut tags = BTreeMap::new();
    if let Some(id) = request.extensions().get::<RequestId>() {
        tags.insert("request_id", id.to_string());
    }
    let trace = request.extensions().get::<TraceId>().copied();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_owned();
    tags.insert("route", route.clone());
    tags.insert("method", bounded_method(request.method()).to_owned());

    let hub = request_hub(&tags, trace);
    let response = next.run(request).bind_hub(hub.clone()).await;

    let status = response.status();
    if reported(&route, status) {
        let code = response
            .extensions()
            .get::<ApiError>()
            .map(|error| error.code().as_str().to_owned());
        hub.capture_event(answer_event(status.as_u16(), code));
    }
    response
}

/// Whether an answer is reported: a 5xx, but `/ready`'s (see the [module docs](self)).
fn reported(route: &str, status: StatusCode) -> bool {
    status.is_server_error() && route != "/ready"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_reported_but_readiness_is_not() {
        let route = "/v1/chat/completions";
        for status in [500, 501, 502, 503, 504] {
            assert!(reported(route, StatusCode::from_u16(status).unwrap()));
        }
        assert!(reported("unmatched", StatusCode::INTERNAL_SERVER_ERROR));
        assert!(!reported("/ready", StatusCode::SERVICE_UNAVAILABLE));
        for status in [200, 400, 401, 404, 429] {
            assert!(!reported(route, StatusCode::from_u16(status).unwrap()));
        }
    }
}
