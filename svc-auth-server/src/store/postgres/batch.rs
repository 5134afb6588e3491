//! ValidateToken's row reads, several to a statement when they queue.
//!
//! Every ValidateToken reads its token row (with the agent it asks about, in the token's org,
//! under row-level security, when it asks about one). Under load most of what a read costs PostgreSQL is
//! the round trip (a backend woken, a statement bound, executed and answered), not the index
//! probe. So reads wait in one queue, at most [`STATEMENTS`] statements run at once, and each
//! statement takes every read queued when it starts (up to [`MAX_BATCH`]), reading each distinct
//! token id and agent once. One read at a time is a statement of one read, as before.
//!
//! A read is answered only by a statement sent after it was queued, so it sees every change
//! committed before it arrived (a revocation, say), exactly as a statement of its own would.
//! Statements run on tasks of their own: a caller that gives up (its deadline passed) drops only
//! its wait, never a statement other reads depend on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;
use uuid::Uuid;

use chrono::{DateTime, Utc};

use super::super::rows::{AGENT_COLUMNS, VALIDATION_COLUMNS, ValidationWithAgentRow};
use super::super::{Agent, BoxError, StoreError, TokenRecord};
use super::lookups::Lookups;
use super::map_error;

/// Statements reading token rows at once: with more, each takes fewer reads; with fewer, reads
/// wait for a statement to finish.
pub(crate) const STATEMENTS: usize = 2;

/// Reads one statement takes at most.
pub(crate) const MAX_BATCH: usize = 64;

/// The statement: for each (token id, agent id or NULL) asked, the token row if it exists,
/// through the same functions as a single read, and the agent of that row's org (never one the
/// caller names) beside it, NULL when none was asked for or the org has no such agent.
static TOKENS_FOR_VALIDATION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let token = VALIDATION_COLUMNS
        .split(", ")
        .map(|column| format!("t.{column}"));
    let agent = AGENT_COLUMNS
        .split(", ")
        .map(|column| format!("a.{column} AS asked_{column}"));
    let columns: Vec<String> = token.chain(agent).collect();
    format!(
        "SELECT k.agent_id AS asked_for, {} \
         FROM unnest($1::uuid[], $2::uuid[]) AS k(token_id, agent_id) \
         CROSS JOIN LATERAL token_for_validation(k.token_id) AS t \
         LEFT JOIN LATERAL (SELECT * FROM agent_in_org(t.org_id, k.agent_id) \
                            WHERE k.agent_id IS NOT NULL) AS a ON true",
        columns.join(", ")
    )
});

/// One row of the statement.
#[derive(sqlx::FromRow)]
struct Row {
    asked_for: Option<Uuid>,
    #[sqlx(flatten)]
    found: ValidationWithAgentRow<DateTime<Utc>>,
}

/// What one read asks: a token id, and an agent id or none.
type Key = (Uuid, Option<Uuid>);

/// The token row, and the agent asked about when it is in the token's org.
pub(crate) type Found = (TokenRecord, Option<Agent>);

type Answer = Result<Option<Found>, StoreError>;

struct Waiting {
    key: Key,
    reply: oneshot::Sender<Answer>,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Waiting>,
    /// Statement tasks running.
    running: usize,
}

struct Shared {
    lookups: Lookups,
    queue: Mutex<Queue>,
    statements: AtomicU64,
}

/// The token-row reads of one store. Cloning shares the queue.
#[derive(Clone)]
pub(crate) struct TokenReads {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for TokenReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenReads")
            .field("statements", &self.statements())
            .finish_non_exhaustive()
    }
}

impl TokenReads {
    pub(crate) fn new(lookups: Lookups) -> TokenReads {
        TokenReads {
            shared: Arc::new(Shared {
                lookups,
                queue: Mutex::new(Queue::default()),
                statements: AtomicU64::new(0),
            }),
        }
    }

    /// The token row of `token_id`, with its hash, and `agent_id`'s row when it is in the
    /// token's org; `None` when there is no such token.
    pub(crate) async fn read(&self, token_id: Uuid, agent_id: Option<Uuid>) -> Answer {
        let (reply, answer) = oneshot::channel();
        {
            let mut queue = self.shared.lock();
            queue.waiting.push(Waiting {
                key: (token_id, agent_id),
                reply,
            });
            if queue.running < STATEMENTS {
                queue.running += 1;
                tokio::spawn(serve(Slot(Some(self.shared.clone()))));
            }
        }
        answer.await.unwrap_or_else(|_| {
            Err(StoreError::Unavailable(
                "the token lookup stopped before answering".into(),
            ))
        })
    }

    /// Statements sent so far.
    pub(crate) fn statements(&self) -> u64 {
        self.shared.statements.load(Ordering::Relaxed)
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // The queue is consistent between statements: a panic elsewhere leaves nothing half done.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One statement task's place among the [`STATEMENTS`]; a task that ends without emptying the
/// queue (its runtime stopped under it) gives its place back.
struct Slot(Option<Arc<Shared>>);

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(shared) = self.0.take() {
            shared.lock().running -= 1;
        }
    }
}

/// Runs statements until the queue is empty.
async fn serve(mut slot: Slot) {
    let Some(shared) = slot.0.clone() else {
        return;
    };
    loop {
        let batch: Vec<Waiting> = {
            let mut queue = shared.lock();
            if queue.waiting.is_empty() {
                // Leaving and giving the place back under one lock: a read queued after this
                // finds the place free and starts a task of its own.
                queue.running -= 1;
                slot.0 = None;
                return;
            }
            let take = queue.waiting.len().min(MAX_BATCH);
            queue.waiting.drain(..take).collect()
        };
        let mut keys: Vec<Key> = batch.iter().map(|w| w.key).collect();
        keys.sort_unstable();
        keys.dedup();
        let (tokens, agents): (Vec<Uuid>, Vec<Option<Uuid>>) = keys.into_iter().unzip();
        shared.statements.fetch_add(1, Ordering::Relaxed);
        let rows = shared
            .lookups
            .fetch_all(
                sqlx::query_as::<_, Row>(&TOKENS_FOR_VALIDATION)
                    .bind(&tokens)
                    .bind(&agents),
            )
            .await;
        answer(batch, rows);
    }
}

/// Answers every read of `batch` from the statement's `rows`.
fn answer(batch: Vec<Waiting>, rows: Result<Vec<Row>, sqlx::Error>) {
    let rows = match rows {
        Ok(rows) => rows,
        Err(error) => {
            let error = Arc::new(map_error(error));
            for waiting in batch {
                let _ = waiting.reply.send(Err(shared_error(&error)));
            }
            return;
        }
    };
    let mut found: HashMap<Key, Found> = HashMap::new();
    // A row that does not convert cannot be trusted to name its read: every read of this batch
    // without a row gets its error rather than a wrong "no such token".
    let mut unreadable = None;
    for row in rows {
        match Found::try_from(row.found) {
            Ok(record) => {
                found.insert((record.0.token_id, row.asked_for), record);
            }
            Err(error) => unreadable = Some(Arc::new(error)),
        }
    }
    for waiting in batch {
        let answer = match (found.get(&waiting.key), &unreadable) {
            (Some(record), _) => Ok(Some(record.clone())),
            (None, Some(error)) => Err(shared_error(error)),
            (None, None) => Ok(None),
        };
        // A reader that gave up has dropped its receiver: nothing to do.
        let _ = waiting.reply.send(answer);
    }
}

/// `error` for one more reader, of the same kind.
fn shared_error(error: &Arc<StoreError>) -> StoreError {
    let source: BoxError = Box::new(SharedError(error.clone()));
    match &**error {
        StoreError::Unavailable(_) => StoreError::Unavailable(source),
        _ => StoreError::Query(source),
    }
}

/// One statement's failure, told to each of its reads.
#[derive(Debug)]
struct SharedError(Arc<StoreError>);

impl std::fmt::Display for SharedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for SharedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&*self.0)
    }
}
