//! The svc identity plane: `svc.auth.v1.AuthService` over PostgreSQL with row-level security.
//!
//! | module | what it holds |
//! |---|---|
//! | [`server`] | [`Server::start`]: gRPC (AuthService, health, reflection) and the HTTP ops routes |
//! | [`grpc`] | the AuthService adapter, ValidateToken ahead of tonic's routes, status mapping |
//! | [`verify`] | PAT verification: row read every call, Argon2id once per secret, failure limits |
//! | [`pat`] | the `svc_pat_<uuid>_<secret>` format with its checksum |
//! | [`store`] | the [`store::Store`] trait, PostgreSQL backend, shared test suite |
//! | [`migrate`] | embedded migrations and the refuse-unmigrated check |
//! | [`bootstrap`] | an org's first admin token, in any environment |
//! | [`seed`] | local development data |
//! | [`ops`] | `/health`, `/ready`, `/metrics` |
//! | [`config`] | environment configuration, parsed with [`svc_runtime::config`] |
//! | [`telemetry`] | [`svc_runtime::telemetry`], the log and trace setup both services share |
//! | [`cli`] | the `serve`, `migrate`, `bootstrap` and `seed` subcommands |

pub mod bootstrap;
pub mod cli;
pub mod config;
pub mod grpc;
mod incoming;
pub mod metrics;
pub mod migrate;
pub mod ops;
/// The PAT format this server mints and checks (svc-core's).
pub use svc_core::pat;
pub mod seed;
pub mod server;
pub mod store;
mod tls;
pub mod verify;

pub use config::Config;
pub use server::{RunningServer, Server};
pub use svc_runtime::telemetry;
