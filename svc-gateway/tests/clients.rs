//! The compatibility matrix: real agent clients and frameworks, unchanged but for the base URL,
//! the key (a PAT) and the `X-SVC-Agent-ID` header, each running an agent loop through the
//! `svc-gateway` binary in live mode. Behind it, the real auth server and a scripted upstream
//! speaking OpenAI's and Anthropic's protocols, whose tool calls fit the tools' schemas.
//!
//! Each client is installed inside the run, at a pinned version, under the target directory
//! (see `clients/tools.rs`); without the interpreter or a registry to install from, its test
//! says why and passes. One stack serves all the runs of one client. Which client is
//! configured how is in `docs/reference/clients.md`.
#![cfg(unix)]

#[path = "openai_sdk/install.rs"]
mod install;
#[path = "openai_sdk/plane.rs"]
mod plane;
mod support;

#[path = "clients/stack.rs"]
mod stack;
#[path = "clients/tools.rs"]
mod tools;
#[path = "clients/upstream.rs"]
mod upstream;

#[path = "clients/claude_code.rs"]
mod claude_code;
#[path = "clients/node.rs"]
mod node;
#[path = "clients/python.rs"]
mod python;
