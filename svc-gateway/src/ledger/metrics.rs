//! The ledger's metrics: what was written, what was dropped, what waits.

use std::sync::atomic::AtomicI64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The `outcome` label of `svc_ledger_records_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

/// `svc_ledger_records_total{outcome="written"|"dropped"}`, `svc_ledger_pending` and
/// `svc_ledger_write_failures_total`.
#[derive(Clone, Debug, Default)]
pub struct LedgerMetrics {
    records: Family<OutcomeLabel, Counter>,
    pending: Gauge<i64, AtomicI64>,
    failures: Counter,
}

impl LedgerMetrics {
    /// Registers the metrics in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "svc_ledger_records",
            "Usage ledger records, by outcome: written, or dropped because the queue was full",
            self.records.clone(),
        );
        registry.register(
            "svc_ledger_pending",
            "Usage ledger records queued for writing",
            self.pending.clone(),
        );
        registry.register(
            "svc_ledger_write_failures",
            "Usage ledger batch writes that failed and will be retried",
            self.failures.clone(),
        );
    }

    pub(super) fn written(&self, n: usize) {
        self.outcome("written").inc_by(n as u64);
    }

    pub(super) fn dropped(&self) {
        self.outcome("dropped").inc();
    }

    pub(super) fn pending(&self, n: usize) {
        self.pending.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    pub(super) fn failed(&self) {
        self.failures.inc();
    }

    fn outcome(&self, outcome: &'static str) -> Counter {
        self.records
            .get_or_create(&OutcomeLabel { outcome })
            .clone()
    }

    /// Records written so far (for tests and embedding).
    pub fn written_total(&self) -> u64 {
        self.outcome("written").get()
    }

    /// Records dropped so far.
    pub fn dropped_total(&self) -> u64 {
        self.outcome("dropped").get()
    }
}
