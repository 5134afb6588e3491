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

/// A runtime with `workers` workers, I/O and timers on. One worker is Tokio's current-thread
/// scheduler on the thread that calls `block_on`; more is the multi-threaded one.
pub fn build(workers: usize) -> std::io::Result<tokio::runtime::Runtime> {
    if workers == 1 {
        return tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
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
