//! Integration templates for svc-tower: the same protected stack in an axum app and in a plain
//! hyper 1 server, over in-memory validators.
//!
//! Run them with `cargo run -p svc-examples --example axum_app` or `--example hyper_app`; the
//! header of each example file shows requests to try. [`axum_app::app`] and [`hyper_app::app`]
//! build the services, so the tests in `tests/` drive exactly what the examples serve.

pub mod axum_app;
pub mod custom_validator;
pub mod demo;
pub mod hyper_app;
pub mod memory;
