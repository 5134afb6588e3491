//! The hashing budget: how many checks of never-seen secrets may be pending (waiting for or
//! running Argon2) at once, who may hold them, and in what order they hash.
//!
//! The token row has been read by the time a check asks, so it is charged to its org. While
//! one org holds checks, it may hold the whole budget; once others ask, each org's share is
//! the budget over the orgs holding or asking. An org at its share is refused as
//! [`Refusal::OwnShare`], earned by its own secrets. An org under its share that finds the
//! budget full takes the place of the newest check still waiting of the org holding the most,
//! which is answered the same. Waiting checks hash in fair turns (`fair`): an org's first check
//! hashes next, not behind the thousand another org queued. So one org's wrong-secret flood
//! on its own token ids costs the others at most one Argon2 run of waiting.
//!
//! A check keeps its place until its verdict is recorded, whoever still waits for it: see
//! `flight`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;
use uuid::Uuid;

use super::Refusal;
use super::fair::FairQueue;

/// The bounds a check is admitted within.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// Checks pending at once, all orgs together.
    pub(crate) max_pending: usize,
    /// Checks pending at once for one token id.
    pub(crate) per_id: usize,
    /// Checks hashing at once: the hasher's threads.
    pub(crate) hashing: usize,
}

/// The pending checks; share it behind an `Arc`.
#[derive(Debug)]
pub(crate) struct Budget {
    bounds: Bounds,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Every check admitted and not yet done, by ticket.
    charges: HashMap<u64, Charge>,
    by_id: HashMap<Uuid, usize>,
    by_org: HashMap<Uuid, usize>,
    hashing: usize,
    /// Checks admitted but not hashing yet, by org.
    waiting: FairQueue<Uuid, Waiter>,
    tickets: u64,
}

#[derive(Debug)]
struct Charge {
    token_id: Uuid,
    org_id: Uuid,
    hashing: bool,
}

#[derive(Debug)]
struct Waiter {
    ticket: u64,
    /// True: hash now. False: the place went to another org's check.
    turn: oneshot::Sender<bool>,
}

/// A check admitted and not yet done. It holds its place until dropped, which the check does
/// only after recording its verdict.
#[derive(Debug)]
pub(crate) struct Ticket {
    budget: Arc<Budget>,
    id: u64,
    turn: Option<oneshot::Receiver<bool>>,
}

impl State {
    fn count(&mut self, token_id: Uuid, org_id: Uuid) {
        *self.by_id.entry(token_id).or_insert(0) += 1;
        *self.by_org.entry(org_id).or_insert(0) += 1;
    }

    fn uncount(&mut self, charge: &Charge) {
        for (map, key) in [
            (&mut self.by_id, charge.token_id),
            (&mut self.by_org, charge.org_id),
        ] {
            if let Some(count) = map.get_mut(&key) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    map.remove(&key);
                }
            }
        }
    }

    /// Gives the place of the newest waiting check of the org holding the most beyond `share`
    /// to another org's; `None` when no org holds more than its share in waiting checks. The
    /// check given up is to be told (after the lock is let go) that its org's share is spent.
    fn evict(&mut self, share: usize) -> Option<Waiter> {
        let victim = self
            .by_org
            .iter()
            .filter(|(org, held)| **held > share && self.waiting.len_of(**org) > 0)
            .max_by_key(|(_, held)| **held)
            .map(|(org, _)| *org)?;
        let waiter = self.waiting.pop_newest(victim)?;
        if let Some(charge) = self.charges.remove(&waiter.ticket) {
            self.uncount(&charge);
        }
        Some(waiter)
    }

    /// Hands the free hashing turns to the waiting, fairly; the checks started are to be told
    /// after the lock is let go.
    fn start_waiting(&mut self, hashing: usize) -> Vec<Waiter> {
        let mut started = Vec::new();
        while self.hashing < hashing {
            let Some((_, waiter)) = self.waiting.pop() else {
                break;
            };
            if let Some(charge) = self.charges.get_mut(&waiter.ticket) {
                charge.hashing = true;
                self.hashing += 1;
                started.push(waiter);
            }
        }
        started
    }
}

/// Tells waiting checks what became of them. Called with no lock held: a wake may run
/// another task's code, which may want the lock.
fn tell(waiters: impl IntoIterator<Item = Waiter>, hash: bool) {
    for waiter in waiters {
        let _ = waiter.turn.send(hash);
    }
}

impl Budget {
    pub(crate) fn new(bounds: Bounds) -> Arc<Budget> {
        Arc::new(Budget {
            bounds: Bounds {
                max_pending: bounds.max_pending.max(1),
                per_id: bounds.per_id.max(1),
                hashing: bounds.hashing.max(1),
            },
            state: Mutex::new(State::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits a check of `token_id`, of `org_id`, or says why not.
    pub(crate) fn admit(self: &Arc<Self>, token_id: Uuid, org_id: Uuid) -> Result<Ticket, Refusal> {
        let bounds = self.bounds;
        let mut state = self.lock();
        let orgs = state.by_org.len() + usize::from(!state.by_org.contains_key(&org_id));
        let share = (bounds.max_pending / orgs).max(1);
        let held = |map: &HashMap<Uuid, usize>, key| map.get(&key).copied().unwrap_or(0);
        if held(&state.by_org, org_id) >= share || held(&state.by_id, token_id) >= bounds.per_id {
            return Err(Refusal::OwnShare);
        }
        let evicted = match state.charges.len() >= bounds.max_pending {
            false => None,
            true => Some(state.evict(share).ok_or(Refusal::Busy)?),
        };
        let id = state.tickets;
        state.tickets += 1;
        state.charges.insert(
            id,
            Charge {
                token_id,
                org_id,
                hashing: false,
            },
        );
        state.count(token_id, org_id);
        // Queued even when a hashing turn is free, so that the fair queue counts the turn.
        let (tx, rx) = oneshot::channel();
        state.waiting.push(
            org_id,
            Waiter {
                ticket: id,
                turn: tx,
            },
        );
        let started = state.start_waiting(bounds.hashing);
        drop(state);
        tell(evicted, false);
        tell(started, true);
        Ok(Ticket {
            budget: Arc::clone(self),
            id,
            turn: Some(rx),
        })
    }

    /// Checks admitted and not yet done.
    pub(crate) fn pending(&self) -> usize {
        self.lock().charges.len()
    }
}

impl Ticket {
    /// Waits for this check's turn to hash; refused when its place went to another org.
    pub(crate) async fn turn(&mut self) -> Result<(), Refusal> {
        let Some(turn) = self.turn.take() else {
            return Ok(());
        };
        match turn.await {
            Ok(true) => Ok(()),
            Ok(false) => Err(Refusal::OwnShare),
            Err(_) => Err(Refusal::Busy),
        }
    }

    /// The turn if it has come, without waiting.
    #[cfg(test)]
    pub(crate) fn try_turn(&mut self) -> Option<Result<(), Refusal>> {
        use tokio::sync::oneshot::error::TryRecvError;
        let Some(turn) = self.turn.as_mut() else {
            return Some(Ok(()));
        };
        let answer = match turn.try_recv() {
            Ok(true) => Ok(()),
            Ok(false) => Err(Refusal::OwnShare),
            Err(TryRecvError::Empty) => return None,
            Err(TryRecvError::Closed) => Err(Refusal::Busy),
        };
        self.turn = None;
        Some(answer)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let budget = &self.budget;
        let mut state = budget.lock();
        let Some(charge) = state.charges.remove(&self.id) else {
            return;
        };
        state.uncount(&charge);
        if charge.hashing {
            state.hashing = state.hashing.saturating_sub(1);
        } else {
            let id = self.id;
            // Its own turn's sender; dropping it wakes no one else.
            state
                .waiting
                .remove(charge.org_id, |waiter| waiter.ticket == id);
        }
        let started = state.start_waiting(budget.bounds.hashing);
        drop(state);
        tell(started, true);
    }
}

#[cfg(test)]
mod tests;
