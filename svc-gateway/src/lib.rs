//! The svc reference gateway: svc-tower layers stacked over a provider-forwarding service.
//!
//! `main` is thin: [`config::Config::from_env`], [`Gateway::new`], [`Gateway::start`]. Tests do
//! the same in process, with a configuration built from a map and `listen` on
//! `127.0.0.1:0`.
//!
//! The request path, outermost first (see [`app`](fn@crate::app)): RequestId, the exported
//! request span, ErrorEnvelope, error reports (with `SENTRY_DSN`), metrics, then on protected routes BodyLimit, PatAuth,
//! AgentCheck, the route's permission, OrgRateLimit, the handler (parse and validate),
//! Idempotency and the provider.

pub mod access_log;
pub mod accounting;
pub mod app;
pub mod auth;
pub mod budget;
pub mod call;
pub mod carry;
pub mod config;
pub mod deadline;
pub mod error_report;
pub mod forward;
#[doc(hidden)]
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod http_metrics;
pub mod ledger;
pub mod mcp;
pub mod provider;
pub mod readiness;
pub mod request;
pub mod request_span;
pub mod routes;
pub mod server;
pub mod session;
pub mod sse;
mod stream_error;
pub mod telemetry;
pub mod token_estimate;
pub mod usage;
pub mod validate;

pub use app::{Gateway, StartError, app};
pub use server::Running;
