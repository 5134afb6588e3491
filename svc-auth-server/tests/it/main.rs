//! The auth server's integration tests, one binary: a module per concern over the fixtures in
//! `common`. `cargo test -p svc-auth-server --test it -- MODULE::` runs one module.

mod common;

mod admin;
mod budgets;
mod cancelled;
mod cli;
mod cross_org;
mod error_reports;
mod fair_lane;
mod flood;
mod grpc_stalls;
mod issuer;
mod operations;
mod ops;
mod single_flight;
mod tls;
mod token_states;
mod trace_logs;
mod validate_path;
