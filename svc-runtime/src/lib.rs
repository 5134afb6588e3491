//! What every svc service needs at start and at stop, in one small crate shared by the auth
//! server, the gateway and the `svc` command.
//!
//! | module | what it holds |
//! |---|---|
//! | [`config`] | [`config::Vars`] (a map of the environment) and the one [`config::ConfigError`], `VAR: problem` |
//! | [`secret`] | [`Secret`], the one redacting wrapper for DSNs and keys |
//! | [`telemetry`] | log setup (`SVC_LOG_LEVEL`, `SVC_LOG_FORMAT`) and OTLP trace export (`OTEL_*`) |
//! | `error_report` | (feature `error-reports`) the Sentry client of `SENTRY_DSN`, its panic hook, and the scrubbing of every event |
//! | [`runtime`] | the Tokio runtime, sized by `SVC_WORKER_THREADS` (half the CPUs by default) |
//! | [`shutdown`] | the SIGINT/SIGTERM future and the [`shutdown::Drain`] of a bounded shutdown |
//! | `http_server` | (feature `http-server`) the one HTTP serve loop: timeouts, connection cap, drain |
//! | [`health`] | readiness checks in parallel under per-check and overall budgets, and the `/ready` body |
//! | [`postgres`] | the pool that runs as a non-owner role, and org-scoped transactions |
//! | [`usage`] | [`usage::UsageRecord`], one row of the usage ledger |
//! | `cli` | (feature `cli`) every binary's clap conventions: help and version exit 0, a refusal is one line with exit 2, the variables read listed in the help |
//! | `auth_client` | (feature `auth-client`) the auth service's address, TLS and deadline, and the one channel built from them |
//!
//! A configuration error is printed by the binaries as one line, `error: VAR: problem`, with
//! exit code [`config::EXIT_CONFIG`].

#[cfg(feature = "auth-client")]
pub mod auth_client;
#[cfg(feature = "cli")]
pub mod cli;
pub mod config;
#[cfg(feature = "error-reports")]
pub mod error_report;
pub mod health;
#[cfg(feature = "http-server")]
pub mod http_server;
pub mod postgres;
pub mod runtime;
pub mod secret;
pub mod shutdown;
pub mod telemetry;
pub mod usage;

pub use config::{ConfigError, Environment, Vars};
pub use secret::Secret;
