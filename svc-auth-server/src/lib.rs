//! The svc identity plane: `svc.auth.v1.AuthService` over PostgreSQL with row-level security.

pub mod config;
pub mod migrate;
pub mod pat;
pub mod store;
pub mod telemetry;
pub mod verify;
