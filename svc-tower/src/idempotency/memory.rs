use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use super::fingerprint::Fingerprint;
use super::store::{Claim, ClaimToken, IdempotencyStore, StoredResponse};
use crate::store::{StoreError, StoreFuture};

/// Default most records held at once.
pub(crate) const DEFAULT_MEMORY_MAX_ENTRIES: usize = 10_000;
/// Default most bytes of keys, headers and bodies held at once (64 MiB).
pub(crate) const DEFAULT_MEMORY_MAX_BYTES: usize = 64 << 20;

/// A single-process idempotency store with TTL expiry: the right choice for one replica,
/// wrong for several (each would run the same request once).
///
/// Bounded: at most [`max_entries`](Self::max_entries) records and
/// [`max_bytes`](Self::max_bytes) of keys, headers and bodies (defaults
/// 10,000 records and 64 MiB). A claim or commit that would pass a bound
/// first evicts the oldest records (by claim time), expired or not; a response larger than
/// the byte bound on its own is not stored, so its key is freed for a retry. Eviction trades a
/// possible second provider call for a process that cannot run out of memory.
///
/// Reads [`tokio::time::Instant`], so tests can drive its TTLs with paused time.
#[derive(Debug, Clone)]
pub struct MemoryIdempotencyStore {
    inner: Arc<Mutex<State>>,
}

impl Default for MemoryIdempotencyStore {
    fn default() -> Self {
        MemoryIdempotencyStore::new()
    }
}

type Key = (Uuid, String);

#[derive(Debug)]
struct State {
    records: HashMap<Key, Record>,
    /// Claim order: the sequence number of each record's claim, oldest first.
    order: BTreeMap<u64, Key>,
    next_seq: u64,
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
    prune_at: usize,
}

#[derive(Debug)]
struct Record {
    seq: u64,
    bytes: usize,
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
/// What a record costs beyond its key and response bytes: the map slots, the order entry,
/// the fingerprint and the token. An estimate; it keeps many tiny records from escaping the
/// byte bound.
const RECORD_OVERHEAD: usize = 160;

fn key_bytes(key: &Key) -> usize {
    RECORD_OVERHEAD + 2 * key.1.len()
}

fn response_bytes(response: &StoredResponse) -> usize {
    let headers: usize = response
        .headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    headers + response.body.len()
}

impl MemoryIdempotencyStore {
    /// An empty store with the default bounds.
    pub fn new() -> MemoryIdempotencyStore {
        MemoryIdempotencyStore {
            inner: Arc::new(Mutex::new(State {
                records: HashMap::new(),
                order: BTreeMap::new(),
                next_seq: 0,
                bytes: 0,
                max_entries: DEFAULT_MEMORY_MAX_ENTRIES,
                max_bytes: DEFAULT_MEMORY_MAX_BYTES,
                prune_at: MIN_PRUNE_AT,
            })),
        }
    }

    /// Holds at most `max` records (at least one).
    pub fn max_entries(self, max: usize) -> MemoryIdempotencyStore {
        if let Ok(mut state) = self.inner.lock() {
            state.max_entries = max.max(1);
        }
        self
    }

    /// Holds at most `max` bytes of keys, stored headers and bodies.
    pub fn max_bytes(self, max: usize) -> MemoryIdempotencyStore {
        if let Ok(mut state) = self.inner.lock() {
            state.max_bytes = max;
        }
        self
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
            let expired: Vec<Key> = state
                .records
                .iter()
                .filter(|(_, record)| record.expires_at <= now)
                .map(|(key, _)| key.clone())
                .collect();
            for key in expired {
                state.remove(&key);
            }
            state.prune_at = state.records.len() * 2;
        }
        Ok(f(&mut state, now))
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.inner.lock().map(|s| s.records.len()).unwrap_or(0)
    }

    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.inner.lock().map(|s| s.bytes).unwrap_or(0)
    }
}

impl State {
    fn remove(&mut self, key: &Key) -> Option<Record> {
        let record = self.records.remove(key)?;
        self.order.remove(&record.seq);
        self.bytes -= record.bytes;
        Some(record)
    }

    fn live(&mut self, key: &Key, now: Instant) -> Option<&mut Record> {
        if self.records.get(key).is_some_and(|r| r.expires_at <= now) {
            self.remove(key);
        }
        self.records.get_mut(key)
    }

    /// Evicts the oldest records until `entries` more records and `bytes` more bytes fit,
    /// never `keep`. False when they cannot fit even then.
    fn make_room(&mut self, entries: usize, bytes: usize, keep: Option<u64>) -> bool {
        // What can never fit evicts nothing.
        if bytes > self.max_bytes {
            return false;
        }
        loop {
            let fits = self.records.len() + entries <= self.max_entries
                && self.bytes + bytes <= self.max_bytes;
            if fits {
                return true;
            }
            let oldest = self
                .order
                .iter()
                .find(|(seq, _)| Some(**seq) != keep)
                .map(|(_, key)| key.clone());
            match oldest {
                Some(key) => {
                    self.remove(&key);
                }
                None => return false,
            }
        }
    }

    fn insert_pending(&mut self, key: Key, token: ClaimToken, expires_at: Instant) -> bool {
        let bytes = key_bytes(&key);
        if !self.make_room(1, bytes, None) {
            return false;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.order.insert(seq, key.clone());
        self.bytes += bytes;
        let entry = Entry::Pending(token);
        let record = Record {
            seq,
            bytes,
            expires_at,
            entry,
        };
        self.records.insert(key, record);
        true
    }

    /// Replaces the pending record of `key` with `response`, or frees the key when the
    /// response cannot fit.
    fn commit(&mut self, key: &Key, token: &ClaimToken, response: StoredResponse, at: Instant) {
        let Some(record) = self.records.get(key) else {
            return;
        };
        let (seq, old) = (record.seq, record.bytes);
        let new = key_bytes(key) + response_bytes(&response);
        self.bytes -= old;
        if !self.make_room(0, new, Some(seq)) {
            self.bytes += old;
            self.remove(key);
            return;
        }
        self.bytes += new;
        if let Some(record) = self.records.get_mut(key) {
            record.bytes = new;
            record.expires_at = at;
            record.entry = Entry::Committed {
                fingerprint: token.fingerprint(),
                response,
            };
        }
    }
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
        let result = self.with_state(|state, now| match state.live(&id, now) {
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
                // A key too long for the byte bound is claimed without a record: the request
                // runs, without deduplication, as when the store is down.
                state.insert_pending(id, token.clone(), now + pending_ttl);
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
        let result = self.with_state(|state, now| match state.live(&id, now) {
            Some(record) if matches!(&record.entry, Entry::Pending(held) if held == token) => {
                state.commit(&id, token, response, now + ttl);
                state.records.contains_key(&id)
            }
            _ => false,
        });
        Box::pin(std::future::ready(result))
    }

    fn release(&self, org_id: Uuid, key: &str, token: &ClaimToken) -> StoreFuture<bool> {
        let id = (org_id, key.to_owned());
        let result = self.with_state(|state, now| match state.live(&id, now) {
            Some(Record {
                entry: Entry::Pending(held),
                ..
            }) if held == token => {
                state.remove(&id);
                true
            }
            _ => false,
        });
        Box::pin(std::future::ready(result))
    }
}

#[cfg(test)]
mod tests;
