//! The harnesses' integration tests, one binary: their command lines and short runs. `cargo test -p svc-benches --test it -- MODULE::` runs one module.

mod common;

mod harness_args;
mod load_interrupted;
mod load_smoke;
mod redis_script_cost;
