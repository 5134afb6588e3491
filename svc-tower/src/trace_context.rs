//! W3C trace context for the calls a request causes: the `traceparent` each one carries, and
//! the request's trace for code that never sees the request.
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
//!
//! // A tracer's own span, not sampled: downstream calls carry its id and its decision.
//! let span = TraceParent::new(trace, 0x00f067aa0ba902b7, false).unwrap();
//! let sent = trace_context::scope_parent(Some(span), async { trace_context::current_parent() }).await;
//! assert_eq!(sent.unwrap().to_string(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
//! # }
//! ```
//!
//! # Why a task-local
//!
//! [`TokenValidator`](crate::auth::TokenValidator) and
//! [`AgentValidator`](crate::agent::AgentValidator) take a token or an agent id, not the
//! request: a validator is a plain function of its input, and callers, caches and wrappers
//! written against the traits stay as they are. PatAuth and AgentCheck therefore run the
//! validator inside a scope of the request's trace, and `GrpcAuthClient` reads
//! [`current_parent`] to send `traceparent` metadata on ValidateToken and ValidateAgent. A
//! wrapper around a validator propagates the trace without knowing about it, as
//! OpenTelemetry's current context does. Code that holds the request (a handler calling a
//! provider) should read the extensions instead.
//!
//! # A tracer's span and sampling decision
//!
//! By default a call's `traceparent` is a fresh child of the request's
//! [`TraceId`] marked sampled: downstream services join the trace the client sees in
//! `X-Trace-ID`. A service that exports spans knows better: the id of its span for the request
//! and whether that span was sampled. It inserts that as a [`TraceParent`] request extension
//! (above PatAuth), which then takes precedence: every call carries that parent id and that
//! flag, so a downstream parent-based sampler drops what this service dropped, and the
//! downstream spans hang under a span that was really exported. svc-tower itself knows no
//! tracer; the extension is the whole interface.

use std::future::Future;

use http::Extensions;

use crate::request_id::TraceId;

pub use svc_core::trace::{TRACEPARENT, TraceParent};

tokio::task_local! {
    static CURRENT: Option<Scoped>;
}

/// What a scope holds: a trace to make fresh children of, or the one parent to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scoped {
    Trace(TraceId),
    Parent(TraceParent),
}

/// The trace id of the request the current task works for, inside [`scope`] or
/// [`scope_parent`]; `None` outside.
pub fn current() -> Option<TraceId> {
    match CURRENT.try_with(|scoped| *scoped).ok().flatten()? {
        Scoped::Trace(trace) => Some(trace),
        Scoped::Parent(parent) => Some(parent.trace_id()),
    }
}

/// The `traceparent` a call made now should carry: the [`TraceParent`] of [`scope_parent`],
/// else a fresh sampled child of the trace of [`scope`]; `None` outside both.
pub fn current_parent() -> Option<TraceParent> {
    match CURRENT.try_with(|scoped| *scoped).ok().flatten()? {
        Scoped::Trace(trace) => Some(TraceParent::child_of(trace)),
        Scoped::Parent(parent) => Some(parent),
    }
}

/// Runs `future` with `trace` as [`current`] (a `None` hides any outer trace).
pub fn scope<F: Future>(trace: Option<TraceId>, future: F) -> impl Future<Output = F::Output> {
    CURRENT.scope(trace.map(Scoped::Trace), future)
}

/// Runs `future` with `parent` as [`current_parent`] and its trace as [`current`] (a `None`
/// hides any outer trace).
pub fn scope_parent<F: Future>(
    parent: Option<TraceParent>,
    future: F,
) -> impl Future<Output = F::Output> {
    CURRENT.scope(parent.map(Scoped::Parent), future)
}

/// The trace of a request: its [`TraceParent`] extension when a tracer inserted one, else its
/// [`TraceId`].
pub(crate) fn of_request(extensions: &Extensions) -> Option<Scoped> {
    extensions
        .get::<TraceParent>()
        .map(|&parent| Scoped::Parent(parent))
        .or_else(|| {
            extensions
                .get::<TraceId>()
                .map(|&trace| Scoped::Trace(trace))
        })
}

/// Runs `future` in the trace [`of_request`] found.
pub(crate) fn scope_request<F: Future>(
    scoped: Option<Scoped>,
    future: F,
) -> impl Future<Output = F::Output> {
    CURRENT.scope(scoped, future)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[tokio::test]
    async fn a_scoped_parent_is_sent_as_is_and_a_scoped_trace_as_fresh_children() {
        let trace = TraceId::random();
        let span = TraceParent::new(trace, 42, false).unwrap();
        let (seen, sent, again) = scope_parent(Some(span), async {
            (current(), current_parent(), current_parent())
        })
        .await;
        assert_eq!(seen, Some(trace));
        assert_eq!((sent, again), (Some(span), Some(span)));

        let (first, second) =
            scope(Some(trace), async { (current_parent(), current_parent()) }).await;
        let (first, second) = (first.unwrap(), second.unwrap());
        assert_eq!((first.trace_id(), second.trace_id()), (trace, trace));
        assert!(first.sampled() && second.sampled());
        assert_ne!(first.parent_id(), second.parent_id());
        assert_eq!(current_parent(), None);
        assert_eq!(
            scope_parent(Some(span), scope(None, async { current_parent() })).await,
            None
        );
    }

    #[test]
    fn a_trace_parent_extension_takes_precedence_over_the_trace_id() {
        let trace = TraceId::random();
        let span = TraceParent::new(trace, 7, false).unwrap();
        let mut extensions = Extensions::new();
        assert_eq!(of_request(&extensions), None);
        extensions.insert(trace);
        assert_eq!(of_request(&extensions), Some(Scoped::Trace(trace)));
        extensions.insert(span);
        assert_eq!(of_request(&extensions), Some(Scoped::Parent(span)));
    }
}
