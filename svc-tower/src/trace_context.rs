//! W3C trace context for the calls a request causes: the `traceparent` each one carries, and
//! the request's trace id for code that never sees the request.
//!
//! ```
//! use svc_tower::request_id::TraceId;
//! use svc_tower::trace_context::{self, TraceParent};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let trace = TraceId::from_traceparent(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
//! let parent = TraceParent::child_of(trace);
//! let text = parent.to_string();
//! assert!(text.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
//! assert!(text.ends_with("-01"));
//! assert_eq!(TraceId::from_traceparent(text.as_bytes()), Some(trace));
//!
//! // A validator deep inside a layer reads the trace of the request it works for.
//! let seen = trace_context::scope(Some(trace), async { trace_context::current() }).await;
//! assert_eq!(seen, Some(trace));
//! assert_eq!(trace_context::current(), None);
//! # }
//! ```
//!
//! # Why a task-local
//!
//! [`TokenValidator`](crate::auth::TokenValidator) and
//! [`AgentValidator`](crate::agent::AgentValidator) take a token or an agent id, not the
//! request: a validator is a plain function of its input, and callers, caches and wrappers
//! written against the traits stay as they are. PatAuth and AgentCheck therefore run the
//! validator inside [`scope`] with the request's [`TraceId`], and `GrpcAuthClient` reads
//! [`current`] to send `traceparent` metadata on ValidateToken and ValidateAgent. A wrapper
//! around a validator propagates the trace without knowing about it, as OpenTelemetry's
//! current context does. Code that holds the request (a handler calling a provider) should
//! read the [`TraceId`] extension instead.

use std::fmt;
use std::future::Future;

use http::HeaderValue;
use uuid::Uuid;

use crate::request_id::TraceId;

pub use crate::request_id::TRACEPARENT;

tokio::task_local! {
    static CURRENT: Option<TraceId>;
}

/// The trace id of the request the current task works for, inside [`scope`]; `None` outside.
pub fn current() -> Option<TraceId> {
    CURRENT.try_with(|trace| *trace).ok().flatten()
}

/// Runs `future` with `trace` as [`current`] (a `None` hides any outer trace).
pub fn scope<F: Future>(trace: Option<TraceId>, future: F) -> impl Future<Output = F::Output> {
    CURRENT.scope(trace, future)
}

/// One outbound call's `traceparent`: version `00`, the request's trace id, a fresh parent
/// (span) id and the `sampled` flag.
///
/// Each call gets its own parent id, so the downstream spans of two calls of one request are
/// siblings under the same trace rather than one span reported twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    trace_id: TraceId,
    parent_id: u64,
}

impl TraceParent {
    /// A fresh parent id in `trace_id`.
    pub fn child_of(trace_id: TraceId) -> TraceParent {
        let (high, low) = Uuid::new_v4().as_u64_pair();
        // Each half has fixed version or variant bits; their xor has none. Zero is invalid.
        TraceParent {
            trace_id,
            parent_id: (high ^ low).max(1),
        }
    }

    /// The trace the call belongs to.
    pub fn trace_id(self) -> TraceId {
        self.trace_id
    }

    /// The parent id the downstream service sees (never zero).
    pub fn parent_id(self) -> u64 {
        self.parent_id
    }

    /// The header value, `00-<32 hex>-<16 hex>-01`.
    pub fn header_value(self) -> HeaderValue {
        // Lower-case hex and dashes only.
        HeaderValue::try_from(self.to_string()).unwrap_or_else(|_| HeaderValue::from_static(""))
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "00-{}-{:016x}-01", self.trace_id, self.parent_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_is_valid_w3c_and_keeps_the_trace() {
        let trace = TraceId::random();
        let parent = TraceParent::child_of(trace);
        let value = parent.header_value();
        let text = value.to_str().unwrap();
        assert_eq!(text.len(), 55);
        assert_eq!(TraceId::from_traceparent(text.as_bytes()), Some(trace));
        assert_eq!(&text[36..52], format!("{:016x}", parent.parent_id()));
        assert_eq!(parent.trace_id(), trace);
    }

    #[test]
    fn each_call_gets_its_own_parent_id() {
        let trace = TraceId::random();
        let ids: std::collections::HashSet<u64> = (0..64)
            .map(|_| TraceParent::child_of(trace).parent_id())
            .collect();
        assert_eq!(ids.len(), 64);
        assert!(!ids.contains(&0));
    }

    #[tokio::test]
    async fn the_scope_is_visible_across_awaits_and_ends_with_it() {
        let trace = TraceId::random();
        let seen = scope(Some(trace), async {
            tokio::task::yield_now().await;
            current()
        })
        .await;
        assert_eq!(seen, Some(trace));
        assert_eq!(current(), None);
        let hidden = scope(Some(trace), scope(None, async { current() })).await;
        assert_eq!(hidden, None);
    }
}
