//! Argon2id hashing on a bounded blocking pool.
//!
//! One Argon2id run costs tens of milliseconds of CPU and ~19 MiB of memory. Running it on the
//! async workers would stall every other request, and running unboundedly many at once would
//! exhaust memory, so each run takes a semaphore permit and goes to `spawn_blocking`. The permit
//! travels with the blocking task: a caller that gives up (its client disconnected) cannot stop
//! a run already started, and must not free a slot that run still occupies.

use std::sync::Arc;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use prometheus_client::metrics::counter::Counter;
use rand::RngCore;
use tokio::sync::Semaphore;

/// OWASP's Argon2id memory cost, in KiB.
pub const DEFAULT_MEMORY_KIB: u32 = 19_456;
/// OWASP's Argon2id iteration count.
pub const DEFAULT_ITERATIONS: u32 = 2;
/// OWASP's Argon2id parallelism.
pub const DEFAULT_PARALLELISM: u32 = 1;

/// Cost parameters for new hashes. Verification reads the parameters from each stored hash,
/// so changing these never invalidates existing tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Argon2Params {
    /// Memory cost in KiB.
    pub memory_kib: u32,
    /// Number of passes.
    pub iterations: u32,
    /// Lanes.
    pub parallelism: u32,
}

impl Default for Argon2Params {
    fn default() -> Self {
        Argon2Params {
            memory_kib: DEFAULT_MEMORY_KIB,
            iterations: DEFAULT_ITERATIONS,
            parallelism: DEFAULT_PARALLELISM,
        }
    }
}

/// Why hashing or verifying failed (never because the secret was wrong).
#[derive(Debug, Clone, thiserror::Error)]
pub enum HashError {
    /// The cost parameters are out of Argon2's range.
    #[error("invalid Argon2 parameters: {0}")]
    Params(String),
    /// A stored hash is not a valid PHC string.
    #[error("the stored hash is not a valid PHC string")]
    StoredHash,
    /// Hashing itself failed.
    #[error("hashing failed")]
    Hashing,
    /// The blocking task died or the pool was closed.
    #[error("the hashing pool failed")]
    Pool,
}

/// Hashes and verifies secrets; cheap to clone.
#[derive(Clone)]
pub struct Hasher {
    inner: Arc<Inner>,
}

struct Inner {
    argon2: Argon2<'static>,
    permits: Arc<Semaphore>,
    concurrency: usize,
    runs: Counter,
    /// The CPUs hashing threads keep to; `None` when they may use all the process's.
    cpus: Option<rustix::thread::CpuSet>,
}

impl std::fmt::Debug for Hasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hasher")
            .field("params", self.inner.argon2.params())
            .field("runs", &self.inner.runs.get())
            .finish()
    }
}

impl Hasher {
    /// A hasher producing Argon2id hashes with `params`, running at most `concurrency` hashes
    /// at once.
    pub fn new(params: Argon2Params, concurrency: usize) -> Result<Hasher, HashError> {
        let params = Params::new(
            params.memory_kib,
            params.iterations,
            params.parallelism,
            None,
        )
        .map_err(|e| HashError::Params(e.to_string()))?;
        Ok(Hasher {
            inner: Arc::new(Inner {
                argon2: Argon2::new(Algorithm::Argon2id, Version::V0x13, params),
                permits: Arc::new(Semaphore::new(concurrency.max(1))),
                concurrency: concurrency.max(1),
                runs: Counter::default(),
                cpus: hashing_cpus(concurrency.max(1)),
            }),
        })
    }

    /// How many Argon2 runs go at once.
    pub fn concurrency(&self) -> usize {
        self.inner.concurrency
    }

    /// How many Argon2 computations this hasher has run (hashes and verifications).
    pub fn runs(&self) -> u64 {
        self.inner.runs.get()
    }

    /// The run counter, for registering as a metric.
    pub fn runs_counter(&self) -> Counter {
        self.inner.runs.clone()
    }

    /// The PHC string of `secret` with a fresh random salt.
    pub async fn hash(&self, secret: &str) -> Result<String, HashError> {
        let mut salt = [0u8; 16];
        rand::rng().fill_bytes(&mut salt);
        let salt = SaltString::encode_b64(&salt).map_err(|_| HashError::Hashing)?;
        let secret = secret.to_owned();
        self.blocking(move |argon2| {
            argon2
                .hash_password(secret.as_bytes(), &salt)
                .map(|hash| hash.to_string())
                .map_err(|_| HashError::Hashing)
        })
        .await
    }

    /// Whether `secret` matches the PHC string `stored`.
    pub async fn verify(&self, stored: &str, secret: &str) -> Result<bool, HashError> {
        self.verify_then(stored, secret, |matched| matched).await
    }

    /// Verifies `secret` against `stored` and hands the answer to `then` on the blocking
    /// thread, right after the hash and before the permit is freed. What `then` records is
    /// therefore recorded even when the caller has stopped waiting (its deadline passed).
    pub(crate) async fn verify_then<T, F>(
        &self,
        stored: &str,
        secret: &str,
        then: F,
    ) -> Result<T, HashError>
    where
        T: Send + 'static,
        F: FnOnce(bool) -> T + Send + 'static,
    {
        // Parse first: a corrupt stored hash is a server fault, not a wrong secret.
        PasswordHash::new(stored).map_err(|_| HashError::StoredHash)?;
        let (stored, secret) = (stored.to_owned(), secret.to_owned());
        self.blocking(move |argon2| {
            let hash = PasswordHash::new(&stored).map_err(|_| HashError::StoredHash)?;
            let matched = match argon2.verify_password(secret.as_bytes(), &hash) {
                Ok(()) => true,
                Err(argon2::password_hash::Error::Password) => false,
                Err(_) => return Err(HashError::StoredHash),
            };
            Ok(then(matched))
        })
        .await
    }

    async fn blocking<T, F>(&self, work: F) -> Result<T, HashError>
    where
        T: Send + 'static,
        F: FnOnce(&Argon2<'static>) -> Result<T, HashError> + Send + 'static,
    {
        let permit = self
            .inner
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| HashError::Pool)?;
        self.inner.runs.inc();
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            // Hashing yields the CPU to serving: a flood of never-seen secrets keeps its
            // Argon2 runs busy, and the calls of tokens already verified must not queue behind
            // them for a time slice. The thread keeps the lowest priority afterwards; this
            // process's blocking pool runs Argon2 and nothing on a request's path. Failing to
            // lower it changes nothing else.
            let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 19);
            if let Some(cpus) = &inner.cpus {
                let _ = rustix::thread::sched_setaffinity(None, cpus);
            }
            let result = work(&inner.argon2);
            drop(permit);
            result
        })
        .await
        .map_err(|_| HashError::Pool)?
    }
}

/// The last `concurrency` CPUs this process may run on, for the hashing threads, when that
/// leaves others to serve; `None` otherwise (or when the mask cannot be read). Kept to CPUs of
/// their own, the Argon2 runs of a wrong-secret flood stop landing beside the serving threads
/// and PostgreSQL: measured by `svc-harness`'s flood phase on 2 CPUs, a real token's p99 under
/// the flood went from 2.3–2.9x its p99 alone to 1.2–2.1x in alternating runs.
fn hashing_cpus(concurrency: usize) -> Option<rustix::thread::CpuSet> {
    let mine = process_cpus()?;
    if mine.len() <= concurrency {
        return None;
    }
    let mut set = rustix::thread::CpuSet::new();
    for &cpu in &mine[mine.len() - concurrency..] {
        set.set(cpu);
    }
    Some(set)
}

/// The CPUs this process may run on, in order; `None` when the mask cannot be read.
fn process_cpus() -> Option<Vec<usize>> {
    let allowed = rustix::thread::sched_getaffinity(None).ok()?;
    Some(
        (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&cpu| allowed.is_set(cpu))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cheap() -> Hasher {
        Hasher::new(
            Argon2Params {
                memory_kib: 64,
                iterations: 1,
                parallelism: 1,
            },
            2,
        )
        .unwrap()
    }

    #[test]
    fn hashing_keeps_to_the_last_cpus_and_leaves_the_others() {
        let mine = process_cpus().unwrap();
        assert!(hashing_cpus(mine.len()).is_none());
        if mine.len() >= 2 {
            let set = hashing_cpus(1).unwrap();
            let chosen: Vec<usize> = mine.iter().copied().filter(|&c| set.is_set(c)).collect();
            assert_eq!(chosen, [mine[mine.len() - 1]]);
        }
    }

    #[tokio::test]
    async fn hashes_verify_and_count_runs() {
        let hasher = cheap();
        let phc = hasher.hash("s3cret").await.unwrap();
        assert!(phc.starts_with("$argon2id$v=19$m=64,t=1,p=1$"));
        assert!(!phc.contains("s3cret"));
        assert!(hasher.verify(&phc, "s3cret").await.unwrap());
        assert!(!hasher.verify(&phc, "s3cret!").await.unwrap());
        assert_eq!(hasher.runs(), 3);
    }

    #[tokio::test]
    async fn salts_differ() {
        let hasher = cheap();
        assert_ne!(
            hasher.hash("x").await.unwrap(),
            hasher.hash("x").await.unwrap()
        );
    }

    #[tokio::test]
    async fn default_parameters_are_owasp() {
        let hasher = Hasher::new(Argon2Params::default(), 1).unwrap();
        let phc = hasher.hash("x").await.unwrap();
        assert!(phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{phc}");
    }

    #[tokio::test]
    async fn a_corrupt_stored_hash_is_an_error_without_a_run() {
        let hasher = cheap();
        let result = hasher.verify("not a phc string", "x").await;
        assert!(matches!(result, Err(HashError::StoredHash)));
        assert_eq!(hasher.runs(), 0);
    }

    #[tokio::test]
    async fn a_cancelled_caller_keeps_the_permit_until_its_run_ends() {
        let hasher = Hasher::new(
            Argon2Params {
                memory_kib: 64,
                iterations: 1,
                parallelism: 1,
            },
            1,
        )
        .unwrap();
        let (started, running) = tokio::sync::oneshot::channel();
        let (finish, held) = std::sync::mpsc::channel::<()>();
        let caller = tokio::spawn({
            let hasher = hasher.clone();
            async move {
                hasher
                    .blocking(move |_| {
                        let _ = started.send(());
                        let _ = held.recv();
                        Ok(())
                    })
                    .await
            }
        });
        running.await.unwrap();
        caller.abort();
        assert!(caller.await.unwrap_err().is_cancelled());
        // The run goes on without its caller, and still counts against the bound.
        assert_eq!(hasher.inner.permits.available_permits(), 0);

        finish.send(()).unwrap();
        let freed = svc_testkit::eventually(std::time::Duration::from_secs(5), || async {
            hasher.inner.permits.available_permits() == 1
        })
        .await;
        assert!(freed, "the permit outlived the run");
    }

    #[test]
    fn out_of_range_parameters_are_refused() {
        let params = Argon2Params {
            memory_kib: 1,
            iterations: 1,
            parallelism: 1,
        };
        assert!(matches!(Hasher::new(params, 1), Err(HashError::Params(_))));
    }
}
