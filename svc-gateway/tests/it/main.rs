//! The gateway's integration tests, one binary: a module per concern, the fixtures they share
//! built once. `cargo test -p svc-gateway --test it -- MODULE::` runs one module.

// Shared fixtures: the gateway stack and its fakes, the provider registry the routing tests
// configure, and the telemetry stand-ins. The SDK and Anthropic fixtures live under the test
// modules that own them (`openai_sdk`, `anthropic`).
mod otel;
mod registry;
mod support;

mod access_log;
mod anthropic;
mod anthropic_sdk;
mod binary;
mod budgets;
mod chat;
mod clients;
mod counted_with_reservation;
mod dependency_hygiene;
mod docs;
mod e2e_auth_failures;
mod e2e_auth_store_down;
mod e2e_balance;
mod e2e_cluster;
mod e2e_cold_share;
mod e2e_early_limit;
mod e2e_errors;
mod e2e_kill_switch;
mod e2e_mtls;
mod e2e_one_auth_call;
mod e2e_shared;
mod environment;
mod error_reports;
mod fuzz_twins;
mod ledger;
mod live;
mod mcp;
mod openai_sdk;
mod openai_sdk_node;
mod openai_sdk_surface;
mod openapi;
mod openapi_schemathesis;
mod ops;
mod ops_files;
mod otel_export;
mod panic;
mod probe;
mod properties;
mod providers;
mod routes;
mod session_role;
mod shutdown;
mod slow_clients;
mod stream_errors_sdk;
mod token_limits;
mod trace_context;
mod translation;
mod translation_sdk;
