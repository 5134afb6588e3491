//! The examples' integration tests, one binary: each example run as a user would run it. `cargo test -p svc-examples --test it -- MODULE::` runs one module.

mod common;

mod apps;
mod custom_validator;
mod grpc_admin;
