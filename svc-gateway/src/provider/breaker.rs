//! A circuit breaker for one target of a model.
//!
//! Closed, it counts consecutive failures; at the configured number it opens, and the target
//! is skipped for the cool-down. Then one probe request is let through (half-open): its
//! success closes the breaker, its failure opens it for another cool-down. A probe whose
//! caller went away before an outcome lets the next request probe instead.
//!
//! The state lives in this process only: each replica learns on its own.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::time::Instant;

use crate::config::providers::BreakerSettings;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed { failures: u32 },
    Open { until: Instant },
    HalfOpen { probing: bool },
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
            state: Arc::new(Mutex::new(State::Closed { failures: 0 })),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave a half-written state: it is one value.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lets a call through, or `None` while the breaker is open (or its one probe is out).
    pub(crate) fn admit(&self) -> Option<Admission> {
        let mut state = self.state();
        let probe = match *state {
            State::Closed { .. } => false,
            State::Open { until } if Instant::now() < until => return None,
            State::Open { .. } | State::HalfOpen { probing: false } => {
                *state = State::HalfOpen { probing: true };
                true
            }
            State::HalfOpen { probing: true } => return None,
        };
        Some(Admission {
            breaker: self.clone(),
            probe,
            settled: false,
        })
    }

    /// Whether calls are being skipped.
    #[cfg(test)]
    fn is_open(&self) -> bool {
        !matches!(*self.state(), State::Closed { .. })
    }

    fn open(&self, state: &mut State) -> Change {
        let was_closed = matches!(*state, State::Closed { .. });
        *state = State::Open {
            until: Instant::now() + self.settings.cooldown,
        };
        if was_closed {
            Change::Opened
        } else {
            Change::None
        }
    }
}

impl Admission {
    /// The target answered: the breaker closes (a probe's success) or its count restarts.
    pub(crate) fn success(mut self) -> Change {
        self.settled = true;
        let mut state = self.breaker.state();
        let change = match *state {
            State::Closed { .. } => Change::None,
            _ => Change::Closed,
        };
        *state = State::Closed { failures: 0 };
        change
    }

    /// The target failed: one more failure, or (a probe's failure) another cool-down.
    pub(crate) fn failure(mut self) -> Change {
        self.settled = true;
        let breaker = self.breaker.clone();
        let mut state = breaker.state();
        match *state {
            State::Closed { failures } if failures + 1 < breaker.settings.failures => {
                *state = State::Closed {
                    failures: failures + 1,
                };
                Change::None
            }
            _ => breaker.open(&mut state),
        }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        if self.probe && !self.settled {
            let mut state = self.breaker.state();
            if *state == (State::HalfOpen { probing: true }) {
                *state = State::HalfOpen { probing: false };
            }
        }
    }
}

/// The cool-down left.
#[cfg(test)]
fn remaining(breaker: &Breaker) -> Option<std::time::Duration> {
    match *breaker.state() {
        State::Open { until } => Some(until.saturating_duration_since(Instant::now())),
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
        breaker.admit().expect("admitted").failure()
    }

    #[tokio::test(start_paused = true)]
    async fn opens_after_consecutive_failures_only() {
        let b = breaker();
        assert_eq!(fail(&b), Change::None);
        assert_eq!(fail(&b), Change::None);
        assert_eq!(b.admit().unwrap().success(), Change::None);
        assert_eq!(fail(&b), Change::None);
        assert_eq!(fail(&b), Change::None);
        assert!(!b.is_open());
        assert_eq!(fail(&b), Change::Opened);
        assert!(b.is_open());
        assert!(b.admit().is_none(), "skipped while open");
        assert_eq!(remaining(&b), Some(Duration::from_secs(30)));
    }

    #[tokio::test(start_paused = true)]
    async fn lets_one_probe_through_after_the_cooldown() {
        let b = breaker();
        for _ in 0..3 {
            fail(&b);
        }
        tokio::time::advance(Duration::from_secs(29)).await;
        assert!(b.admit().is_none());
        tokio::time::advance(Duration::from_secs(1)).await;
        let probe = b.admit().expect("the probe");
        assert!(b.admit().is_none(), "one probe at a time");
        assert_eq!(probe.success(), Change::Closed);
        assert!(!b.is_open());
        assert!(b.admit().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_probe_opens_again_and_a_dropped_one_is_given_back() {
        let b = breaker();
        for _ in 0..3 {
            fail(&b);
        }
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(fail(&b), Change::None, "still open, not opened anew");
        assert!(b.admit().is_none());
        assert_eq!(remaining(&b), Some(Duration::from_secs(30)));
        tokio::time::advance(Duration::from_secs(30)).await;
        drop(b.admit().expect("a probe"));
        assert!(b.admit().is_some(), "the dropped probe was given back");
    }
}
