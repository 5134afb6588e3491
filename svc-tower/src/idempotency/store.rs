use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use uuid::Uuid;

use super::fingerprint::Fingerprint;
use crate::store::StoreFuture;

/// Proof of a claim: only its holder may commit or release the key.
///
/// Carries the request's fingerprint, so the committed record keeps it.
#[derive(Clone, PartialEq, Eq)]
pub struct ClaimToken {
    id: Uuid,
    fingerprint: Fingerprint,
}

impl ClaimToken {
    /// A fresh, random token for a request with `fingerprint`.
    pub fn new(fingerprint: Fingerprint) -> ClaimToken {
        ClaimToken {
            id: Uuid::new_v4(),
            fingerprint,
        }
    }

    /// The token's random id.
    pub fn id(&self) -> Uuid {
        self.id
    }

    /// The fingerprint of the request that claimed the key.
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }
}

impl fmt::Debug for ClaimToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClaimToken").field("id", &self.id).finish()
    }
}

/// A response stored for replay: its status, the headers a replay needs, and the body bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// The status the inner service answered.
    pub status: StatusCode,
    /// The stored subset of its headers (`Content-Type` and `Content-Encoding`).
    pub headers: HeaderMap,
    /// The body, byte for byte.
    pub body: Bytes,
}

/// What a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The key was free and is now pending under this token: call the inner service.
    Claimed(ClaimToken),
    /// The same request holds the key and is still running.
    InProgress,
    /// The same request completed; here is its response.
    Committed(StoredResponse),
    /// The key holds a different request (pending or committed).
    Mismatch,
}

/// Where idempotency records live, scoped per org and client key.
///
/// A key moves from free to pending ([`claim`](Self::claim)), then to committed
/// ([`commit`](Self::commit)) or back to free ([`release`](Self::release)); a pending claim
/// expires after its pending TTL, a committed record after its TTL. Commit and release are
/// compare-and-set on the claim's token: a claim that expired and was taken over is never
/// overwritten by its former holder.
pub trait IdempotencyStore: Send + Sync + 'static {
    /// Claims `key` for a request with `fingerprint`, or reports who holds it.
    fn claim(
        &self,
        org_id: Uuid,
        key: &str,
        fingerprint: Fingerprint,
        pending_ttl: Duration,
    ) -> StoreFuture<Claim>;

    /// Stores `response` for `ttl` if `token` still holds the claim; returns whether it did.
    fn commit(
        &self,
        org_id: Uuid,
        key: &str,
        token: &ClaimToken,
        response: StoredResponse,
        ttl: Duration,
    ) -> StoreFuture<bool>;

    /// Frees `key` if `token` still holds the claim; returns whether it did.
    fn release(&self, org_id: Uuid, key: &str, token: &ClaimToken) -> StoreFuture<bool>;
}

impl<S: IdempotencyStore + ?Sized> IdempotencyStore for Arc<S> {
    fn claim(
        &self,
        org_id: Uuid,
        key: &str,
        fingerprint: Fingerprint,
        pending_ttl: Duration,
    ) -> StoreFuture<Claim> {
        (**self).claim(org_id, key, fingerprint, pending_ttl)
    }

    fn commit(
        &self,
        org_id: Uuid,
        key: &str,
        token: &ClaimToken,
        response: StoredResponse,
        ttl: Duration,
    ) -> StoreFuture<bool> {
        (**self).commit(org_id, key, token, response, ttl)
    }

    fn release(&self, org_id: Uuid, key: &str, token: &ClaimToken) -> StoreFuture<bool> {
        (**self).release(org_id, key, token)
    }
}
