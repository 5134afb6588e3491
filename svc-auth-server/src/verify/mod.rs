//! Token verification: the ValidateToken path, and the admin check of the management calls.
//!
//! In order, cheapest first:
//!
//! 1. [`Pat::parse`]: shape and checksum, no I/O. Garbage stops here.
//! 2. The token row, read on every call through the store's one RLS-exempt lookup. An unknown
//!    id stops here, before any hashing; a revoked or expired token stops here too. Reading
//!    the row every time is what makes revocation immediate across replicas and makes a down
//!    database fail closed: no cache can answer in its place.
//! 3. The remembered success digest for this token: the warm path.
//! 4. The failure memory: a secret that failed moments ago, or a token id that failed too
//!    often this window, is refused without hashing.
//! 5. Argon2id on the bounded blocking pool, once for all concurrent callers presenting the
//!    same secret (single-flight, in `flight`). A success is remembered; a failure is counted.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use svc_tower::context::Permissions;
use uuid::Uuid;

use crate::pat::{Pat, PatError};
use crate::store::{Store, StoreError};

mod flight;
pub mod hasher;
mod memory;

use flight::Flights;
pub use hasher::{Argon2Params, HashError, Hasher};
pub use memory::FailureLimits;
use memory::{Admission, Digest, Digester, Failures, Successes};

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
    /// Too many wrong secrets for this token id lately.
    #[error("too many failed attempts for this token")]
    Throttled,
    /// The store failed: the caller must fail closed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Hashing failed: the caller must fail closed.
    #[error(transparent)]
    Hash(#[from] HashError),
}

impl VerifyError {
    /// True when the token was rejected (Unauthenticated), false for server faults.
    pub fn is_rejection(&self) -> bool {
        !matches!(self, VerifyError::Store(_) | VerifyError::Hash(_))
    }

    /// A fixed word for logs: never the token.
    pub fn reason(&self) -> &'static str {
        match self {
            VerifyError::Malformed(_) => "malformed",
            VerifyError::Unknown => "unknown",
            VerifyError::Revoked => "revoked",
            VerifyError::Expired => "expired",
            VerifyError::WrongSecret => "wrong_secret",
            VerifyError::Throttled => "throttled",
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
    successes: Successes,
    failures: Failures,
    flights: Flights<Verdict>,
}

/// What checking one secret decided; every caller of one flight gets the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Valid,
    WrongSecret,
    Throttled,
}

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
            hasher,
            digester: Digester::new(),
            successes: Successes::new(success_capacity),
            failures: Failures::new(failure_limits),
            flights: Flights::new(),
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
        let pat = Pat::parse(bearer)?;
        let token_id = pat.token_id();
        let record = self
            .store
            .token_for_validation(token_id)
            .await?
            .ok_or(VerifyError::Unknown)?;
        if record.revoked_at.is_some() {
            return Err(VerifyError::Revoked);
        }
        if record.expires_at.is_some_and(|at| at <= Utc::now()) {
            return Err(VerifyError::Expired);
        }

        let digest = self
            .digester
            .digest(token_id, &record.secret_hash, pat.secret());
        if !self.successes.contains(token_id, &digest) {
            let check = || self.check(token_id, digest, &record.secret_hash, pat.secret());
            match self.flights.run(digest, check).await? {
                Verdict::Valid => {}
                Verdict::WrongSecret => return Err(VerifyError::WrongSecret),
                Verdict::Throttled => return Err(VerifyError::Throttled),
            }
        }

        Ok(ValidToken {
            token_id,
            org_id: record.org_id,
            permissions: record.permissions,
            user_id: record.user_id,
            agent_id: record.agent_id,
            expires_at: record.expires_at,
        })
    }

    /// Decides a secret that was not a remembered success, for everyone on its flight.
    ///
    /// Memory is read again first: a flight for this digest may have landed, and left the
    /// table, between the caller's cache check and its boarding. The outcome is remembered
    /// before the flight lands, so a caller arriving after it finds the answer in memory.
    async fn check(
        &self,
        token_id: Uuid,
        digest: Digest,
        stored_hash: &str,
        secret: &str,
    ) -> Result<Verdict, HashError> {
        if self.successes.contains(token_id, &digest) {
            return Ok(Verdict::Valid);
        }
        // The attempt counts against the token id's failure budget until the verdict is in.
        let _attempt = match self.failures.admit(token_id, &digest) {
            Admission::Verify(attempt) => attempt,
            Admission::KnownWrong => return Ok(Verdict::WrongSecret),
            Admission::Throttled => return Ok(Verdict::Throttled),
        };
        if self.hasher.verify(stored_hash, secret).await? {
            self.successes.insert(token_id, digest);
            Ok(Verdict::Valid)
        } else {
            self.failures.record(token_id, digest);
            Ok(Verdict::WrongSecret)
        }
    }
}
