//! Integration templates for svc-tower and the auth service, each a library module that its
//! example binary serves and its test in `tests/` drives over real loopback:
//!
//! | example | module | shows |
//! |---|---|---|
//! | `axum_app` | [`axum_app`] | the protected stack as one `Router::layer`, the permission guard per route |
//! | `hyper_app` | [`hyper_app`] | the same stack in a plain hyper 1 server, no boxing |
//! | `custom_validator` | [`custom_validator`] | PatAuth over a token store of your own, as a closure; RequirePermission |
//! | `grpc_admin` | [`grpc_admin`] | CreateToken, ListTokens paging, RevokeToken over gRPC with the admin PAT as metadata |
//!
//! Run one with `cargo run -p svc-examples --example <name>`; the header of each example file
//! says what it needs and shows requests to try.

pub mod axum_app;
pub mod custom_validator;
pub mod demo;
pub mod grpc_admin;
pub mod hyper_app;
pub mod memory;
