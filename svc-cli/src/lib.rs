//! The `svc` command line.
//!
//! | command | what it does |
//! |---|---|
//! | `svc dev` | [`dev`]: the auth plane over an embedded store and the gateway, in one process |
//! | `svc token create \| list \| revoke` | [`token`]: token administration against any auth server |
//! | `svc usage` | [`usage`]: the usage ledger's totals (GetUsage) |
//! | `svc agent create \| list \| get \| pause \| resume \| suspend \| archive` | [`agent`]: agents and their kill switch |
//! | `svc user create \| list` | [`user`]: the org's users |
//! | `svc audit` | [`audit`]: the org's audit trail |
//!
//! [`cli`] parses every command line with clap; the admin commands share [`admin`] (the
//! configuration, the client, paging, exit codes) and print through one table and JSON
//! layer. Every failure is one line on stderr, `error: ...`; bad usage or configuration exits
//! 2, a refusal by the auth server 1.

pub mod admin;
pub mod agent;
pub mod args;
pub mod audit;
pub mod budget;
pub mod cli;
pub mod dev;
pub mod output;
pub mod token;
pub mod usage;
pub mod user;
