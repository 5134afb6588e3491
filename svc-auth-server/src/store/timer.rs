//! The wall time of store calls, for `svc_db_query_duration_seconds`.

use std::future::Future;
use std::time::Instant;

use prometheus_client::metrics::histogram::Histogram;

/// Observes each call's duration into a histogram, when the store was given one.
#[derive(Debug, Clone, Default)]
pub(super) struct QueryTimer {
    histogram: Option<Histogram>,
}

impl QueryTimer {
    /// A timer observing into `histogram`.
    pub(super) fn new(histogram: Histogram) -> QueryTimer {
        QueryTimer {
            histogram: Some(histogram),
        }
    }

    /// Runs `operation`, recording how long it took whatever its outcome: a failing store is
    /// exactly when its latency is worth seeing.
    pub(super) async fn time<T>(&self, operation: impl Future<Output = T>) -> T {
        let started = Instant::now();
        let out = operation.await;
        if let Some(histogram) = &self.histogram {
            histogram.observe(started.elapsed().as_secs_f64());
        }
        out
    }
}
