//! Tower middleware for PAT-authenticated, rate-limited, idempotent LLM traffic.
//!
//! ```
//! use std::convert::Infallible;
//!
//! use bytes::Bytes;
//! use http::{Request, Response, StatusCode};
//! use http_body_util::{BodyExt, Full};
//! use svc_tower::agent::{AgentCheckLayer, AgentError};
//! use svc_tower::auth::{PatAuthLayer, RequirePermissionLayer, TokenError};
//! use svc_tower::body_limit::BodyLimitLayer;
//! use svc_tower::context::{OrgContext, Permissions};
//! use svc_tower::envelope::ErrorEnvelopeLayer;
//! use svc_tower::idempotency::{IdempotencyLayer, MemoryIdempotencyStore};
//! use svc_tower::rate_limit::{MemoryRateLimitStore, OrgRateLimitLayer};
//! use svc_tower::request_id::RequestIdLayer;
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//! use uuid::Uuid;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! const TOKEN: &str = "svc_pat_0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b_s3cret";
//! let org_id = Uuid::now_v7();
//! // In production one `GrpcAuthClient` (feature `grpc`) is both validators.
//! let tokens = move |token: &str| {
//!     let known = token == TOKEN;
//!     async move {
//!         match known {
//!             true => Ok(OrgContext::new(org_id, Permissions::CHAT_COMPLETIONS, Uuid::now_v7())),
//!             false => Err(TokenError::Invalid),
//!         }
//!     }
//! };
//! let agents = |_org: Uuid, _agent: &str| async { Ok::<_, AgentError>(()) };
//!
//! let app = ServiceBuilder::new()
//!     .layer(RequestIdLayer::new())
//!     .layer(ErrorEnvelopeLayer::new())
//!     .layer(BodyLimitLayer::new(1024 * 1024))
//!     .layer(PatAuthLayer::new(tokens))
//!     .layer(AgentCheckLayer::new(agents))
//!     .layer(OrgRateLimitLayer::new(MemoryRateLimitStore::new(), 600))
//!     .layer(RequirePermissionLayer::chat_completions())
//!     .layer(IdempotencyLayer::new(MemoryIdempotencyStore::new()))
//!     .service(service_fn(|_req: Request<Full<Bytes>>| async {
//!         Ok::<_, Infallible>(Response::new(Full::from(r#"{"object":"chat.completion"}"#)))
//!     }));
//!
//! let request = |token: Option<&str>| {
//!     let mut request = Request::post("/v1/chat/completions")
//!         .header("x-svc-agent-id", Uuid::now_v7().to_string());
//!     if let Some(token) = token {
//!         request = request.header("authorization", format!("Bearer {token}"));
//!     }
//!     request.body(Full::<Bytes>::from(r#"{"model":"m","messages":[]}"#)).unwrap()
//! };
//!
//! let ok = app.clone().oneshot(request(Some(TOKEN))).await.unwrap();
//! assert_eq!(ok.status(), StatusCode::OK);
//! assert_eq!(ok.headers()["x-ratelimit-limit"], "600");
//! assert!(ok.headers().contains_key("x-request-id"));
//!
//! let refused = app.oneshot(request(None)).await.unwrap();
//! assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
//! let body = refused.into_body().collect().await.unwrap().to_bytes();
//! let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
//! assert_eq!(json["error"]["code"], "MISSING_TOKEN");
//! # }
//! ```
//!
//! Each layer stands alone, is generic over the request and response body types, and rejects
//! with a response (never a service error), so it fits axum and plain hyper alike. A layer that
//! refuses a request answers with an [`error::ApiError`] response; [`envelope::ErrorEnvelope`]
//! renders every one of them as the same JSON envelope, in one place.
//!
//! # Layers
//!
//! Outermost first, in the order a protected route stacks them:
//!
//! | layer | module | what it does | answers on its own |
//! |---|---|---|---|
//! | `RequestIdLayer` | [`request_id`] | request id (an inbound UUID kept, else UUID v7), W3C trace id; `X-Request-ID`, `X-Trace-ID`, `X-Response-Time` on every response | never |
//! | `ErrorEnvelopeLayer` | [`envelope`] | renders every [`error::ApiError`] response as the JSON envelope, with `request_id`, `timestamp` and `docs_url` | 500 `INTERNAL_ERROR` on a panic |
//! | `BodyLimitLayer` | [`body_limit`] | refuses a `Content-Length` over the limit unread; limits a streamed body as it is read | 413 `PAYLOAD_TOO_LARGE` |
//! | `PatAuthLayer` | [`auth`] | validates `Authorization: Bearer svc_pat_...` through a [`auth::TokenValidator`], inserts the [`context::OrgContext`] | 401 `MISSING_TOKEN` / `INVALID_TOKEN`, 503 `SERVICE_DEGRADED` |
//! | `AgentCheckLayer` | [`agent`] | checks `X-SVC-Agent-ID` against the token's org through an [`agent::AgentValidator`] | 400 `MISSING_AGENT_ID` / `VALIDATION_ERROR`, 403 `AGENT_NOT_AUTHORIZED` / `AGENT_SUSPENDED`, 503 `AUTH_UNAVAILABLE` |
//! | `OrgRateLimitLayer` | [`rate_limit`] | per-org requests per minute (GCRA), `X-RateLimit-*` headers; fails open when its store does | 429 `RATE_LIMITED` with `Retry-After` |
//! | `RequirePermissionLayer` | [`auth`] | per route: the token must hold the route's permission bits | 403 `INSUFFICIENT_PERMISSIONS` |
//! | `IdempotencyLayer` | [`idempotency`] | replays committed responses per org and `Idempotency-Key`; releases the key on 429/5xx; fails open | 400 `VALIDATION_ERROR`, 409 `IDEMPOTENCY_IN_PROGRESS` / `IDEMPOTENCY_KEY_REUSE` |
//!
//! Each name has one path: its module (`svc_tower::auth::PatAuthLayer`), as in tower-http.
//! PatAuth and AgentCheck are [`check::AsyncCheck`] with the crate's checks: write a
//! [`check::CheckRequest`] for any other check that must ask a backend before a request goes on.
//!
//! Layers talk through request extensions only: [`request_id::RequestId`] and
//! [`request_id::TraceId`] from RequestId, the [`context::OrgContext`] from PatAuth with the
//! agent filled in by AgentCheck. The org always comes from the validated token, never from the
//! request.
//!
//! # Backends
//!
//! Swappable behaviour is a trait; closures implement the validator traits directly.
//!
//! | trait | shipped implementations |
//! |---|---|
//! | [`auth::TokenValidator`] | `GrpcAuthClient` (feature `grpc`), any `Fn(&str) -> impl Future` |
//! | [`agent::AgentValidator`] | `GrpcAuthClient` (feature `grpc`), any `Fn(Uuid, &str) -> impl Future` |
//! | [`rate_limit::RateLimitStore`] | `RedisRateLimitStore` (feature `redis`), [`rate_limit::MemoryRateLimitStore`], [`rate_limit::NoopRateLimitStore`] |
//! | [`idempotency::IdempotencyStore`] | `RedisIdempotencyStore` (feature `redis`), [`idempotency::MemoryIdempotencyStore`] |
//!
//! # Supporting modules
//!
//! | module | what it holds |
//! |---|---|
//! | [`error`] | [`error::ErrorCode`] (every error code with its HTTP status), [`error::ApiError`], [`error::FieldError`]: the typed rejection and its envelope |
//! | [`context`] | [`context::OrgContext`] and the [`context::Permissions`] bitmap |
//! | [`body`] | [`body::ResponseBody`]: the one response body of the layers that answer on their own; an enum, never boxed |
//! | [`check`] | [`check::AsyncCheckLayer`] and the [`check::CheckRequest`] trait: the async check PatAuth and AgentCheck are built on |
//! | [`metrics`] | [`metrics::ProxyMetrics`]: the `svc_proxy_*` handles, registered in your registry and handed to `PatAuthLayer::metrics`, `OrgRateLimitLayer::metrics`, `IdempotencyLayer::metrics` |
//! | `grpc` | (feature `grpc`) `GrpcAuthClient`, the validators over `svc.auth.v1.AuthService`, and its error type |
//! | [`trace_context`] | [`trace_context::TraceParent`] (the `traceparent` of an outbound call, sampled flag included) and the task-local trace context PatAuth and AgentCheck run their validators in, which `GrpcAuthClient` sends as gRPC metadata; a `TraceParent` in the request extensions (a tracing layer's own span) takes precedence over the bare trace id |
//! | [`store`] | [`store::StoreError`] and [`store::StoreFuture`], shared by the stores; `RedisPool` (feature `redis`), one pool for every Redis store |
//!
//! # Features
//!
//! | feature | default | brings |
//! |---|---|---|
//! | `grpc` | yes | `GrpcAuthClient`: the tonic [`auth::TokenValidator`] and [`agent::AgentValidator`] for `svc.auth.v1.AuthService`, ValidateToken on an `h2` connection of its own for one IP address |
//! | `grpc-tls` | no | `GrpcAuthClient::connect_lazy_tls` and `with_token_connection_tls`: mutual TLS for that client and its token connection (rustls, ring); implies `grpc` |
//! | `redis` | yes | `store::RedisPool`, `RedisRateLimitStore`, `RedisIdempotencyStore` (bb8 pool on one server, cluster connection on a Redis Cluster; one script round trip per decision) |
//!
//! With `default-features = false` you keep every layer, the traits and the in-memory backends,
//! and compile neither tonic nor redis. Minimum supported Rust version: 1.88.

#![cfg_attr(docsrs, feature(doc_auto_cfg))]

pub mod agent;
pub mod auth;
pub mod body;
pub mod body_limit;
pub mod check;
pub mod context;
pub mod envelope;
pub mod error;
#[cfg(feature = "grpc")]
pub mod grpc;
pub mod idempotency;
pub mod metrics;
pub mod rate_limit;
pub mod request_id;
pub mod store;
pub mod trace_context;
