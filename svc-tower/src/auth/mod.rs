//! Authenticates requests by their bearer PAT and inserts the token's [`OrgContext`](crate::context::OrgContext); guards
//! routes by permission.
//!
//! ```
//! use std::convert::Infallible;
//! use http::{Request, Response, StatusCode};
//! use svc_tower::auth::{PatAuthLayer, RequirePermissionLayer, TokenError};
//! use svc_tower::context::{OrgContext, Permissions};
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//! use uuid::Uuid;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! const TOKEN: &str = "svc_pat_0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b_s3cret";
//! let org_id = Uuid::now_v7();
//! // Any `Fn(&str) -> impl Future` is a validator; production uses `GrpcAuthClient`.
//! let validator = move |token: &str| {
//!     let known = token == TOKEN;
//!     async move {
//!         match known {
//!             true => Ok(OrgContext::new(org_id, Permissions::CHAT_COMPLETIONS, Uuid::now_v7())),
//!             false => Err(TokenError::Invalid),
//!         }
//!     }
//! };
//! let svc = ServiceBuilder::new()
//!     .layer(PatAuthLayer::new(validator))
//!     .layer(RequirePermissionLayer::new(Permissions::CHAT_COMPLETIONS))
//!     .service(service_fn(|req: Request<()>| async move {
//!         let org = req.extensions().get::<OrgContext>().unwrap().org_id;
//!         Ok::<_, Infallible>(Response::new(org.to_string()))
//!     }));
//!
//! let ok = Request::builder().header("authorization", format!("Bearer {TOKEN}")).body(()).unwrap();
//! let response = svc.clone().oneshot(ok).await.unwrap();
//! assert_eq!(response.status(), StatusCode::OK);
//!
//! let response = svc.oneshot(Request::new(())).await.unwrap();
//! assert_eq!(response.status(), StatusCode::UNAUTHORIZED); // MISSING_TOKEN
//! # }
//! ```
//!
//! # What PatAuth answers
//!
//! | request | answer |
//! |---|---|
//! | no `Authorization` header | 401 `MISSING_TOKEN` |
//! | not `Bearer svc_pat_<uuid>_<secret>` (checked before any I/O) | 401 `INVALID_TOKEN` |
//! | [`TokenError::Invalid`] (gRPC Unauthenticated) | 401 `INVALID_TOKEN` |
//! | [`TokenError::Timeout`], [`TokenError::Unavailable`], [`TokenError::Internal`], [`TokenError::Throttled`] | 503 `SERVICE_DEGRADED`, `Retry-After: 1` |
//! | valid | the inner service, with the [`OrgContext`](crate::context::OrgContext) in the request extensions |
//! | with [`PatAuthLayer::failure_limit`], an address over its limit of rejected tokens (`Invalid` and `Throttled` count) | 429 `RATE_LIMITED`, `Retry-After`, without calling the validator |
//! | with [`PatAuthLayer::refusal_delay`], any refusal above | the same answer, held until the delay has passed since the request arrived |
//!
//! The request body is not polled until the token is valid, and a rejected request never
//! reaches the inner service. [`RequirePermission`] then answers 403
//! `INSUFFICIENT_PERMISSIONS` when the token lacks a bit the route needs, and 401
//! `MISSING_TOKEN` when no PatAuth ran before it.
//!
//! # Where it goes
//!
//! After BodyLimit (a declared oversize body is refused without a validation round trip) and
//! before AgentCheck, which needs the token's org. RequirePermission goes on each route, after
//! PatAuth (or after AgentCheck: the order between those two does not matter).

mod failures;
mod permission;
mod service;
mod validator;

pub use failures::{AddrFn, AuthFailureLimit};
pub use permission::{RequirePermission, RequirePermissionLayer};
pub use service::{PatAuth, PatAuthLayer, PatCheck};
pub use validator::{TokenError, TokenValidator, bearer_token};
