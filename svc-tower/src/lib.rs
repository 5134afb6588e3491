//! Tower middleware for PAT-authenticated, rate-limited, idempotent LLM traffic.
//!
//! Each layer stands alone and is generic over the body type, so it fits axum and plain hyper
//! alike. Stacked, they form the request path of the svc gateway (outermost first):
//!
//! | layer | module | what it does |
//! |---|---|---|
//! | `RequestId` | [`request_id`] | X-Request-ID, X-Trace-ID, X-Response-Time on every response |
//! | `ErrorEnvelope` | [`envelope`] | renders every [`error::ApiError`] as the JSON envelope; panics become 500 |
//! | `BodyLimit` | [`body_limit`] | 413 for bodies over the limit, declared or streamed |
//! | `PatAuth` | [`auth`] | validates the bearer PAT, inserts the [`context::OrgContext`] |
//! | `AgentCheck` | [`agent`] | verifies `X-SVC-Agent-ID` belongs to the token's org and is active |
//! | `OrgRateLimit` | [`rate_limit`] | per-org requests per minute, Redis or in-memory |
//! | `Idempotency` | [`idempotency`] | replays completed requests that carry an `Idempotency-Key` |
//!
//! Features: `grpc` (the tonic validators), `redis` (the Redis stores). With
//! `default-features = false` you get every layer, the traits and the in-memory backends, and
//! compile neither tonic nor redis.

#![cfg_attr(docsrs, feature(doc_auto_cfg))]

pub mod agent;
pub mod auth;
pub mod body;
pub mod body_limit;
pub mod context;
pub mod envelope;
pub mod error;
pub mod health;
pub mod idempotency;
pub mod metrics;
pub mod rate_limit;
pub mod request_id;
pub mod store;
