//! Single-flight: concurrent verifications of one secret share one Argon2 run.
//!
//! The success cache only helps once a run has finished. Without this, N clients presenting a
//! freshly issued token at the same moment (a gateway fleet warming up, a retry storm) would
//! each pay ~20 ms of CPU and ~19 MiB for the same answer. A flight is keyed by the keyed
//! digest of (token id, stored hash, secret), never by token id alone, so a wrong secret can
//! never ride on the run of a right one: different secrets are different flights.
//!
//! Each flight is a [`tokio::sync::OnceCell`]. The first caller runs the work; the others wait
//! on the cell, holding nothing but a place in its queue (the caller has already read the
//! token row and released its database connection). If the running caller fails or is dropped
//! (its client disconnected), the cell stays empty and the next waiting caller runs the work
//! itself, so a lost leader never wedges the others. A flight leaves the table with its last
//! caller, so the table holds only flights under way.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::OnceCell;

use super::memory::Digest;

type Flight<T> = Arc<OnceCell<T>>;

/// Flights under way, by digest.
pub(crate) struct Flights<T> {
    table: Mutex<HashMap<Digest, Flight<T>>>,
}

impl<T: Copy> Flights<T> {
    pub(crate) fn new() -> Flights<T> {
        Flights {
            table: Mutex::new(HashMap::new()),
        }
    }

    /// The value of the flight for `digest`: the one under way if any, else `work`'s.
    ///
    /// `work` runs at most once per flight at a time. An `Err` is returned to this caller
    /// only and is never shared: the next waiting caller runs its own `work`.
    pub(crate) async fn run<E, F, Fut>(&self, digest: Digest, work: F) -> Result<T, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let seat = self.board(digest);
        seat.flight().get_or_try_init(work).await.copied()
    }

    fn board(&self, digest: Digest) -> Seat<'_, T> {
        let flight = self.lock().entry(digest).or_default().clone();
        Seat {
            flights: self,
            digest,
            flight: Some(flight),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Digest, Flight<T>>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

/// One caller's place on a flight; the last to leave removes the flight.
struct Seat<'a, T> {
    flights: &'a Flights<T>,
    digest: Digest,
    flight: Option<Flight<T>>,
}

impl<T> Seat<'_, T> {
    fn flight(&self) -> &OnceCell<T> {
        match &self.flight {
            Some(flight) => flight,
            None => unreachable!("a seat holds its flight until dropped"),
        }
    }
}

impl<T> Drop for Seat<'_, T> {
    fn drop(&mut self) {
        let mut table = self.flights.table.lock().unwrap_or_else(|p| p.into_inner());
        // Handles are cloned and dropped only under the lock, so a count of one (the
        // table's own) means nobody else is aboard.
        self.flight = None;
        if table
            .get(&self.digest)
            .is_some_and(|flight| Arc::strong_count(flight) == 1)
        {
            table.remove(&self.digest);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use svc_testkit::eventually;
    use tokio::sync::{Notify, oneshot};

    use super::*;

    const WITHIN: Duration = Duration::from_secs(5);

    /// Callers on the flight for `digest`.
    fn aboard<T: Copy>(flights: &Flights<T>, digest: Digest) -> usize {
        flights
            .lock()
            .get(&digest)
            .map_or(0, |flight| Arc::strong_count(flight) - 1)
    }

    #[tokio::test]
    async fn concurrent_callers_share_one_run() {
        let flights = Flights::new();
        let runs = AtomicUsize::new(0);
        let gate = Notify::new();
        let work = || async {
            runs.fetch_add(1, Ordering::SeqCst);
            gate.notified().await;
            Ok::<_, ()>(7)
        };
        let callers = futures_util::future::join_all((0..16).map(|_| flights.run([1; 32], work)));
        let opened = async {
            // Every caller is aboard (and one is running) before the run may finish.
            let aboard = eventually(WITHIN, || async { aboard(&flights, [1; 32]) == 16 }).await;
            gate.notify_one();
            aboard
        };
        let (results, aboard) = tokio::join!(callers, opened);
        assert!(aboard, "the callers never boarded one flight");
        assert!(results.iter().all(|r| *r == Ok(7)), "{results:?}");
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(flights.len(), 0, "a landed flight stayed in the table");
    }

    #[tokio::test]
    async fn different_digests_fly_separately() {
        let flights = Flights::new();
        let (a, b) = tokio::join!(
            flights.run([1; 32], || async { Ok::<_, ()>(true) }),
            flights.run([2; 32], || async { Ok::<_, ()>(false) }),
        );
        assert_eq!((a, b), (Ok(true), Ok(false)));
        assert_eq!(flights.len(), 0);
    }

    #[tokio::test]
    async fn a_failed_run_is_not_shared_and_a_waiting_caller_runs_its_own() {
        let flights = Flights::new();
        let gate = Notify::new();
        let leader = flights.run([3; 32], || async {
            gate.notified().await;
            Err("pool closed")
        });
        let follower = async {
            // Board after the leader has taken the flight.
            tokio::task::yield_now().await;
            flights.run([3; 32], || async { Ok::<_, &str>(5) }).await
        };
        let release = async {
            let aboard = eventually(WITHIN, || async { aboard(&flights, [3; 32]) == 2 }).await;
            gate.notify_one();
            aboard
        };
        let (leader, follower, aboard) = tokio::join!(leader, follower, release);
        assert!(aboard, "the follower never boarded the leader's flight");
        assert_eq!(leader, Err("pool closed"));
        assert_eq!(follower, Ok(5));
        assert_eq!(flights.len(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_leader_does_not_wedge_its_followers() {
        let flights = Arc::new(Flights::new());
        let runs = Arc::new(AtomicUsize::new(0));
        let digest = [4; 32];

        // The leader starts its run and never finishes it.
        let (started, leading) = oneshot::channel();
        let leader = tokio::spawn({
            let (flights, runs) = (flights.clone(), runs.clone());
            async move {
                flights
                    .run(digest, || async move {
                        runs.fetch_add(1, Ordering::SeqCst);
                        let _ = started.send(());
                        std::future::pending::<Result<u8, ()>>().await
                    })
                    .await
            }
        });
        leading.await.unwrap();

        let followers: Vec<_> = (0..8)
            .map(|_| {
                let (flights, runs) = (flights.clone(), runs.clone());
                tokio::spawn(async move {
                    flights
                        .run(digest, || async move {
                            runs.fetch_add(1, Ordering::SeqCst);
                            Ok::<_, ()>(9)
                        })
                        .await
                })
            })
            .collect();
        let aboard = eventually(WITHIN, || {
            let flights = flights.clone();
            async move { aboard(&flights, digest) == 9 }
        })
        .await;
        assert!(aboard, "the followers never boarded the leader's flight");
        assert_eq!(
            runs.load(Ordering::SeqCst),
            1,
            "a follower ran beside the leader"
        );

        // The leader's client disconnects: its call is dropped mid-run.
        leader.abort();
        assert!(leader.await.unwrap_err().is_cancelled());

        for follower in followers {
            let result = tokio::time::timeout(WITHIN, follower).await;
            assert_eq!(result.expect("a follower was wedged").unwrap(), Ok(9));
        }
        // One follower took over; the rest shared its result.
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        assert_eq!(flights.len(), 0);
    }
}
