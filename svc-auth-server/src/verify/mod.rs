//! Token verification: the ValidateToken path, and the admin check of the management calls.
//!
//! In order, cheapest first:
//!
//! 1. [`Pat::parse`]: shape and checksum, no I/O. Garbage stops here.
//! 2. The lane. A secret this process has seen succeed for this token id (the remembered
//!    success digest) is warm and goes on at once. Any other is cold and waits its turn on the
//!    cold lane's pace (`pacer`), charged to the org the token id was last read as (`lane`),
//!    or is refused as busy when its org's share of the queue is full: floods of forged or
//!    wrong tokens are all cold, so they cost at most the pace in reads and hashing, a token
//!    in use is never slowed by them, and one org's flood leaves the others their turns.
//! 3. The token row, read on every call through the store's one RLS-exempt lookup. An unknown
//!    id stops here, before any hashing; a revoked or expired token stops here too. Reading
//!    the row every time is what makes revocation immediate across replicas and makes a down
//!    database fail closed: no cache can answer in its place. The row names the token's org,
//!    which the lane remembers for the id's next cold call.
//! 4. A warm secret is done.
//! 5. The failure memory: the same (token id, secret) that failed moments ago is refused
//!    without hashing. Wrong secrets are remembered by what was tried, never held against the
//!    token id, so a flood of wrong secrets on an id cannot lock out its right one.
//! 6. The hashing budget (`budget`), charged to the token's org: a never-seen secret is hashed
//!    only while few enough are pending (one id at most half of them, one org at most its
//!    share while others ask) and the failure memory has room; else it is refused as busy, a
//!    retryable fault (503 at the gateway), never as invalid. A refusal earned by the org's
//!    own pending secrets says so ([`VerifyError::ShareSpent`]), so that the gateway can count
//!    it against the client's address like a rejection.
//! 7. Argon2id on the bounded blocking pool, once for all concurrent callers presenting the
//!    same secret (single-flight, in `flight`), in turns fair between orgs. The run is a task
//!    of its own: its verdict is recorded on the blocking thread right after the hash, and its
//!    budget place is held until then, even when every caller has given up waiting.

use std::future::Future;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use svc_core::permissions::Permissions;
use uuid::Uuid;

use crate::pat::{Pat, PatError};
use crate::store::{Agent, Store, StoreError, TokenLimits};

mod budget;
mod fair;
mod flight;
pub mod hasher;
mod lane;
mod memory;
mod owners;
mod pacer;

use budget::{Bounds, Budget};
use flight::{Boarding, Decision, Flights};
pub use hasher::{Argon2Params, HashError, Hasher};
use lane::ColdLane;
pub use memory::FailureLimits;
use memory::{Digest, Digester, Failures, Recall, Successes};
pub use pacer::DEFAULT_COLD_RATE;

/// Default number of remembered successes (one per token).
pub const DEFAULT_SUCCESS_CAPACITY: usize = 100_000;

/// The identity a valid token carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidToken {
    /// The token's id.
    pub token_id: Uuid,
    /// Its org: authoritative for every tenant decision.
    pub org_id: Uuid,
    /// Its permission bitmap.
    pub permissions: Permissions,
    /// The user it was issued to.
    pub user_id: Option<Uuid>,
    /// The agent it is bound to.
    pub agent_id: Option<Uuid>,
    /// When it expires, if ever.
    pub expires_at: Option<DateTime<Utc>>,
    /// Its own rate limits.
    pub limits: TokenLimits,
    /// The money budgets a call with it draws on.
    pub budgets: Vec<crate::store::Budget>,
}

/// Why a bearer value was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// Not a well-formed PAT (shape or checksum).
    #[error("malformed token: {0}")]
    Malformed(#[from] PatError),
    /// No token has this id.
    #[error("unknown token")]
    Unknown,
    /// The token was revoked.
    #[error("revoked token")]
    Revoked,
    /// The token's expiry has passed.
    #[error("expired token")]
    Expired,
    /// The secret does not match.
    #[error("wrong secret")]
    WrongSecret,
    /// The hashing budget is spent: the secret could not be checked now. A fault (the token
    /// may well be valid), so the caller answers a retryable error, never "invalid".
    #[error("too many secrets being verified")]
    Busy,
    /// Busy, and the token's own org holds its whole share of the cold lane with secrets not
    /// yet checked: retryable like `Busy`, but earned by the org's own traffic (in a flood,
    /// wrong secrets on its own token ids).
    #[error("the org's share of secrets being verified is spent")]
    ShareSpent,
    /// The store failed: the caller must fail closed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Hashing failed: the caller must fail closed.
    #[error(transparent)]
    Hash(#[from] HashError),
}

/// Why a cold check was not made now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The lane or the budget is full, and not because of the caller's org.
    Busy,
    /// The caller's org holds its share already.
    OwnShare,
}

impl From<Refusal> for VerifyError {
    fn from(refusal: Refusal) -> VerifyError {
        match refusal {
            Refusal::Busy => VerifyError::Busy,
            Refusal::OwnShare => VerifyError::ShareSpent,
        }
    }
}

impl VerifyError {
    /// True when the token was rejected (Unauthenticated), false for server faults.
    pub fn is_rejection(&self) -> bool {
        !matches!(
            self,
            VerifyError::Store(_)
                | VerifyError::Hash(_)
                | VerifyError::Busy
                | VerifyError::ShareSpent
        )
    }

    /// A fixed word for logs: never the token.
    pub fn reason(&self) -> &'static str {
        match self {
            VerifyError::Malformed(_) => "malformed",
            VerifyError::Unknown => "unknown",
            VerifyError::Revoked => "revoked",
            VerifyError::Expired => "expired",
            VerifyError::WrongSecret => "wrong_secret",
            VerifyError::Busy => "busy",
            VerifyError::ShareSpent => "share_spent",
            VerifyError::Store(_) => "store_error",
            VerifyError::Hash(_) => "hash_error",
        }
    }
}

/// Verifies bearer PATs against a [`Store`]; share it behind an `Arc`.
pub struct Verifier<S> {
    store: S,
    hasher: Hasher,
    digester: Digester,
    successes: Arc<Successes>,
    failures: Arc<Failures>,
    budget: Arc<Budget>,
    flights: Arc<Flights<Outcome>>,
    cold: Arc<ColdLane>,
}

/// What checking one secret decided; every caller of one flight gets the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Valid,
    WrongSecret,
    Refused(Refusal),
}

type Outcome = Result<Verdict, HashError>;

impl<S> std::fmt::Debug for Verifier<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("hasher", &self.hasher)
            .finish_non_exhaustive()
    }
}

impl<S: Store> Verifier<S> {
    /// A verifier with default cache sizes and failure limits.
    pub fn new(store: S, hasher: Hasher) -> Arc<Verifier<S>> {
        Verifier::with_limits(
            store,
            hasher,
            DEFAULT_SUCCESS_CAPACITY,
            FailureLimits::default(),
        )
    }

    /// A verifier remembering at most `success_capacity` successes, limiting failures by
    /// `failure_limits`.
    pub fn with_limits(
        store: S,
        hasher: Hasher,
        success_capacity: usize,
        failure_limits: FailureLimits,
    ) -> Arc<Verifier<S>> {
        Arc::new(Verifier {
            store,
            digester: Digester::new(),
            successes: Arc::new(Successes::new(success_capacity)),
            failures: Failures::new(failure_limits),
            budget: Budget::new(Bounds {
                max_pending: failure_limits.max_pending,
                per_id: failure_limits.max_pending_per_id(),
                hashing: hasher.concurrency(),
            }),
            flights: Flights::new(Err(HashError::Pool)),
            cold: ColdLane::new(failure_limits.cold_rate, success_capacity),
            hasher,
        })
    }

    /// The hasher (shared with token creation).
    pub fn hasher(&self) -> &Hasher {
        &self.hasher
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Verifies a full bearer value, `svc_pat_<uuid>_<secret>`.
    pub async fn verify(&self, bearer: &str) -> Result<ValidToken, VerifyError> {
        self.verify_with_agent(bearer, None)
            .await
            .map(|(token, _)| token)
    }

    /// Verifies a bearer value and, when asked, looks `agent` up in the token's org in the
    /// same read. The agent is only answered for a token that verified.
    pub async fn verify_with_agent(
        &self,
        bearer: &str,
        agent: Option<Uuid>,
    ) -> Result<(ValidToken, Option<Option<Agent>>), VerifyError> {
        let pat = Pat::parse(bearer)?;
        let token_id = pat.token_id();
        let digest = self.digester.digest(token_id, pat.secret());
        let warm = self.successes.contains(token_id, &digest);
        // Held to the end of the call: while it lasts, calls with the same secret ride along.
        let _cold = match warm {
            true => None,
            false => Some(self.cold.enter(token_id, digest).await?),
        };
        let (record, agent) = match agent {
            None => (self.store.token_for_validation(token_id).await?, None),
            Some(agent_id) => match self.store.token_with_agent(token_id, agent_id).await? {
                Some((record, agent)) => (Some(record), Some(agent)),
                None => (None, None),
            },
        };
        let record = record.ok_or(VerifyError::Unknown)?;
        if !warm {
            self.cold.learn(token_id, record.org_id);
        }
        if record.revoked_at.is_some() {
            return Err(VerifyError::Revoked);
        }
        if record.expires_at.is_some_and(|at| at <= Utc::now()) {
            return Err(VerifyError::Expired);
        }

        if !warm {
            let boarding = self.flights.board(digest, || {
                self.decide(
                    (token_id, record.org_id),
                    digest,
                    &record.secret_hash,
                    pat.secret(),
                )
            });
            let verdict = match boarding {
                Boarding::Now(outcome) => outcome?,
                Boarding::Flight(flight) => flight.await?,
            };
            match verdict {
                Verdict::Valid => {}
                Verdict::WrongSecret => return Err(VerifyError::WrongSecret),
                Verdict::Refused(refusal) => return Err(refusal.into()),
            }
        }

        let token = ValidToken {
            token_id,
            org_id: record.org_id,
            permissions: record.permissions,
            user_id: record.user_id,
            agent_id: record.agent_id,
            expires_at: record.expires_at,
            limits: record.limits,
            budgets: record.budgets,
        };
        Ok((token, agent))
    }

    /// Decides a secret that was not a remembered success, under the flights' lock: at once
    /// from memory or the budget, or as a run to start.
    ///
    /// Memory is read again first: a flight for this digest may have landed, and left the
    /// table, between the caller's cache check and its boarding. The run records its verdict
    /// on the blocking thread before its flight lands, so a caller arriving after it finds the
    /// answer in memory.
    fn decide(
        &self,
        (token_id, org_id): (Uuid, Uuid),
        digest: Digest,
        stored_hash: &str,
        secret: &str,
    ) -> Decision<Outcome, impl Future<Output = Outcome> + Send + 'static> {
        if self.successes.contains(token_id, &digest) {
            return Decision::Now(Ok(Verdict::Valid));
        }
        // Admissions are made here only, under the flights' lock, so the pending count read
        // for the memory's room can only fall before the ticket is taken.
        match self.failures.recall(&digest, self.budget.pending()) {
            Recall::Unknown => {}
            Recall::KnownWrong => return Decision::Now(Ok(Verdict::WrongSecret)),
            Recall::Full => return Decision::Now(Ok(Verdict::Refused(Refusal::Busy))),
        }
        let mut ticket = match self.budget.admit(token_id, org_id) {
            Ok(ticket) => ticket,
            Err(refusal) => return Decision::Now(Ok(Verdict::Refused(refusal))),
        };
        let (hasher, successes, failures) = (
            self.hasher.clone(),
            Arc::clone(&self.successes),
            Arc::clone(&self.failures),
        );
        let (stored_hash, secret) = (stored_hash.to_owned(), secret.to_owned());
        Decision::Run(async move {
            if let Err(refusal) = ticket.turn().await {
                return Ok(Verdict::Refused(refusal));
            }
            let record = move |matched: bool| {
                if matched {
                    successes.insert(token_id, digest);
                } else {
                    failures.record(digest);
                }
                // The budget place is given back only once the verdict is in memory.
                drop(ticket);
                if matched {
                    Verdict::Valid
                } else {
                    Verdict::WrongSecret
                }
            };
            hasher.verify_then(&stored_hash, &secret, record).await
        })
    }
}
