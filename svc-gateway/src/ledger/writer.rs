//! The one writer: a bounded queue and the task that drains it in batches.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::sync::Notify;

use super::{LedgerMetrics, LedgerSink, UsageRecord};

/// Records queued at most (`SVC_LEDGER_BUFFER`): about 200 bytes each, so 100,000 hold
/// minutes of a busy gateway's calls in some 20 MiB while the database is away.
pub const DEFAULT_BUFFER: usize = 100_000;
/// Records per write (`SVC_LEDGER_BATCH`).
pub const DEFAULT_BATCH: usize = 500;
/// A write that takes longer failed: the connection is gone, not slow.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// The first pause after a failed write; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// How often an idle writer checks whether the gateway is gone.
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// The handle requests record through; cloning shares the queue. See the [module docs](super).
#[derive(Clone, Debug)]
pub struct Ledger {
    shared: Arc<Shared>,
    /// The writer watches this to learn that the gateway has gone.
    _handles: Arc<()>,
}

#[derive(Debug)]
struct Shared {
    queue: Mutex<VecDeque<UsageRecord>>,
    wake: Notify,
    capacity: usize,
    metrics: LedgerMetrics,
}

impl Shared {
    fn queue(&self) -> MutexGuard<'_, VecDeque<UsageRecord>> {
        // A panic while holding the lock leaves a valid queue: keep using it.
        self.queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Ledger {
    /// Starts the writer task on the current runtime, writing to `sink` in batches of at most
    /// `batch` and holding at most `capacity` records. Once every handle is dropped the task
    /// writes what is queued and ends (at once if a write then fails: the gateway is stopping).
    pub fn start(
        sink: Arc<dyn LedgerSink>,
        capacity: usize,
        batch: usize,
        metrics: LedgerMetrics,
    ) -> Ledger {
        let shared = Arc::new(Shared {
            queue: Mutex::new(VecDeque::new()),
            wake: Notify::new(),
            capacity: capacity.max(1),
            metrics,
        });
        let handles = Arc::new(());
        tokio::spawn(run(
            shared.clone(),
            Arc::downgrade(&handles),
            sink,
            batch.max(1),
        ));
        Ledger {
            shared,
            _handles: handles,
        }
    }

    /// Queues `record` for writing; never waits. A full queue drops it (and counts it).
    pub fn record(&self, record: UsageRecord) {
        let record = record.bounded();
        let mut queue = self.shared.queue();
        if queue.len() >= self.shared.capacity {
            drop(queue);
            self.shared.metrics.dropped();
            return;
        }
        queue.push_back(record);
        self.shared.metrics.pending(queue.len());
        drop(queue);
        self.shared.wake.notify_one();
    }
}

/// Drains the queue's head into `sink` until the last handle is gone and nothing is left.
async fn run(strong: Arc<Shared>, handles: Weak<()>, sink: Arc<dyn LedgerSink>, batch_size: usize) {
    let mut backoff = FIRST_BACKOFF;
    let mut failing = false;
    loop {
        let stopping = handles.strong_count() == 0;
        // Copies, not removals: a failed write leaves the queue as it was, in order.
        let batch: Vec<UsageRecord> = strong.queue().iter().take(batch_size).cloned().collect();
        if batch.is_empty() {
            if stopping {
                return;
            }
            // Woken by a record, or on a timer to notice that the gateway has gone.
            let _ = tokio::time::timeout(IDLE_CHECK, strong.wake.notified()).await;
            continue;
        }
        let written = tokio::time::timeout(WRITE_TIMEOUT, sink.write(&batch)).await;
        match written {
            Ok(Ok(())) => {
                let mut queue = strong.queue();
                // Only this task removes records, and records are only added at the back.
                queue.drain(..batch.len());
                strong.metrics.pending(queue.len());
                drop(queue);
                strong.metrics.written(batch.len());
                if failing {
                    tracing::info!(records = batch.len(), "usage ledger writes resumed");
                }
                failing = false;
                backoff = FIRST_BACKOFF;
            }
            outcome => {
                strong.metrics.failed();
                if stopping {
                    return;
                }
                if !failing {
                    let error = match outcome {
                        Ok(Err(error)) => error.to_string(),
                        _ => "the write timed out".to_owned(),
                    };
                    tracing::warn!(
                        pending = strong.queue().len(),
                        error = %error,
                        "usage ledger write failed; records are kept and retried"
                    );
                }
                failing = true;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use chrono::Utc;
    use futures_util::future::BoxFuture;
    use uuid::Uuid;

    use super::*;
    use crate::ledger::SinkError;

    /// Keeps what it is given, or fails while `down`.
    #[derive(Default)]
    struct Kept {
        rows: Mutex<Vec<UsageRecord>>,
        down: AtomicBool,
    }

    impl LedgerSink for Kept {
        fn write<'a>(&'a self, batch: &'a [UsageRecord]) -> BoxFuture<'a, Result<(), SinkError>> {
            Box::pin(async move {
                if self.down.load(Ordering::SeqCst) {
                    return Err("down".into());
                }
                self.rows.lock().unwrap().extend_from_slice(batch);
                Ok(())
            })
        }
    }

    fn record(n: i64) -> UsageRecord {
        UsageRecord {
            record_id: Uuid::now_v7(),
            org_id: Uuid::new_v4(),
            token_id: Uuid::new_v4(),
            agent_id: None,
            model: "m".into(),
            provider: "p".into(),
            prompt_tokens: n,
            completion_tokens: 1,
            status: 200,
            latency_ms: 1,
            at: Utc::now(),
            tool: None,
            cost_usd_micros: 0,
        }
    }

    async fn settle(sink: &Kept, expected: usize) {
        for _ in 0..1000 {
            if sink.rows.lock().unwrap().len() >= expected {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("never wrote {expected} records");
    }

    #[tokio::test(start_paused = true)]
    async fn records_are_kept_in_order_while_the_sink_is_down_and_dropped_past_the_bound() {
        let sink = Arc::new(Kept::default());
        sink.down.store(true, Ordering::SeqCst);
        let metrics = LedgerMetrics::default();
        let ledger = Ledger::start(sink.clone(), 5, 2, metrics.clone());
        for n in 0..7 {
            ledger.record(record(n));
        }
        assert_eq!(metrics.dropped_total(), 2);
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(sink.rows.lock().unwrap().is_empty());

        sink.down.store(false, Ordering::SeqCst);
        settle(&sink, 5).await;
        let kept: Vec<i64> = sink
            .rows
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.prompt_tokens)
            .collect();
        assert_eq!(kept, [0, 1, 2, 3, 4]);
        assert_eq!(metrics.written_total(), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn the_writer_writes_what_is_queued_then_ends_with_the_last_handle() {
        let sink = Arc::new(Kept::default());
        let ledger = Ledger::start(sink.clone(), 10, 10, LedgerMetrics::default());
        ledger.record(record(1));
        drop(ledger);
        settle(&sink, 1).await;
        tokio::time::sleep(IDLE_CHECK * 2).await;
        // Only the test holds the sink now: the task let go of its clone.
        assert_eq!(Arc::strong_count(&sink), 1);
    }
}
