//! The one writer of session checkpoints: requests hand their checkpoint over without waiting,
//! and a single task writes them in batches, one transaction per org and batch.
//!
//! The queue is bounded ([`QUEUE_CAPACITY`]): when PostgreSQL is slower than the traffic, the
//! checkpoints that do not fit are dropped and counted, never held in memory without end, and
//! never a cause of latency. Failures and drops are logged at most once per [`WARN_EVERY`],
//! with their counts, so a database outage does not flood the logs.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use uuid::Uuid;

use super::store::{Entry, SessionStore};

/// Checkpoints waiting to be written, at most.
pub const QUEUE_CAPACITY: usize = 4096;
/// Checkpoints written per batch, at most.
pub const MAX_BATCH: usize = 256;
/// The shortest interval between two warnings.
pub const WARN_EVERY: Duration = Duration::from_secs(10);

/// Hands checkpoints to the writer task; cheap to clone.
#[derive(Debug, Clone)]
pub struct CheckpointWriter {
    queue: mpsc::Sender<Entry>,
    dropped: Arc<AtomicU64>,
}

/// The writer task; it ends once every [`CheckpointWriter`] is dropped and the queue is written.
#[derive(Debug)]
pub struct WriterTask(JoinHandle<()>);

impl WriterTask {
    /// Waits up to `within` for the queue to be written.
    pub async fn flush(self, within: Duration) {
        if tokio::time::timeout(within, self.0).await.is_err() {
            tracing::warn!("session checkpoints still queued at shutdown were not recorded");
        }
    }
}

impl CheckpointWriter {
    /// Starts the writer task on `store`. Call it inside a Tokio runtime.
    pub fn start(store: SessionStore) -> (CheckpointWriter, WriterTask) {
        let (queue, entries) = mpsc::channel(QUEUE_CAPACITY);
        let dropped = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(run(store, entries, dropped.clone()));
        (CheckpointWriter { queue, dropped }, WriterTask(task))
    }

    /// Queues `entry`; drops it (counted) when the queue is full.
    pub fn submit(&self, entry: Entry) {
        if self.queue.try_send(entry).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

async fn run(store: SessionStore, mut entries: mpsc::Receiver<Entry>, dropped: Arc<AtomicU64>) {
    let mut warnings = Warnings::default();
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while entries.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let mut by_org: HashMap<Uuid, Vec<&Entry>> = HashMap::new();
        for entry in &batch {
            by_org.entry(entry.org_id).or_default().push(entry);
        }
        for (org_id, group) in by_org {
            if let Err(error) = store.record_all(org_id, &group).await {
                warnings.failed(group.len() as u64, &error);
            }
        }
        batch.clear();
        warnings.dropped(dropped.swap(0, Ordering::Relaxed));
    }
    warnings.dropped(dropped.swap(0, Ordering::Relaxed));
    warnings.flush();
}

/// Counts failed and dropped checkpoints between two warnings.
#[derive(Default)]
struct Warnings {
    failed: u64,
    dropped: u64,
    last_error: Option<String>,
    last_warned: Option<Instant>,
}

impl Warnings {
    fn failed(&mut self, count: u64, error: &sqlx::Error) {
        self.failed += count;
        // The driver's message names no secret: the DSN is never part of it.
        self.last_error = Some(error.to_string());
        self.maybe_warn();
    }

    fn dropped(&mut self, count: u64) {
        if count > 0 {
            self.dropped += count;
            self.maybe_warn();
        }
    }

    fn maybe_warn(&mut self) {
        if self.last_warned.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.failed == 0 && self.dropped == 0 {
            return;
        }
        tracing::warn!(
            failed = self.failed,
            dropped = self.dropped,
            error = self.last_error.as_deref(),
            "session checkpoints not recorded"
        );
        self.failed = 0;
        self.dropped = 0;
        self.last_error = None;
        self.last_warned = Some(Instant::now());
    }
}
