//! The cold lane: where a call whose secret this process has not seen succeed waits for a
//! turn of the pacer, charged to the org its token id names.
//!
//! The pace is per secret tried, not per call: a call presenting the same (token id, secret)
//! as a cold call still under way goes along with it without a turn, so a burst of first uses
//! of one token (every client of a gateway after a restart) takes one turn, not one each. A
//! repeated wrong secret rides only until its verdict is in, after which the failure memory
//! answers it and it is paced again.
//!
//! A token id names its org once its row has been read; the lane remembers it (`owners`) and
//! charges the id's next cold calls to that org. Calls already waiting as unread on an id just
//! read are charged to its org at once, so after a restart one org's flood on a few ids leaves
//! the unread class to everyone else after one read of each.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use uuid::Uuid;

use super::Refusal;
use super::memory::Digest;
use super::owners::Owners;
use super::pacer::{MAX_WAIT, Pacer};

/// The pacer, the orgs of the ids read, and the secrets under way with how many calls present
/// each.
pub(crate) struct ColdLane {
    pacer: Arc<Pacer>,
    owners: Owners,
    under_way: Mutex<HashMap<Digest, usize>>,
}

impl std::fmt::Debug for ColdLane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColdLane")
            .field("pacer", &self.pacer)
            .finish_non_exhaustive()
    }
}

/// A call's place in the cold lane, held until the call is decided or dropped.
#[derive(Debug)]
pub(crate) struct Entry {
    lane: Arc<ColdLane>,
    digest: Digest,
}

impl Drop for Entry {
    fn drop(&mut self) {
        let mut under_way = self.lane.lock();
        if let Some(calls) = under_way.get_mut(&self.digest) {
            *calls -= 1;
            if *calls == 0 {
                under_way.remove(&self.digest);
            }
        }
    }
}

impl ColdLane {
    /// A lane starting `per_second` cold calls a second, remembering the orgs of at most
    /// `ids` token ids.
    pub(crate) fn new(per_second: u32, ids: usize) -> Arc<ColdLane> {
        Arc::new(ColdLane {
            pacer: Pacer::new(per_second, MAX_WAIT),
            owners: Owners::new(ids),
            under_way: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Digest, usize>> {
        self.under_way.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Enters the lane with the digest of a secret for `token_id`: at once when a call with
    /// the same digest is under way, else after a turn.
    pub(crate) async fn enter(
        self: &Arc<Self>,
        token_id: Uuid,
        digest: Digest,
    ) -> Result<Entry, Refusal> {
        let first = {
            let mut under_way = self.lock();
            let calls = under_way.entry(digest).or_insert(0);
            *calls += 1;
            *calls == 1
        };
        // From here the entry counts, and is given back however this call ends.
        let entry = Entry {
            lane: Arc::clone(self),
            digest,
        };
        if first {
            let class = self.owners.class(token_id);
            self.pacer.turn(class, token_id).await?;
        }
        Ok(entry)
    }

    /// `token_id`'s row was read: it belongs to `org_id`.
    pub(crate) fn learn(&self, token_id: Uuid, org_id: Uuid) {
        if self.owners.learn(token_id, org_id) {
            self.pacer.reclassify(token_id, org_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;

    const ID: Uuid = Uuid::from_u128(1);

    #[tokio::test(start_paused = true)]
    async fn calls_with_a_secret_under_way_ride_along_and_others_queue() {
        let lane = ColdLane::new(1, 10);
        let first = lane
            .enter(ID, [1; 32])
            .await
            .expect("the first turn is free");
        // The same secret rides along while the first is under way, however full the queue.
        let rider = lane.enter(ID, [1; 32]).await.expect("rides along");
        assert_eq!(lane.lock().get(&[1; 32]), Some(&2));
        // Another secret would wait a second for the next turn: refused at once.
        let started = Instant::now();
        assert_eq!(lane.enter(ID, [2; 32]).await.err(), Some(Refusal::Busy));
        assert_eq!(started.elapsed(), Duration::ZERO);
        assert!(!lane.lock().contains_key(&[2; 32]));
        drop((first, rider));
        assert!(lane.lock().is_empty());
        // Once the secret is no longer under way, it needs a turn again.
        assert!(lane.enter(ID, [1; 32]).await.is_err());
    }
}
