//! The cold lane's pace: validations of secrets this process has not seen succeed start at
//! most `rate` a second, first come first served.
//!
//! The pace is per secret tried, not per call: a call presenting the same (token id, secret)
//! as a cold call still under way goes along with it without a turn, so a burst of first uses
//! of one token (every client of a gateway after a restart) takes one turn, not one each. A
//! repeated wrong secret rides only until its verdict is in, after which the failure memory
//! answers it and it is paced again.
//!
//! A flood of forged or wrong tokens is all cold, while a token in use is warm after its first
//! success. Pacing the cold lane, not counting per id or per address, bounds what a flood can
//! cost in database reads and CPU whatever ids it cycles through, and leaves the rest of the
//! machine to the warm lane, which is never paced. A caller waits its turn, briefly: a flood
//! from a few connections is slowed to the pace instead of spinning on refusals, and a real
//! token's first use queues behind at most `max_wait` of the flood. Whoever would wait longer
//! is refused at once as busy, a retryable fault.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::memory::Digest;

/// Default cold validations started per second.
pub const DEFAULT_COLD_RATE: u32 = 1000;

/// Default longest wait for a turn; half the gateway's default ValidateToken deadline.
pub(crate) const MAX_WAIT: Duration = Duration::from_millis(25);

/// Turns handed out at a fixed interval (a leaky bucket with no burst beyond `max_wait`).
#[derive(Debug)]
pub(crate) struct Pacer {
    interval: Duration,
    max_wait: Duration,
    next: Mutex<Option<Instant>>,
}

impl Pacer {
    pub(crate) fn new(per_second: u32, max_wait: Duration) -> Pacer {
        Pacer {
            interval: Duration::from_secs(1) / per_second.max(1),
            max_wait,
            next: Mutex::new(None),
        }
    }

    /// How long the caller arriving at `now` waits for its turn, or `None` when its turn is
    /// further off than `max_wait` (it then takes none).
    fn reserve(&self, now: Instant) -> Option<Duration> {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        let turn = next.map_or(now, |at| at.max(now));
        let wait = turn - now;
        if wait > self.max_wait {
            return None;
        }
        *next = Some(turn + self.interval);
        Some(wait)
    }

    /// Waits for a turn; false when the queue is too long to join.
    pub(crate) async fn turn(&self) -> bool {
        match self.reserve(Instant::now()) {
            None => false,
            Some(wait) if wait.is_zero() => true,
            Some(wait) => {
                tokio::time::sleep(wait).await;
                true
            }
        }
    }
}

/// The pacer, and the secrets under way in the cold lane with how many calls present each.
#[derive(Debug)]
pub(crate) struct ColdLane {
    pacer: Pacer,
    under_way: Mutex<HashMap<Digest, usize>>,
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
    pub(crate) fn new(per_second: u32) -> Arc<ColdLane> {
        Arc::new(ColdLane {
            pacer: Pacer::new(per_second, MAX_WAIT),
            under_way: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Digest, usize>> {
        self.under_way.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Enters the lane with `digest`: at once when a call with the same digest is under way,
    /// else after a turn. `None` when no turn is to be had (the caller answers busy).
    pub(crate) async fn enter(self: &Arc<Self>, digest: Digest) -> Option<Entry> {
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
        if first && !self.pacer.turn().await {
            return None;
        }
        Some(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_are_spaced_by_the_rate_and_the_queue_is_bounded() {
        let pacer = Pacer::new(100, Duration::from_millis(25));
        let now = Instant::now();
        let waits: Vec<_> = (0..4).map(|_| pacer.reserve(now)).collect();
        assert_eq!(
            waits,
            [0, 10, 20]
                .into_iter()
                .map(|ms| Some(Duration::from_millis(ms)))
                .chain([None])
                .collect::<Vec<_>>()
        );
        // A refused caller took no turn; once time passes, turns start again.
        assert_eq!(
            pacer.reserve(now + Duration::from_millis(10)),
            Some(Duration::from_millis(20))
        );
        assert_eq!(
            pacer.reserve(now + Duration::from_secs(1)),
            Some(Duration::ZERO)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn calls_with_a_secret_under_way_ride_along_and_others_queue() {
        let lane = ColdLane::new(1);
        let first = lane.enter([1; 32]).await.expect("the first turn is free");
        // The same secret rides along while the first is under way, however full the queue.
        let rider = lane.enter([1; 32]).await.expect("rides along");
        // Another secret finds the next turn a second away: refused.
        assert!(lane.enter([2; 32]).await.is_none());
        assert_eq!(lane.lock().get(&[1; 32]), Some(&2));
        assert!(!lane.lock().contains_key(&[2; 32]));
        drop((first, rider));
        assert!(lane.lock().is_empty());
        // Once the secret is no longer under way, it needs a turn again.
        assert!(lane.enter([1; 32]).await.is_none());
    }
}
