//! What every svc service needs at start and at stop, in one small crate shared by the auth
//! server, the gateway and the `svc` command.
//!
//! | module | what it holds |
//! |---|---|
//! | [`config`] | [`config::Vars`] (a map of the environment) and the one [`config::ConfigError`], `VAR: problem` |
//! | [`secret`] | [`Secret`], the one redacting wrapper for DSNs and keys |
//! | [`telemetry`] | log setup (`SVC_LOG_LEVEL`, `SVC_LOG_FORMAT`) and OTLP trace export (`OTEL_*`) |
//! | [`shutdown`] | the SIGINT/SIGTERM future |
//! | [`postgres`] | the pool that runs as a non-owner role, and org-scoped transactions |
//! | `auth_client` | (feature `auth-client`) the auth service's address, TLS and deadline, and the one channel built from them |
//!
//! A configuration error is printed by the binaries as one line, `error: VAR: problem`, with
//! exit code [`config::EXIT_CONFIG`].

#[cfg(feature = "auth-client")]
pub mod auth_client;
pub mod config;
pub mod postgres;
pub mod secret;
pub mod shutdown;
pub mod telemetry;

pub use config::{ConfigError, Environment, Vars};
pub use secret::Secret;
