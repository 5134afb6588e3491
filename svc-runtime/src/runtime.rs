//! The Tokio runtime a service runs on, sized by `SVC_WORKER_THREADS`.
//!
//! The default is half the CPUs, at least one: Tokio's own default of one worker per CPU costs
//! more than it gives where the service shares a small machine. One request's tasks (the
//! connection, the auth channel, Redis, the provider) wake one another several times; on one
//! worker each wake is a queue push, across workers it is a futex call and often a thread
//! switch. Measured by `svc-harness` on 2 CPUs: the gateway's CPU per request at one connection
//! fell from about 0.39 ms to 0.26 ms with one worker instead of two, with no loss of throughput
//! at 32 connections. A service with the machine to itself and more traffic than one worker
//! carries sets it higher.
//!
//! One worker is Tokio's current-thread scheduler rather than a multi-threaded one with one
//! worker: no work-stealing queues, no hand-off between the thread in `block_on` and the worker,
//! and the I/O driver polled by the thread that runs the tasks. In `svc-harness` runs on 2 CPUs
//! this took the four processes' CPU per request at 32 connections from about 0.44 ms to
//! 0.35–0.37 ms, and the throughput from about 3,250 to 3,900–4,000 requests a second.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use std::future::{Future, poll_fn};
use std::task::Poll;

use tokio::sync::Notify;
use tokio::time::{Instant, sleep_until};

use crate::config::{ConfigError, Vars, parse_positive};

crate::variables! {
    /// Worker threads of the runtime (default: half the CPUs).
    SVC_WORKER_THREADS;
}

/// Half the CPUs (as the scheduler and the cgroup quota allow), at least one.
pub fn half_the_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

/// `SVC_WORKER_THREADS`, else [`half_the_cpus`].
pub fn worker_threads(vars: &Vars) -> Result<usize, ConfigError> {
    vars.parse_or(SVC_WORKER_THREADS, half_the_cpus(), parse_positive::<usize>)
}

/// A runtime with `workers` workers, I/O and timers on, and the [timer anchor](busy) for
/// requests whose shortest deadline is `shortest_deadline`. One worker is Tokio's
/// current-thread scheduler on the thread that calls `block_on`; more is the multi-threaded
/// one.
pub fn build(
    workers: usize,
    shortest_deadline: Duration,
) -> std::io::Result<tokio::runtime::Runtime> {
    let runtime = if workers == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()?
    };
    let anchor = ANCHOR.get_or_init(Anchor::default);
    runtime.spawn(anchor.hold(shortest_deadline.max(MIN_AHEAD)));
    Ok(runtime)
}

/// The anchor's timers are never closer together than this, whatever the deadlines.
const MIN_AHEAD: Duration = Duration::from_millis(5);

/// Without a request for this long the anchor rests until the next one.
const ANCHOR_IDLE: Duration = Duration::from_secs(1);

static ANCHOR: OnceLock<Anchor> = OnceLock::new();

/// Says that a request arrived: called once per request by the services' request paths. It
/// keeps the timer anchor armed while the service is busy. Two atomic loads when it already is.
///
/// Why: every request arms a few deadlines (the auth call's, Redis's, the limiter's). Tokio
/// wakes its own I/O driver, a `write` to an eventfd and often one more `epoll_wait`, whenever
/// a timer is registered that is earlier than the earliest it knew of when it last parked
/// (tokio-rs/tokio#5207), even on the thread that is about to park anyway. At one request at a
/// time there is no other timer, so each deadline cost those calls: three `write`s per chat
/// request in the gateway. The anchor keeps two timers armed, firing alternately, the earlier
/// never further ahead than the requests' shortest deadline, so the wheel always holds one
/// earlier than a request's deadlines, which then arm silently; each re-arms behind the other,
/// so the anchor wakes nothing either. It rests after a second without requests, so an idle
/// process is not woken.
pub fn busy() {
    if let Some(anchor) = ANCHOR.get() {
        anchor.touch();
    }
}

#[derive(Default)]
struct Anchor {
    active: AtomicBool,
    resting: AtomicBool,
    wake: Notify,
}

impl Anchor {
    fn touch(&self) {
        if !self.active.load(Ordering::Relaxed) {
            self.active.store(true, Ordering::Relaxed);
        }
        if self.resting.load(Ordering::Relaxed) && self.resting.swap(false, Ordering::AcqRel) {
            self.wake.notify_one();
        }
    }

    /// Holds the anchor with its earlier timer at most `ahead` away.
    async fn hold(&'static self, ahead: Duration) {
        loop {
            self.while_busy(ahead).await;
            self.resting.store(true, Ordering::Release);
            self.wake.notified().await;
        }
    }

    /// Keeps the two timers armed until [`ANCHOR_IDLE`] passes without a request.
    async fn while_busy(&self, ahead: Duration) {
        let now = Instant::now();
        let mut timers = [
            Box::pin(sleep_until(now + ahead)),
            Box::pin(sleep_until(now + 2 * ahead)),
        ];
        let mut quiet_since = now;
        while quiet_since.elapsed() < ANCHOR_IDLE {
            poll_fn(|cx| {
                for timer in &mut timers {
                    if timer.as_mut().poll(cx).is_ready() {
                        timer.as_mut().reset(Instant::now() + 2 * ahead);
                        return Poll::Ready(());
                    }
                }
                Poll::Pending
            })
            .await;
            if self.active.swap(false, Ordering::Relaxed) {
                quiet_since = Instant::now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worker_count_is_positive() {
        assert!(half_the_cpus() >= 1);
        let vars = Vars::from_pairs([(SVC_WORKER_THREADS, "3")]);
        assert_eq!(worker_threads(&vars).unwrap(), 3);
        let vars = Vars::from_pairs([(SVC_WORKER_THREADS, "0")]);
        let error = worker_threads(&vars).unwrap_err().to_string();
        assert!(error.starts_with("SVC_WORKER_THREADS:"), "{error}");
        assert!(build(1, Duration::from_millis(50)).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn the_anchor_rests_after_a_quiet_second_and_a_request_wakes_it() {
        let anchor: &'static Anchor = Box::leak(Box::default());
        tokio::spawn(anchor.hold(Duration::from_millis(50)));
        anchor.touch();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!anchor.resting.load(Ordering::Acquire), "busy for a second");
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        assert!(anchor.resting.load(Ordering::Acquire), "rests when quiet");
        anchor.touch();
        assert!(!anchor.resting.load(Ordering::Acquire));
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!anchor.resting.load(Ordering::Acquire), "armed again");
    }
}
