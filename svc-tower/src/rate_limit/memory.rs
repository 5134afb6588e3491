use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::time::Instant;
use uuid::Uuid;

use super::store::{Decision, Gcra, RateLimitStore};
use crate::store::{StoreError, StoreFuture};

/// A single-process rate-limit store: the right choice for one replica, wrong for several
/// (each would grant the full limit).
///
/// Reads [`tokio::time::Instant`], so tests can drive its windows with paused time.
#[derive(Debug, Clone)]
pub struct MemoryRateLimitStore {
    inner: Arc<Mutex<State>>,
}

#[derive(Debug)]
struct State {
    epoch: Instant,
    tats: HashMap<Uuid, u64>,
    prune_at: usize,
}

const MIN_PRUNE_AT: usize = 1024;

impl Default for MemoryRateLimitStore {
    fn default() -> Self {
        MemoryRateLimitStore::new()
    }
}

impl MemoryRateLimitStore {
    /// An empty store.
    pub fn new() -> MemoryRateLimitStore {
        MemoryRateLimitStore {
            inner: Arc::new(Mutex::new(State {
                epoch: Instant::now(),
                tats: HashMap::new(),
                prune_at: MIN_PRUNE_AT,
            })),
        }
    }

    fn decide(&self, org_id: Uuid, limit: u32) -> Result<Decision, StoreError> {
        let mut state = self
            .inner
            .lock()
            .map_err(|_| StoreError::new("rate-limit state poisoned"))?;
        let now = u64::try_from(state.epoch.elapsed().as_micros()).unwrap_or(u64::MAX);
        let (tat, decision) = Gcra::new(limit).decide(state.tats.get(&org_id).copied(), now);
        if let Some(tat) = tat {
            state.tats.insert(org_id, tat);
        }
        // An org whose TAT has passed is indistinguishable from an unknown one: forget it,
        // now and then, so the map tracks active orgs only.
        if state.tats.len() >= state.prune_at {
            state.tats.retain(|_, tat| *tat > now);
            state.prune_at = (state.tats.len() * 2).max(MIN_PRUNE_AT);
        }
        Ok(decision)
    }

    fn give_back(&self, key: Uuid, limit: u32) -> Result<(), StoreError> {
        let mut state = self
            .inner
            .lock()
            .map_err(|_| StoreError::new("rate-limit state poisoned"))?;
        let now = u64::try_from(state.epoch.elapsed().as_micros()).unwrap_or(u64::MAX);
        if let Some(tat) = state.tats.get(&key).copied() {
            match Gcra::new(limit).give_back(tat, now) {
                Some(tat) => state.tats.insert(key, tat),
                None => state.tats.remove(&key),
            };
        }
        Ok(())
    }

    #[cfg(test)]
    pub(crate) fn tracked_orgs(&self) -> usize {
        self.inner.lock().map(|s| s.tats.len()).unwrap_or(0)
    }
}

impl RateLimitStore for MemoryRateLimitStore {
    fn check(&self, org_id: Uuid, limit: u32) -> StoreFuture<Decision> {
        Box::pin(std::future::ready(self.decide(org_id, limit)))
    }

    /// Token ids and org ids are both random UUIDs: one map holds both kinds of allowance.
    fn check_token(&self, _org_id: Uuid, token_id: Uuid, limit: u32) -> StoreFuture<Decision> {
        Box::pin(std::future::ready(self.decide(token_id, limit)))
    }

    fn refunds(&self) -> bool {
        true
    }

    fn refund(&self, org_id: Uuid, limit: u32) -> StoreFuture<()> {
        Box::pin(std::future::ready(self.give_back(org_id, limit)))
    }

    fn refund_token(&self, _org_id: Uuid, token_id: Uuid, limit: u32) -> StoreFuture<()> {
        Box::pin(std::future::ready(self.give_back(token_id, limit)))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_allowance_refills_with_time() {
        let store = MemoryRateLimitStore::new();
        let org = Uuid::new_v4();
        for _ in 0..3 {
            assert!(store.check(org, 3).await.unwrap().allowed);
        }
        let refused = store.check(org, 3).await.unwrap();
        assert!(!refused.allowed);
        assert_eq!(refused.retry_after_secs, 20);
        tokio::time::advance(Duration::from_secs(20)).await;
        assert!(store.check(org, 3).await.unwrap().allowed);
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(store.check(org, 3).await.unwrap().remaining, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn idle_orgs_are_forgotten() {
        let store = MemoryRateLimitStore::new();
        for _ in 0..MIN_PRUNE_AT - 1 {
            store.check(Uuid::new_v4(), 10).await.unwrap();
        }
        tokio::time::advance(Duration::from_secs(61)).await;
        store.check(Uuid::new_v4(), 10).await.unwrap();
        assert_eq!(store.tracked_orgs(), 1);
    }
}
