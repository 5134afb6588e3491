//! The span of one call, carrying the caller's W3C trace id so the auth server's log lines join
//! the gateway's trace of the same request.
//!
//! Only a well-formed `traceparent` is used, and only its parsed trace id is recorded: the raw
//! metadata is caller-controlled text and never reaches a log line.

use http::HeaderMap;
use svc_core::trace::TRACEPARENT;
use svc_core::trace::TraceId;
use tonic::metadata::MetadataMap;
use tracing::Span;
use tracing::field::{Empty, display};

/// The trace id of the call's one valid `traceparent`; several values are ambiguous, so none.
pub(crate) fn trace_id(headers: &HeaderMap) -> Option<TraceId> {
    let mut values = headers.get_all(&TRACEPARENT).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return None;
    }
    TraceId::from_traceparent(first.as_bytes())
}

/// An INFO span named `rpc` with the call's `method` and, when the caller sent one, `trace_id`.
pub(crate) fn span(method: &'static str, metadata: &MetadataMap) -> Span {
    let span = tracing::info_span!("rpc", method, trace_id = Empty);
    if let Some(trace) = trace_id(metadata.as_ref()) {
        span.record("trace_id", display(trace));
        // The exported span is the caller's child (nothing happens without export).
        if let Some(traceparent) = metadata.get(TRACEPARENT.as_str()) {
            crate::telemetry::otel::continue_trace(&span, traceparent.as_bytes());
        }
    }
    span
}

#[cfg(test)]
mod tests {
    use tonic::metadata::MetadataValue;

    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn metadata(values: &[&'static str]) -> HeaderMap {
        let mut metadata = MetadataMap::new();
        for value in values {
            metadata.append("traceparent", MetadataValue::from_static(value));
        }
        metadata.into_headers()
    }

    #[test]
    fn reads_one_valid_traceparent() {
        let trace = trace_id(&metadata(&[PARENT])).map(|t| t.to_string());
        assert_eq!(trace.as_deref(), Some("4bf92f3577b34da6a3ce929d0e0e4736"));
    }

    #[test]
    fn ignores_missing_malformed_and_repeated_traceparents() {
        assert_eq!(trace_id(&metadata(&[])), None);
        assert_eq!(trace_id(&metadata(&["00-garbage"])), None);
        assert_eq!(
            trace_id(&metadata(&[
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01"
            ])),
            None
        );
        assert_eq!(trace_id(&metadata(&[PARENT, PARENT])), None);
    }
}
