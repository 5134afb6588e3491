//! The cold lane's pace: validations of secrets this process has not seen succeed start at
//! most `rate` a second, in turns fair between orgs.
//!
//! Pacing the cold lane, not counting per id or per address, bounds what a flood of forged or
//! wrong tokens can cost in database reads and CPU whatever ids it cycles through, and leaves
//! the rest of the machine to the warm lane, which is never paced.
//!
//! Turns are not first come first served: a waiting call is charged to its [`Class`], the org
//! its token id was last read as (see `lane`), and turns go round the classes waiting
//! (`fair`). A class may keep waiting at most its share of the calls that fit in `max_wait`,
//! that many divided by the classes waiting, so one org flooding its own ids cannot fill the
//! queue: another org's call joins it and is served within a few turns. A caller waits
//! briefly: a flood is slowed to the pace instead of spinning on refusals, and a call whose
//! turn would come more than `max_wait` after it arrived takes none. Whoever is over its
//! class's share is refused at once, as busy: a retryable fault. A call pushed back by classes
//! that joined after it is refused the same way when the turn it can no longer take is due.
//!
//! Turns are given by when they were due, not by when the serving task got to run, so a busy
//! machine whose timers fire late costs no one their turn.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;
use uuid::Uuid;

use super::Refusal;
use super::fair::FairQueue;

/// Default cold validations started per second.
pub const DEFAULT_COLD_RATE: u32 = 1000;

/// Default longest wait for a turn; half the gateway's default ValidateToken deadline.
pub(crate) const MAX_WAIT: Duration = Duration::from_millis(25);

/// How long past its wait a caller waits for the serving task to run at all.
const STALLED: Duration = Duration::from_secs(1);

/// Whom a cold call is charged to before its token row is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Class {
    /// The org this process last read the token id as.
    Org(Uuid),
    /// A token id this process has not read (or has forgotten): forged ids, and first uses
    /// after a start. They share one class, so forged ids cannot crowd out the orgs.
    Unread,
}

/// Turns handed out at a fixed interval, fairly between classes.
#[derive(Debug)]
pub(crate) struct Pacer {
    interval: Duration,
    max_wait: Duration,
    state: Mutex<Turns>,
}

#[derive(Debug)]
struct Turns {
    /// When the next turn may be handed out.
    next: Option<Instant>,
    waiting: FairQueue<Class, Waiter>,
    /// A task is handing out turns to the waiting.
    serving: bool,
    /// Names waiters, so a leaving one can find itself.
    callers: u64,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    token_id: Uuid,
    arrived: Instant,
    /// True: a turn. False: none was due within `max_wait` of its arrival.
    turn: oneshot::Sender<bool>,
}

impl Turns {
    /// When the next turn is due for a caller arriving at `at`: an idle lane saves none up.
    fn due(&self, at: Instant) -> Instant {
        self.next.map_or(at, |next| next.max(at))
    }
}

impl Pacer {
    pub(crate) fn new(per_second: u32, max_wait: Duration) -> Arc<Pacer> {
        Arc::new(Pacer {
            interval: Duration::from_secs(1) / per_second.max(1),
            max_wait,
            state: Mutex::new(Turns {
                next: None,
                waiting: FairQueue::new(),
                serving: false,
                callers: 0,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Turns> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Calls that fit in `max_wait`, shared among the classes waiting, `class` included.
    fn share(&self, turns: &Turns, class: Class) -> usize {
        let slots = (self.max_wait.as_nanos() / self.interval.as_nanos().max(1)).max(1);
        let classes = turns.waiting.keys() + usize::from(turns.waiting.len_of(class) == 0);
        (usize::try_from(slots).unwrap_or(usize::MAX) / classes).max(1)
    }

    /// Waits for a turn for a call on `token_id`, charged to `class`.
    pub(crate) async fn turn(
        self: &Arc<Self>,
        class: Class,
        token_id: Uuid,
    ) -> Result<(), Refusal> {
        let (id, turn, deadline) = {
            let mut turns = self.lock();
            let now = Instant::now();
            if turns.waiting.is_empty() && turns.next.is_none_or(|next| next <= now) {
                turns.next = Some(now + self.interval);
                return Ok(());
            }
            // Only at a pace slower than one turn per `max_wait`.
            if turns.due(now) > now + self.max_wait {
                return Err(Refusal::Busy);
            }
            if turns.waiting.len_of(class) >= self.share(&turns, class) {
                return Err(match class {
                    Class::Org(_) => Refusal::OwnShare,
                    Class::Unread => Refusal::Busy,
                });
            }
            let (tx, rx) = oneshot::channel();
            let id = turns.callers;
            turns.callers += 1;
            let waiter = Waiter {
                id,
                token_id,
                arrived: now,
                turn: tx,
            };
            turns.waiting.push(class, waiter);
            if !turns.serving {
                turns.serving = true;
                tokio::spawn(Arc::clone(self).serve());
            }
            (id, rx, now + self.max_wait)
        };
        let mut place = Place {
            pacer: self,
            id,
            turn,
            waiting: true,
        };
        // The serving task decides by when each turn was due: the turns a late timer missed
        // are made up at once, as many as were waiting. This wait only bounds a serving task
        // that does not get to run at all.
        let answer = tokio::time::timeout_at(deadline + STALLED, &mut place.turn).await;
        place.waiting = false;
        match answer {
            Ok(Ok(true)) => Ok(()),
            Ok(Ok(false) | Err(_)) => Err(Refusal::Busy),
            Err(_) if place.leave() => Err(Refusal::Busy),
            // The turn came as the wait ran out.
            Err(_) => Ok(()),
        }
    }

    /// Charges the calls on `token_id` waiting as [`Class::Unread`] to `org_id`, its org
    /// just read: a flood on a few ids of one org leaves the unread class to the others
    /// after one read of each, not after its queued calls have had their turns.
    pub(crate) fn reclassify(&self, token_id: Uuid, org_id: Uuid) {
        let mut turns = self.lock();
        while let Some(waiter) = turns
            .waiting
            .remove(Class::Unread, |waiter| waiter.token_id == token_id)
        {
            turns.waiting.push(Class::Org(org_id), waiter);
        }
    }

    /// Hands out turns at the pace until no one waits.
    async fn serve(self: Arc<Self>) {
        loop {
            let (due, told) = {
                let mut turns = self.lock();
                let now = Instant::now();
                match turns.next {
                    Some(next) if next > now => (Some(next), None),
                    _ => match turns.waiting.pop() {
                        Some((_, waiter)) => {
                            let due = turns.due(waiter.arrived);
                            // Pushed back: no turn was due for it within its wait.
                            let turn = due <= waiter.arrived + self.max_wait;
                            if turn {
                                turns.next = Some(due + self.interval);
                            }
                            (None, Some((waiter, turn)))
                        }
                        None => {
                            turns.serving = false;
                            return;
                        }
                    },
                }
            };
            // Told with no lock held. A caller gone meanwhile wastes its turn: rare, since
            // leaving takes a caller out of the queue.
            if let Some((waiter, turn)) = told {
                let _ = waiter.turn.send(turn);
            }
            if let Some(due) = due {
                tokio::time::sleep_until(due).await;
            }
        }
    }
}

/// A caller's place in the queue, left when it stops waiting.
struct Place<'a> {
    pacer: &'a Pacer,
    id: u64,
    turn: oneshot::Receiver<bool>,
    /// Still in the queue, unless the serving task has just taken it out.
    waiting: bool,
}

impl Place<'_> {
    /// Leaves the queue; false when a turn was handed out first (it is then taken). The
    /// waiter is looked for under every class: it may have been charged to its org since.
    fn leave(&mut self) -> bool {
        let mut turns = self.pacer.lock();
        let id = self.id;
        let left = turns.waiting.remove_any(|waiter| waiter.id == id).is_some();
        left || self.turn.try_recv() != Ok(true)
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        // A caller gone while waiting (its deadline passed): rare, since no wait is longer
        // than `max_wait`.
        if self.waiting {
            self.leave();
        }
    }
}

#[cfg(test)]
mod tests;
