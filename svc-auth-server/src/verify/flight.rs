//! Single-flight: concurrent verifications of one secret share one Argon2 run, and the run
//! belongs to no caller.
//!
//! The success cache only helps once a run has finished. Without this, N clients presenting a
//! freshly issued token at the same moment (a gateway fleet warming up, a retry storm) would
//! each pay ~20 ms of CPU and ~19 MiB for the same answer. A flight is keyed by the keyed
//! digest of (token id, stored hash, secret), never by token id alone, so a wrong secret can
//! never ride on the run of a right one: different secrets are different flights.
//!
//! A flight is a spawned task, not a caller's future. Callers wait on a shared handle to it;
//! when every caller has gone (the gateway's 50 ms deadline passed) the task runs on, records
//! its verdict and leaves the table. So a cold token whose first check outlasts the deadline is
//! warm for the retry, and a wrong secret is remembered however impatient its sender.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};

use super::memory::Digest;

/// The shared handle to one flight's outcome.
pub(crate) type Landing<T> = Shared<BoxFuture<'static, T>>;

/// Flights under way, by digest.
pub(crate) struct Flights<T: Clone> {
    table: Mutex<HashMap<Digest, Landing<T>>>,
    /// The answer when a run dies without one (it panicked, or the runtime is stopping).
    lost: T,
}

/// What a boarding caller's check of memory and budget decided.
pub(crate) enum Decision<T, Fut> {
    /// The answer, without a run.
    Now(T),
    /// A run to start.
    Run(Fut),
}

/// What boarding decided: an answer at once, or a flight to wait for.
pub(crate) enum Boarding<T: Clone> {
    /// Decided without a run.
    Now(T),
    /// The flight under way for this digest (joined or just started).
    Flight(Landing<T>),
}

impl<T: Clone + Send + Sync + 'static> Flights<T> {
    /// No flights; a run that dies is answered `lost`.
    pub(crate) fn new(lost: T) -> Arc<Flights<T>> {
        Arc::new(Flights {
            table: Mutex::new(HashMap::new()),
            lost,
        })
    }

    /// Joins the flight for `digest`, or asks `decide` for an answer or a run to start.
    ///
    /// `decide` runs under the table's lock, so two callers never start two runs for one
    /// digest; it must only decide (check memory, take a ticket), not wait. A run it returns is
    /// spawned at once and lands (leaves the table) when it ends, whoever still waits on it.
    pub(crate) fn board<F, Fut>(self: &Arc<Self>, digest: Digest, decide: F) -> Boarding<T>
    where
        F: FnOnce() -> Decision<T, Fut>,
        Fut: Future<Output = T> + Send + 'static,
    {
        let mut table = self.lock();
        if let Some(flight) = table.get(&digest) {
            return Boarding::Flight(flight.clone());
        }
        let run = match decide() {
            Decision::Now(answer) => return Boarding::Now(answer),
            Decision::Run(run) => run,
        };
        let flights = Arc::clone(self);
        let task = tokio::spawn(async move {
            let outcome = run.await;
            flights.lock().remove(&digest);
            outcome
        });
        let lost = self.lost.clone();
        let landing = async move { task.await.unwrap_or(lost) }.boxed().shared();
        table.insert(digest, landing.clone());
        Boarding::Flight(landing)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Digest, Landing<T>>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use svc_testkit::eventually;
    use tokio::sync::Notify;

    use super::*;

    const WITHIN: Duration = Duration::from_secs(5);

    /// Boards `digest` with a run that counts itself and waits for `gate`.
    fn board(
        flights: &Arc<Flights<u8>>,
        digest: Digest,
        runs: &Arc<AtomicUsize>,
        gate: &Arc<Notify>,
    ) -> Boarding<u8> {
        let (runs, gate) = (Arc::clone(runs), Arc::clone(gate));
        flights.board(digest, move || {
            Decision::Run(async move {
                runs.fetch_add(1, Ordering::SeqCst);
                gate.notified().await;
                7
            })
        })
    }

    async fn land(boarding: Boarding<u8>) -> u8 {
        match boarding {
            Boarding::Now(answer) => answer,
            Boarding::Flight(flight) => flight.await,
        }
    }

    #[tokio::test]
    async fn concurrent_callers_share_one_run() {
        let flights = Flights::new(0);
        let (runs, gate) = (Arc::new(AtomicUsize::new(0)), Arc::new(Notify::new()));
        let boardings: Vec<_> = (0..16)
            .map(|_| board(&flights, [1; 32], &runs, &gate))
            .collect();
        assert_eq!(flights.len(), 1);
        let started = eventually(WITHIN, || async { runs.load(Ordering::SeqCst) == 1 }).await;
        assert!(started);
        gate.notify_one();
        let answers = futures_util::future::join_all(boardings.into_iter().map(land)).await;
        assert!(answers.iter().all(|a| *a == 7), "{answers:?}");
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        let landed = eventually(WITHIN, || async { flights.len() == 0 }).await;
        assert!(landed, "a landed flight stayed in the table");
    }

    #[tokio::test]
    async fn a_decided_answer_starts_no_flight() {
        let flights = Flights::<u8>::new(0);
        let boarding = flights.board([2; 32], || Decision::<_, std::future::Ready<u8>>::Now(3));
        assert_eq!(land(boarding).await, 3);
        assert_eq!(flights.len(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_run_goes_on_when_every_caller_has_gone() {
        let flights = Flights::new(0);
        let (runs, gate) = (Arc::new(AtomicUsize::new(0)), Arc::new(Notify::new()));
        let done = Arc::new(AtomicUsize::new(0));
        let boarding = {
            let (runs, gate, done) = (runs.clone(), gate.clone(), done.clone());
            flights.board([4; 32], move || {
                Decision::Run(async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    gate.notified().await;
                    done.fetch_add(1, Ordering::SeqCst);
                    9
                })
            })
        };
        let caller = tokio::spawn(land(boarding));
        let started = eventually(WITHIN, || async { runs.load(Ordering::SeqCst) == 1 }).await;
        assert!(started);
        // The caller's deadline passes: its wait is dropped mid-run.
        caller.abort();
        assert!(caller.await.unwrap_err().is_cancelled());

        // A caller arriving meanwhile joins the same run.
        let late = board(&flights, [4; 32], &runs, &gate);
        gate.notify_one();
        assert_eq!(land(late).await, 9);
        assert_eq!(done.load(Ordering::SeqCst), 1, "the run did not finish");
        assert_eq!(runs.load(Ordering::SeqCst), 1, "the late caller ran again");
        let landed = eventually(WITHIN, || async { flights.len() == 0 }).await;
        assert!(landed);
    }
}
