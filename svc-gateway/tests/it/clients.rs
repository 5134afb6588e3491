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

use crate::openai_sdk::install;
use crate::openai_sdk::plane;
use crate::support;

mod stack;
mod tools;
mod upstream;

mod claude_code;
mod node;
mod python;
