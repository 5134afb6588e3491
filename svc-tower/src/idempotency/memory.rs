use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use super::fingerprint::Fingerprint;
use super::store::{Claim, ClaimToken, IdempotencyStore, StoredResponse};
use crate::store::{StoreError, StoreFuture};

/// A single-process idempotency store with TTL expiry: the right choice for one replica,
/// wrong for several (each would run the same request once).
///
/// Reads [`tokio::time::Instant`], so tests can drive its TTLs with paused time.
#[derive(Debug, Clone, Default)]
pub struct MemoryIdempotencyStore {
    inner: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    records: HashMap<(Uuid, String), Record>,
    prune_at: usize,
}

#[derive(Debug)]
struct Record {
    expires_at: Instant,
    entry: Entry,
}

#[derive(Debug)]
enum Entry {
    Pending(ClaimToken),
    Committed {
        fingerprint: Fingerprint,
        response: StoredResponse,
    },
}

const MIN_PRUNE_AT: usize = 1024;

impl MemoryIdempotencyStore {
    /// An empty store.
    pub fn new() -> MemoryIdempotencyStore {
        MemoryIdempotencyStore::default()
    }

    fn with_state<T>(&self, f: impl FnOnce(&mut State, Instant) -> T) -> Result<T, StoreError> {
        let mut state = self
            .inner
            .lock()
            .map_err(|_| StoreError::new("idempotency state poisoned"))?;
        let now = Instant::now();
        // Expired records are dropped lazily on access, and all at once now and then so the
        // map tracks live keys only.
        if state.records.len() >= state.prune_at.max(MIN_PRUNE_AT) {
            state.records.retain(|_, record| record.expires_at > now);
            state.prune_at = state.records.len() * 2;
        }
        Ok(f(&mut state, now))
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.inner.lock().map(|s| s.records.len()).unwrap_or(0)
    }
}

fn live<'a>(state: &'a mut State, id: &(Uuid, String), now: Instant) -> Option<&'a mut Record> {
    if state.records.get(id).is_some_and(|r| r.expires_at <= now) {
        state.records.remove(id);
    }
    state.records.get_mut(id)
}

impl IdempotencyStore for MemoryIdempotencyStore {
    fn claim(
        &self,
        org_id: Uuid,
        key: &str,
        fingerprint: Fingerprint,
        pending_ttl: Duration,
    ) -> StoreFuture<Claim> {
        let id = (org_id, key.to_owned());
        let result = self.with_state(|state, now| match live(state, &id, now) {
            Some(Record {
                entry: Entry::Pending(token),
                ..
            }) if token.fingerprint() == fingerprint => Claim::InProgress,
            Some(Record {
                entry:
                    Entry::Committed {
                        fingerprint: stored,
                        response,
                    },
                ..
            }) if *stored == fingerprint => Claim::Committed(response.clone()),
            Some(_) => Claim::Mismatch,
            None => {
                let token = ClaimToken::new(fingerprint);
                state.records.insert(
                    id,
                    Record {
                        expires_at: now + pending_ttl,
                        entry: Entry::Pending(token.clone()),
                    },
                );
                Claim::Claimed(token)
            }
        });
        Box::pin(std::future::ready(result))
    }

    fn commit(
        &self,
        org_id: Uuid,
        key: &str,
        token: &ClaimToken,
        response: StoredResponse,
        ttl: Duration,
    ) -> StoreFuture<bool> {
        let id = (org_id, key.to_owned());
        let result = self.with_state(|state, now| match live(state, &id, now) {
            Some(record) if matches!(&record.entry, Entry::Pending(held) if held == token) => {
                *record = Record {
                    expires_at: now + ttl,
                    entry: Entry::Committed {
                        fingerprint: token.fingerprint(),
                        response,
                    },
                };
                true
            }
            _ => false,
        });
        Box::pin(std::future::ready(result))
    }

    fn release(&self, org_id: Uuid, key: &str, token: &ClaimToken) -> StoreFuture<bool> {
        let id = (org_id, key.to_owned());
        let result = self.with_state(|state, now| match live(state, &id, now) {
            Some(Record {
                entry: Entry::Pending(held),
                ..
            }) if held == token => {
                state.records.remove(&id);
                true
            }
            _ => false,
        });
        Box::pin(std::future::ready(result))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn expired_records_are_pruned() {
        let store = MemoryIdempotencyStore::new();
        let fingerprint = Fingerprint::from_bytes([1; 32]);
        let org = Uuid::new_v4();
        for i in 0..MIN_PRUNE_AT {
            let claim = store.claim(org, &i.to_string(), fingerprint, Duration::from_secs(1));
            assert!(matches!(claim.await.unwrap(), Claim::Claimed(_)));
        }
        tokio::time::advance(Duration::from_secs(2)).await;
        store
            .claim(org, "last", fingerprint, Duration::from_secs(1))
            .await
            .unwrap();
        assert_eq!(store.len(), 1);
    }
}
