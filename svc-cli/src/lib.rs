//! The `svc` command line.
//!
//! | command | what it does |
//! |---|---|
//! | `svc dev` | [`dev`]: the auth plane over an embedded store and the gateway, in one process |
//! | `svc token create \| list \| revoke` | [`token`]: token administration against any auth server |
//! | `svc usage` | [`usage`]: the usage ledger's totals (GetUsage) |
//!
//! Every failure is one line on stderr, `error: ...`; bad usage or configuration exits 2.

pub mod dev;
pub mod token;
pub mod usage;
