//! The usage ledger: one record per call a provider was asked to answer (replays excluded),
//! written off the request path by one bounded, batching writer.
//!
//! A request hands its record to [`Ledger::record`], which never waits: the record joins a
//! queue of at most `SVC_LEDGER_BUFFER` records, and one background task writes the queue's
//! head in batches to a [`LedgerSink`]. While the sink fails (the database is down) the
//! records stay queued and the writer retries with backoff; once the queue is full, new
//! records are dropped and counted in `svc_ledger_records_total{outcome="dropped"}`. Every
//! record carries an id minted once, so a batch retried after a lost commit acknowledgement
//! counts nothing twice.
//!
//! Sinks: [`PgLedger`] (PostgreSQL, as the gateway's own role, which may insert into the
//! ledger and not read it) and, in `svc dev`, the embedded store.

mod metrics;
mod postgres;
mod writer;

use futures_util::future::BoxFuture;
pub use metrics::LedgerMetrics;
pub use postgres::PgLedger;
pub use svc_runtime::usage::UsageRecord;
pub use writer::{DEFAULT_BATCH, DEFAULT_BUFFER, Ledger};

/// An error from a sink, boxed: sinks keep their driver types to themselves.
pub type SinkError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Where batches of records go. A write either stores the whole batch or fails; storing a
/// record twice (same `record_id`) must be a no-op.
pub trait LedgerSink: Send + Sync + 'static {
    /// Stores `batch`.
    fn write<'a>(&'a self, batch: &'a [UsageRecord]) -> BoxFuture<'a, Result<(), SinkError>>;
}
