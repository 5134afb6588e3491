//! Replays completed requests that carry an `Idempotency-Key`, so a client's retry never runs
//! a completion twice.
//!
//! ```
//! use std::convert::Infallible;
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//!
//! use bytes::Bytes;
//! use http::{Request, Response, StatusCode};
//! use http_body_util::{BodyExt, Full};
//! use svc_tower::context::{OrgContext, Permissions};
//! use svc_tower::idempotency::{IdempotencyLayer, MemoryIdempotencyStore};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let calls = Arc::new(AtomicUsize::new(0));
//! let counter = calls.clone();
//! let service = ServiceBuilder::new()
//!     .layer(IdempotencyLayer::new(MemoryIdempotencyStore::new()))
//!     .service_fn(move |_req: Request<Full<Bytes>>| {
//!         let n = counter.fetch_add(1, Ordering::SeqCst);
//!         let body = Full::new(Bytes::from(format!("completion {n}")));
//!         async move { Ok::<_, Infallible>(Response::new(body)) }
//!     });
//!
//! let org = OrgContext::new(uuid::Uuid::new_v4(), Permissions::CHAT_COMPLETIONS, uuid::Uuid::new_v4());
//! let mut bodies = Vec::new();
//! for _ in 0..2 {
//!     let mut request = Request::post("/v1/chat/completions")
//!         .header("Idempotency-Key", "order-42")
//!         .body(Full::new(Bytes::from_static(br#"{"model":"m","messages":[]}"#)))
//!         .unwrap();
//!     request.extensions_mut().insert(org.clone());
//!     let response = service.clone().oneshot(request).await.unwrap();
//!     assert_eq!(response.status(), StatusCode::OK);
//!     bodies.push(response.into_body().collect().await.unwrap().to_bytes());
//! }
//! assert_eq!(bodies[0], bodies[1]);
//! assert_eq!(calls.load(Ordering::SeqCst), 1);
//! # }
//! ```
//!
//! # Where it goes
//!
//! Innermost, right around the provider call, after the handler has parsed and validated the
//! body: only a valid request should claim a key, and only the provider's answer is worth
//! replaying. It needs the [`OrgContext`](crate::context::OrgContext) from
//! [`PatAuth`](crate::auth) (keys are scoped per org; a request without one passes through) and
//! must sit inside [`BodyLimit`](crate::body_limit), because it buffers the request body: the
//! inner service always receives a [`Full<Bytes>`](http_body_util::Full) body, key or not.
//! On an axum route, whose handlers take axum's `Body`, put
//! `.map_request(|r: Request<Full<Bytes>>| r.map(Body::new))` between the layer and the route.
//! Inside [`ErrorEnvelope`](crate::envelope), which renders its 400 and 409 bodies.
//!
//! # Behaviour
//!
//! | request | store holds | answer |
//! |---|---|---|
//! | no `Idempotency-Key`, or no org | – | passed through, response untouched |
//! | key over 256 characters | – | 400 `VALIDATION_ERROR`, field `Idempotency-Key` `TOO_LONG` |
//! | refused by the caller's [`refuse_fn`](IdempotencyLayer::refuse_fn) | – | the caller's error |
//! | new key | nothing | claimed (pending), inner service called |
//! | same key, same fingerprint | pending | 409 `IDEMPOTENCY_IN_PROGRESS`, `Retry-After: 1` |
//! | same key, same fingerprint | committed | stored status, headers and body, `Idempotent-Replayed: true`; no inner call |
//! | same key, other fingerprint | pending or committed | 409 `IDEMPOTENCY_KEY_REUSE`, `x-should-retry: false` |
//! | store down or over its timeout | – | passed through without deduplication |
//!
//! Which inner statuses free the key instead of being stored is the caller's to say
//! ([`release_fn`](IdempotencyLayer::release_fn); 429 and 5xx by default). Every response
//! carries an [`IdempotencyOutcome`] in its extensions: called, replayed or refused.
//!
//! The fingerprint is SHA-256 of the method, the route and the canonical JSON of the body
//! (see [`Fingerprint`]); a caller that parsed the body already puts its
//! [`Fingerprint::of_json`] in the request extensions, and the body is not parsed again. A pending claim with a different fingerprint answers
//! `IDEMPOTENCY_KEY_REUSE` rather than `IN_PROGRESS`: retrying can never make a different
//! request match the key.
//!
//! After the inner call: a 429 or 5xx response releases the claim (the same key may retry); so
//! does a rejection carrying an [`ApiError`](crate::error::ApiError), whose body the envelope
//! renders later and which would replay empty. Any other response is buffered, committed with
//! its status, `Content-Type`, `Content-Encoding` and body for the TTL (24 h by default), and returned. If the
//! request is abandoned mid-call (the client went away), the claim is released in the
//! background. The layer consumes the `Idempotency-Key` header: the inner service never sees it.
//!
//! Store failures and timeouts fail open: counted in
//! `svc_proxy_store_failures_total{store="idempotency"}` and logged at most every few seconds.

mod config;
mod fingerprint;
mod future;
mod guard;
mod layer;
mod memory;
#[cfg(feature = "redis")]
mod record;
#[cfg(feature = "redis")]
mod redis;
mod respond;
mod store;

pub use config::IDEMPOTENCY_KEY;
pub use fingerprint::Fingerprint;
pub use future::ResponseFuture;
pub use layer::{Idempotency, IdempotencyLayer, key};
pub use memory::MemoryIdempotencyStore;
#[cfg(feature = "redis")]
pub use redis::RedisIdempotencyStore;
pub use respond::IdempotencyOutcome;
pub use store::{Claim, ClaimToken, IdempotencyStore, StoredResponse};

#[cfg(test)]
mod tests;
