//! One exported span per request, whose trace id is the `X-Trace-ID` the client gets back.
//!
//! RequestId (just outside) has chosen the trace id: the caller's `traceparent` when it sent a
//! valid one, else a fresh id. The span continues the caller's trace in the first case (its
//! sampling decision stands) and is the root of the fresh id in the second (sampled by
//! `OTEL_SAMPLE_RATIO` on that id). The span's id and sampling decision then go into the
//! request extensions as a [`TraceParent`]: PatAuth and AgentCheck send it with the auth calls
//! and the forward service with the provider call, so the auth server's parent-based sampler
//! drops what the gateway dropped, and its spans hang under the gateway's request span.
//!
//! Fields: `route` (the matched template, `unmatched` for the 404 fallback, never the raw
//! path), `method` and `status`. Without trace export the gateway leaves the middleware out.

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::trace::TraceContextExt;
use svc_runtime::telemetry::otel;
use svc_tower::request_id::TraceId;
use svc_tower::trace_context::TRACEPARENT;
use svc_tower::trace_context::TraceParent;
use tracing::Instrument;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Whether a client's sampling decision is followed. The gateway adds the middleware only when
/// spans are exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Export {
    /// A client's `traceparent` decides sampling (`SVC_TRUST_INBOUND_SAMPLING`); otherwise
    /// its trace id is kept and the ratio decides.
    pub trust_inbound_sampling: bool,
}

/// Runs the rest of the stack inside the request's span; sits right inside RequestId.
pub async fn record(State(export): State<Export>, mut request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str);
    let span = tracing::info_span!(
        "request",
        otel.kind = "server",
        route,
        method = %request.method(),
        status = Empty,
    );
    if let Some(&trace) = request.extensions().get::<TraceId>() {
        join_trace(&span, &request, trace, export.trust_inbound_sampling);
        if let Some(parent) = downstream_parent(&span, trace) {
            request.extensions_mut().insert(parent);
        }
    }
    let response = next.run(request).instrument(span.clone()).await;
    span.record("status", response.status().as_u16());
    response
}

/// Continues the caller's trace when RequestId took `trace` from its `traceparent` and the
/// caller is trusted to decide sampling; else makes the span the root of `trace` (the same
/// trace id, sampled by the configured ratio).
fn join_trace(span: &tracing::Span, request: &Request, trace: TraceId, trust: bool) {
    if !trust {
        otel::start_root(span, trace);
        return;
    }
    let mut values = request.headers().get_all(&TRACEPARENT).iter();
    if let (Some(value), None) = (values.next(), values.next()) {
        let inbound = TraceId::from_traceparent(value.as_bytes());
        if inbound == Some(trace) && otel::continue_trace(span, value.as_bytes()) {
            return;
        }
    }
    otel::start_root(span, trace);
}

/// The span as the parent of the calls the request causes: its id and sampling decision.
/// `None` when the span has no valid context in `trace` (export off, or the span disabled),
/// and downstream calls go on as children of the trace id.
fn downstream_parent(span: &tracing::Span, trace: TraceId) -> Option<TraceParent> {
    let context = span.context();
    let otel_span = context.span();
    let span_context = otel_span.span_context();
    let same_trace = span_context.trace_id().to_bytes() == trace.as_u128().to_be_bytes();
    if !span_context.is_valid() || !same_trace {
        return None;
    }
    let span_id = u64::from_be_bytes(span_context.span_id().to_bytes());
    TraceParent::new(trace, span_id, span_context.is_sampled())
}
