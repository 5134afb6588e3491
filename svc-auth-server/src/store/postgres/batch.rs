//! ValidateToken's row reads, several to a statement when they queue.
//!
//! Every ValidateToken reads its token row (with the agent it asks about, in the token's org,
//! under row-level security, when it asks about one). Under load most of what a read costs
//! PostgreSQL is the round trip (a backend woken, a statement bound, executed and answered), not
//! the index probe. So at most [`STATEMENTS`] statements run at once. A read that finds one of
//! them free runs its own statement, as before; one that finds none free waits in a queue, and
//! the next statement to finish hands the queue to a task that reads every waiting (token,
//! agent) once per statement, up to [`MAX_BATCH`] reads, until the queue is empty.
//!
//! A read is answered only by a statement sent after it arrived, so it sees every change
//! committed before it arrived (a revocation, say), exactly as a statement of its own would.
//! Queued reads are served by tasks of their own: a caller that gives up (its deadline passed)
//! drops only its wait, never a statement other reads depend on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};

use chrono::{DateTime, Utc};
use tokio::sync::oneshot;
use uuid::Uuid;

use super::super::rows::{AGENT_COLUMNS, VALIDATION_COLUMNS, ValidationWithAgentRow};
use super::super::{Agent, BoxError, StoreError, TokenRecord};
use super::lookups::Lookups;
use super::map_error;

/// Statements reading token rows at once. One statement takes well under a millisecond and
/// answers every read queued behind it, so one keeps up with far more reads than a single-thread
/// auth server sends, and the more reads wait, the fewer statements they cost. In `svc-harness`
/// runs on 2 CPUs, one took PostgreSQL's CPU per request at 32 connections from about 0.095 ms
/// (a statement per read) to 0.055 ms, where two left it at about 0.076 ms. A statement that
/// hangs holds the reads behind it for the pool's acquire timeout at most (see `lookups`).
pub(crate) const STATEMENTS: usize = 1;

/// Reads one statement takes at most.
pub(crate) const MAX_BATCH: usize = 64;

/// The token's columns, then the agent's prefixed `asked_`.
fn columns() -> String {
    let token = VALIDATION_COLUMNS
        .split(", ")
        .map(|column| format!("t.{column}"));
    let agent = AGENT_COLUMNS
        .split(", ")
        .map(|column| format!("a.{column} AS asked_{column}"));
    token.chain(agent).collect::<Vec<_>>().join(", ")
}

/// The budgets of the call: the org's, the token's, and the agent's (the one asked about when
/// it is in the org, else the token's own), under row-level security as `agent_in_org`
/// applies it. Called in the select list, and only when the token's org has a budget
/// (`t.budgeted`): a function scan would cost PostgreSQL its initialisation on every statement,
/// budget or none.
const BUDGETS: &str = "CASE WHEN t.budgeted THEN budgets_for_call(t.org_id, t.token_id, \
                       COALESCE(a.agent_id, t.agent_id)) END AS budgets";

/// One token, no agent.
pub(super) static ONE_TOKEN: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT NULL::uuid AS asked_for, {}, {BUDGETS} FROM token_for_validation($1) AS t \
         LEFT JOIN (SELECT NULL::uuid AS agent_id, NULL::uuid AS org_id, NULL::text AS status, \
                           NULL::text AS name, NULL::timestamptz AS created_at, \
                           NULL::text AS tools) AS a ON false",
        columns()
    )
});

/// One token and the agent asked about, in the org the token row names (never one the caller
/// names), under row-level security as `agent_in_org` applies it.
pub(super) static ONE_TOKEN_WITH_AGENT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT $2::uuid AS asked_for, {}, {BUDGETS} FROM token_for_validation($1) AS t \
         LEFT JOIN LATERAL agent_in_org(t.org_id, $2) AS a ON true",
        columns()
    )
});

/// Many of either: one row per (token id, agent id or NULL) whose token exists.
pub(super) static MANY: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT k.agent_id AS asked_for, {}, {BUDGETS} \
         FROM unnest($1::uuid[], $2::uuid[]) AS k(token_id, agent_id) \
         CROSS JOIN LATERAL token_for_validation(k.token_id) AS t \
         LEFT JOIN LATERAL (SELECT * FROM agent_in_org(t.org_id, k.agent_id) \
                            WHERE k.agent_id IS NOT NULL) AS a ON true",
        columns()
    )
});

/// One row of any of the statements.
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
    /// Statements running, inline or on a task.
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
        let key = (token_id, agent_id);
        let answer = {
            let mut queue = self.shared.lock();
            if queue.running < STATEMENTS {
                queue.running += 1;
                None
            } else {
                let (reply, answer) = oneshot::channel();
                queue.waiting.push(Waiting { key, reply });
                Some(answer)
            }
        };
        let Some(answer) = answer else {
            // Handed on to the queue, if any, when done or dropped.
            let _slot = Slot(Some(self.shared.clone()));
            // A statement of one read returns its row or none.
            let rows = self.shared.fetch(&[key]).await.map_err(map_error)?;
            return rows
                .into_iter()
                .next()
                .map(|row| Found::try_from(row.found))
                .transpose();
        };
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

    /// Runs the statement for `keys` (distinct, at least one).
    async fn fetch(&self, keys: &[Key]) -> Result<Vec<Row>, sqlx::Error> {
        self.statements.fetch_add(1, Ordering::Relaxed);
        let query = match keys {
            [(token, None)] => sqlx::query_as(&ONE_TOKEN).bind(*token),
            [(token, Some(agent))] => sqlx::query_as(&ONE_TOKEN_WITH_AGENT)
                .bind(*token)
                .bind(*agent),
            _ => {
                let (tokens, agents): (Vec<Uuid>, Vec<Option<Uuid>>) = keys.iter().copied().unzip();
                sqlx::query_as(&MANY).bind(tokens).bind(agents)
            }
        };
        self.lookups.fetch_all(query).await
    }
}

/// One statement's place among the [`STATEMENTS`]. Given up, it goes to a task serving the
/// queue if reads wait there, else back to the pool of places.
struct Slot(Option<Arc<Shared>>);

impl Drop for Slot {
    fn drop(&mut self) {
        let Some(shared) = self.0.take() else {
            return;
        };
        let mut queue = shared.lock();
        if !queue.waiting.is_empty()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            drop(queue);
            runtime.spawn(serve(Slot(Some(shared))));
            return;
        }
        queue.running -= 1;
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
                // Leaving and giving the place back under one lock: a read arriving after this
                // finds the place free.
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
        let outcome = Outcome::of(shared.fetch(&keys).await);
        for waiting in batch {
            let answer = match &outcome {
                Outcome::Rows(found, unreadable) => one(found, unreadable, &waiting.key),
                Outcome::Failed(error) => Err(shared_error(error)),
            };
            // A reader that gave up has dropped its receiver: nothing to do.
            let _ = waiting.reply.send(answer);
        }
    }
}

/// A statement's result, by read.
enum Outcome {
    /// The rows found, and the error of a row that did not convert, if any.
    Rows(HashMap<Key, Found>, Option<Arc<StoreError>>),
    Failed(Arc<StoreError>),
}

impl Outcome {
    fn of(rows: Result<Vec<Row>, sqlx::Error>) -> Outcome {
        let rows = match rows {
            Ok(rows) => rows,
            Err(error) => return Outcome::Failed(Arc::new(map_error(error))),
        };
        let mut found = HashMap::with_capacity(rows.len());
        let mut unreadable = None;
        for row in rows {
            match Found::try_from(row.found) {
                Ok(record) => {
                    found.insert((record.0.token_id, row.asked_for), record);
                }
                Err(error) => unreadable = Some(Arc::new(error)),
            }
        }
        Outcome::Rows(found, unreadable)
    }
}

/// The answer to the read of `key`. A row that did not convert cannot be trusted to name its
/// read: every read without a row gets its error rather than a wrong "no such token".
fn one(found: &HashMap<Key, Found>, unreadable: &Option<Arc<StoreError>>, key: &Key) -> Answer {
    match (found.get(key), unreadable) {
        (Some(record), _) => Ok(Some(record.clone())),
        (None, Some(error)) => Err(shared_error(error)),
        (None, None) => Ok(None),
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
