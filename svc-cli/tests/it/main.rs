//! The `svc` command line's integration tests, one binary: the admin commands against a real
//! auth server, the dev mode and the quickstart. `cargo test -p svc-cli --test it -- MODULE::`
//! runs one module.

mod admin;
mod dev_mode;
mod quickstart;
