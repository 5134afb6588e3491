//! The svc domain: what the identity plane, the middleware, the runtime and the gateway agree
//! on, in one place and depending on none of them.
//!
//! - [`permissions`]: the permission bitmap of a token.
//! - [`budget`]: money budgets: an org's, an agent's or a token's limit per period.
//! - [`pat`]: the Personal Access Token format and its parsers.
//! - [`bearer`]: the PAT of an `Authorization: Bearer` header.
//! - [`context`]: the org context of a validated request, a token's own limits, an agent's
//!   verdict.
//! - [`trace`]: W3C trace ids and `traceparent`.
//! - [`id`]: fresh UUIDs and trace ids without a system call each.
//! - [`reasons`]: the ErrorInfo reasons of the identity plane's refusals.
//! - [`LATENCY_BUCKETS`]: the buckets of every latency histogram, so the two sides of a call
//!   can be read on one dashboard.

pub mod bearer;
pub mod budget;
pub mod context;
pub mod id;
pub mod pat;
pub mod permissions;
pub mod reasons;
pub mod trace;

/// Latency histogram buckets, from 1 ms to 5 s, in seconds.
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];
