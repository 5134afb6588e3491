//! Per-org requests-per-minute limits, with `X-RateLimit-*` headers and 429 `RATE_LIMITED`.
//!
//! ```
//! use std::convert::Infallible;
//!
//! use http::{Request, Response, StatusCode};
//! use svc_tower::context::{OrgContext, Permissions};
//! use svc_tower::rate_limit::{MemoryRateLimitStore, OrgRateLimitLayer};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let service = ServiceBuilder::new()
//!     .layer(OrgRateLimitLayer::new(MemoryRateLimitStore::new(), 2))
//!     .service_fn(|_req: Request<String>| async {
//!         Ok::<_, Infallible>(Response::new(String::from("ok")))
//!     });
//!
//! let org = OrgContext::new(uuid::Uuid::new_v4(), Permissions::CHAT_COMPLETIONS, uuid::Uuid::new_v4());
//! let mut statuses = Vec::new();
//! for _ in 0..3 {
//!     let mut request = Request::new(String::new());
//!     request.extensions_mut().insert(org.clone());
//!     let response = service.clone().oneshot(request).await.unwrap();
//!     statuses.push(response.status());
//! }
//! assert_eq!(statuses, [StatusCode::OK, StatusCode::OK, StatusCode::TOO_MANY_REQUESTS]);
//! # }
//! ```
//!
//! # Where it goes
//!
//! After [`PatAuth`](crate::auth) and [`AgentCheck`](crate::agent): the limit is per org, and
//! the org is only known once the token is validated (a request without an
//! [`OrgContext`](crate::context::OrgContext) passes untouched, so the layer only limits
//! authenticated traffic). Before body parsing and the provider call, so a refused request
//! costs one store round trip and nothing more; or, for the requests
//! [`OrgRateLimitLayer::count_later_when`] names, in the handler's own store step (see
//! [`CountLater`]). Inside
//! [`ErrorEnvelope`](crate::envelope), which renders the 429's body.
//!
//! # Backends
//!
//! `RedisRateLimitStore` (feature `redis`) is shared by every replica; [`MemoryRateLimitStore`]
//! counts in one process; [`NoopRateLimitStore`] allows everything (no `REDIS_URL`). All count
//! with GCRA; see `RedisRateLimitStore` for its exactness. A store that errors or misses the
//! layer's timeout fails open: the request proceeds (its headers report the whole limit
//! remaining, as the no-op store's do), the failure is counted in
//! `svc_proxy_store_failures_total{store="rate_limit"}` and logged at most every few seconds.

mod caps;
mod early;
mod later;
mod layer;
mod memory;
#[cfg(feature = "redis")]
mod redis;
mod store;
mod tokens;
#[cfg(feature = "redis")]
mod tokens_redis;

pub use caps::{CapCharge, CapState, SpendCap};
pub use early::{EarlyFuture, EarlyRateLimit, EarlyRateLimitLayer};
pub use later::CountLater;
pub use layer::{OrgRateLimit, OrgRateLimitLayer, ResponseFuture};
pub use memory::MemoryRateLimitStore;
#[cfg(feature = "redis")]
pub use redis::RedisRateLimitStore;
pub use store::{Decision, NoopRateLimitStore, RateLimitStore, RequestCount};
pub use tokens::{
    CappedDecision, Correction, Counting, MemoryTokenBudgetStore, NoopTokenBudgetStore,
    TokenBudget, TokenBudgetStore, TokenDecision,
};
#[cfg(feature = "redis")]
pub use tokens_redis::RedisTokenBudgetStore;

#[cfg(test)]
mod tests;
