//! What a validated request carries through the stack: the org, its permissions and the agent.
//!
//! [`PatAuth`](crate::auth::PatAuth) inserts an [`OrgContext`] into the request extensions;
//! [`AgentCheck`](crate::agent::AgentCheck) fills in the verified agent. Everything after them
//! (rate limits, idempotency keys, handlers) reads the org from here, never from the request.
//! The types are svc's domain, shared with the identity plane (crate `svc-core`).

pub use svc_core::budget::{Budget, BudgetPeriod, BudgetTarget};
pub use svc_core::context::{AgentStanding, AgentVerdict, OrgContext, TokenLimits};
pub use svc_core::permissions::Permissions;
