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

use tokio::sync::Notify;

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

/// A runtime with `workers` workers, I/O and timers on, and the [timer anchor](busy). One
/// worker is Tokio's current-thread scheduler on the thread that calls `block_on`; more is the
/// multi-threaded one.
pub fn build(workers: usize) -> std::io::Result<tokio::runtime::Runtime> {
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
    runtime.spawn(anchor.hold());
    Ok(runtime)
}

/// How far ahead the anchor's timer is armed: less than any per-request deadline.
const ANCHOR_PERIOD: Duration = Duration::from_millis(10);

/// Idle periods after which the anchor rests until the next request (one second).
const ANCHOR_IDLE_PERIODS: u32 = 100;

static ANCHOR: OnceLock<Anchor> = OnceLock::new();

/// Says that a request arrived: called once per request by the services' request paths. It
/// keeps the timer anchor armed while the service is busy. Two atomic loads when it already is.
///
/// Why: every request arms a few deadlines (the auth call's, Redis's, the limiter's). Tokio
/// wakes its own I/O driver, a `write` to an eventfd and often one more `epoll_wait`, whenever
/// a timer is registered that is earlier than the earliest it knew of when it last parked
/// (tokio-rs/tokio#8383), even on the thread that is about to park anyway. At one request at a
/// time there is no other timer, so each deadline cost those calls: three `write`s per chat
/// request in the gateway. The anchor keeps a timer [`ANCHOR_PERIOD`] ahead while requests
/// arrive, so a request's deadlines are never the earliest and arm silently. It rests after a
/// second without requests, so an idle process is not woken.
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

    async fn hold(&'static self) {
        let mut idle = 0;
        loop {
            tokio::time::sleep(ANCHOR_PERIOD).await;
            if self.active.swap(false, Ordering::Relaxed) {
                idle = 0;
                continue;
            }
            idle += 1;
            if idle >= ANCHOR_IDLE_PERIODS {
                self.resting.store(true, Ordering::Release);
                self.wake.notified().await;
                idle = 0;
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
        assert!(build(1).is_ok());
    }
}
