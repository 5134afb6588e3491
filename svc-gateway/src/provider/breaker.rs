//! A circuit breaker for one target of a model, shared by every org, that one org cannot
//! open alone.
//!
//! Closed, it counts consecutive failures and the orgs they came from. At the configured
//! number it opens, and the target is skipped for the cool-down, but only when the failures
//! span at least two orgs (or came from a call without an org, which cannot be discounted).
//! When they all came from one org, that org alone is shut out of the target for the
//! cool-down and the count starts again: its timeouts may be its own doing (huge prompts,
//! requests the provider chokes on), and another org's calls go on. A provider that is really
//! down fails for everyone, so a second org's failure in the run opens the breaker for all; a
//! deployment with a single org keeps the old behaviour, for that org.
//!
//! Open, after the cool-down one probe request is let through (half-open): its success
//! closes the breaker, its failure opens it for another cool-down. A probe whose caller went
//! away before an outcome lets the next request probe instead.
//!
//! At most [`MAX_SHUT_OUT`] orgs are shut out at once; one more failing alone means the
//! failures are not one org's, and the breaker opens for all. The state lives in this
//! process only: each replica learns on its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::time::Instant;
use uuid::Uuid;

use crate::config::providers::BreakerSettings;

/// Orgs shut out of one target at once, at most.
pub(crate) const MAX_SHUT_OUT: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Closed,
    Open { until: Instant },
    HalfOpen { probing: bool },
}

/// Who the failures of the current run came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Culprits {
    Nobody,
    One(Uuid),
    Several,
}

impl Culprits {
    fn with(self, org: Option<Uuid>) -> Culprits {
        match (self, org) {
            (Culprits::Nobody, Some(org)) => Culprits::One(org),
            (Culprits::One(first), Some(org)) if first == org => self,
            _ => Culprits::Several,
        }
    }
}

#[derive(Debug)]
struct State {
    phase: Phase,
    failures: u32,
    culprits: Culprits,
    /// Orgs whose lone failures shut them out, and until when.
    shut_out: HashMap<Uuid, Instant>,
}

impl State {
    fn restart_count(&mut self) {
        self.failures = 0;
        self.culprits = Culprits::Nobody;
    }
}

/// One target's breaker; clones share the state.
#[derive(Debug, Clone)]
pub(crate) struct Breaker {
    settings: BreakerSettings,
    state: Arc<Mutex<State>>,
}

/// A call the breaker let through: report its outcome with [`success`](Self::success) or
/// [`failure`](Self::failure). Dropped without one, a probe is given back.
#[derive(Debug)]
pub(crate) struct Admission {
    breaker: Breaker,
    org: Option<Uuid>,
    probe: bool,
    settled: bool,
}

/// What a state change did to the breaker, for the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    None,
    Opened,
    Closed,
}

impl Breaker {
    pub(crate) fn new(settings: BreakerSettings) -> Breaker {
        Breaker {
            settings,
            state: Arc::new(Mutex::new(State {
                phase: Phase::Closed,
                failures: 0,
                culprits: Culprits::Nobody,
                shut_out: HashMap::new(),
            })),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave a half-written state: each change is
        // made of plain assignments.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lets a call of `org` through, or `None` while the breaker is open (or its one probe is
    /// out), or while `org` is shut out.
    pub(crate) fn admit(&self, org: Option<Uuid>) -> Option<Admission> {
        let mut state = self.state();
        let now = Instant::now();
        if let Some(org) = org
            && let Some(&until) = state.shut_out.get(&org)
        {
            if now < until {
                return None;
            }
            state.shut_out.remove(&org);
        }
        let probe = match state.phase {
            Phase::Closed => false,
            Phase::Open { until } if now < until => return None,
            Phase::Open { .. } | Phase::HalfOpen { probing: false } => {
                state.phase = Phase::HalfOpen { probing: true };
                true
            }
            Phase::HalfOpen { probing: true } => return None,
        };
        Some(Admission {
            breaker: self.clone(),
            org,
            probe,
            settled: false,
        })
    }

    /// Whether calls are being skipped for every org.
    #[cfg(test)]
    fn is_open(&self) -> bool {
        !matches!(self.state().phase, Phase::Closed)
    }

    fn open(&self, state: &mut State) -> Change {
        let was_closed = matches!(state.phase, Phase::Closed);
        state.phase = Phase::Open {
            until: Instant::now() + self.settings.cooldown,
        };
        state.restart_count();
        if was_closed {
            Change::Opened
        } else {
            Change::None
        }
    }

    /// Shuts `org` out for the cool-down; false when the table is full of live entries.
    fn shut_out(&self, state: &mut State, org: Uuid) -> bool {
        let now = Instant::now();
        if state.shut_out.len() >= MAX_SHUT_OUT {
            state.shut_out.retain(|_, until| *until > now);
        }
        if state.shut_out.len() >= MAX_SHUT_OUT {
            return false;
        }
        state.shut_out.insert(org, now + self.settings.cooldown);
        state.restart_count();
        true
    }
}

impl Admission {
    /// The target answered: the breaker closes (a probe's success) or its count restarts.
    pub(crate) fn success(mut self) -> Change {
        self.settled = true;
        let mut state = self.breaker.state();
        let change = match state.phase {
            Phase::Closed => Change::None,
            _ => Change::Closed,
        };
        state.phase = Phase::Closed;
        state.restart_count();
        change
    }

    /// The target failed: one more failure; at the threshold the breaker opens, or only the
    /// failing org is shut out when it failed alone. A probe's failure is another cool-down.
    pub(crate) fn failure(mut self) -> Change {
        self.settled = true;
        let breaker = self.breaker.clone();
        let mut state = breaker.state();
        if !matches!(state.phase, Phase::Closed) {
            return breaker.open(&mut state);
        }
        state.failures += 1;
        state.culprits = state.culprits.with(self.org);
        if state.failures < breaker.settings.failures {
            return Change::None;
        }
        let culprits = state.culprits;
        match culprits {
            Culprits::One(org) if breaker.shut_out(&mut state, org) => Change::None,
            _ => breaker.open(&mut state),
        }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        if self.probe && !self.settled {
            let mut state = self.breaker.state();
            if state.phase == (Phase::HalfOpen { probing: true }) {
                state.phase = Phase::HalfOpen { probing: false };
            }
        }
    }
}

/// The cool-down left.
#[cfg(test)]
fn remaining(breaker: &Breaker) -> Option<std::time::Duration> {
    match breaker.state().phase {
        Phase::Open { until } => Some(until.saturating_duration_since(Instant::now())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn breaker() -> Breaker {
        Breaker::new(BreakerSettings {
            failures: 3,
            cooldown: Duration::from_secs(30),
        })
    }

    fn fail(breaker: &Breaker) -> Change {
        breaker.admit(None).expect("admitted").failure()
    }

    fn fail_as(breaker: &Breaker, org: Uuid) -> Change {
        breaker.admit(Some(org)).expect("admitted").failure()
    }

    #[tokio::test(start_paused = true)]
    async fn opens_after_consecutive_failures_only() {
        let b = breaker();
        assert_eq!(fail(&b), Change::None);
        assert_eq!(fail(&b), Change::None);
        assert_eq!(b.admit(None).unwrap().success(), Change::None);
        assert_eq!(fail(&b), Change::None);
        assert_eq!(fail(&b), Change::None);
        assert!(!b.is_open());
        assert_eq!(fail(&b), Change::Opened);
        assert!(b.is_open());
        assert!(b.admit(None).is_none(), "skipped while open");
        assert_eq!(remaining(&b), Some(Duration::from_secs(30)));
    }

    #[tokio::test(start_paused = true)]
    async fn lets_one_probe_through_after_the_cooldown() {
        let b = breaker();
        for _ in 0..3 {
            fail(&b);
        }
        tokio::time::advance(Duration::from_secs(29)).await;
        assert!(b.admit(None).is_none());
        tokio::time::advance(Duration::from_secs(1)).await;
        let probe = b.admit(None).expect("the probe");
        assert!(b.admit(None).is_none(), "one probe at a time");
        assert_eq!(probe.success(), Change::Closed);
        assert!(!b.is_open());
        assert!(b.admit(None).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_probe_opens_again_and_a_dropped_one_is_given_back() {
        let b = breaker();
        for _ in 0..3 {
            fail(&b);
        }
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(fail(&b), Change::None, "still open, not opened anew");
        assert!(b.admit(None).is_none());
        assert_eq!(remaining(&b), Some(Duration::from_secs(30)));
        tokio::time::advance(Duration::from_secs(30)).await;
        drop(b.admit(None).expect("a probe"));
        assert!(b.admit(None).is_some(), "the dropped probe was given back");
    }

    #[tokio::test(start_paused = true)]
    async fn one_orgs_failures_shut_out_that_org_only() {
        let b = breaker();
        let (noisy, other) = (Uuid::new_v4(), Uuid::new_v4());
        for _ in 0..3 {
            assert_eq!(fail_as(&b, noisy), Change::None);
        }
        assert!(!b.is_open(), "one org opened the shared breaker");
        assert!(
            b.admit(Some(noisy)).is_none(),
            "the failing org is shut out"
        );
        assert!(
            b.admit(Some(other)).is_some(),
            "another org still gets through"
        );
        // The count started again: the other org's success and failures are its own.
        assert_eq!(fail_as(&b, other), Change::None);
        tokio::time::advance(Duration::from_secs(30)).await;
        assert!(
            b.admit(Some(noisy)).is_some(),
            "shut out for the cool-down only"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn failures_of_two_orgs_open_the_breaker_for_all() {
        let b = breaker();
        let (a, c) = (Uuid::new_v4(), Uuid::new_v4());
        assert_eq!(fail_as(&b, a), Change::None);
        assert_eq!(fail_as(&b, a), Change::None);
        assert_eq!(fail_as(&b, c), Change::Opened);
        assert!(b.admit(Some(Uuid::new_v4())).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_table_of_lone_failures_opens_the_breaker() {
        let b = breaker();
        for _ in 0..MAX_SHUT_OUT {
            let org = Uuid::new_v4();
            for _ in 0..3 {
                assert_eq!(fail_as(&b, org), Change::None);
            }
        }
        assert!(!b.is_open());
        let last = Uuid::new_v4();
        fail_as(&b, last);
        fail_as(&b, last);
        assert_eq!(fail_as(&b, last), Change::Opened);
    }
}
