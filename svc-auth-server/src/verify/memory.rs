//! What one process remembers about secrets it has checked: successes (so Argon2 runs once
//! per token and secret) and recent failures (so a leaked token id cannot become a CPU burner).
//!
//! Nothing here stores a secret. Both caches hold HMAC-SHA256 digests under a key drawn at
//! start and never written anywhere, so a memory dump reveals no usable secret either.
//! Neither can turn a failure into a success: a success still needs the digest of the exact
//! secret, and the caller reads the token row (revocation, expiry) before asking.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;
use uuid::Uuid;

/// A keyed digest of one (token, stored hash, secret) triple.
pub(crate) type Digest = [u8; 32];

/// Computes digests under a per-process random key.
pub(crate) struct Digester {
    key: [u8; 32],
}

impl Digester {
    pub(crate) fn new() -> Digester {
        let mut key = [0u8; 32];
        rand::rng().fill_bytes(&mut key);
        Digester { key }
    }

    /// The stored hash is part of the input, so a token whose hash changes (a re-issued
    /// secret) never matches a digest remembered for the old one.
    pub(crate) fn digest(&self, token_id: Uuid, stored_hash: &str, secret: &str) -> Digest {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.key) else {
            unreachable!("HMAC takes keys of any length")
        };
        mac.update(token_id.as_bytes());
        mac.update(&(stored_hash.len() as u64).to_be_bytes());
        mac.update(stored_hash.as_bytes());
        mac.update(secret.as_bytes());
        mac.finalize().into_bytes().into()
    }
}

/// Equality that takes the same time wherever the first difference is.
fn same(a: &Digest, b: &Digest) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A map of at most `capacity` entries that forgets the oldest insertion first.
struct Bounded<V> {
    entries: HashMap<Uuid, V>,
    order: VecDeque<Uuid>,
    capacity: usize,
}

impl<V> Bounded<V> {
    fn new(capacity: usize) -> Bounded<V> {
        Bounded {
            entries: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    fn get_mut(&mut self, key: &Uuid) -> Option<&mut V> {
        self.entries.get_mut(key)
    }

    /// Entries are replaced in place and never removed one by one, so `order` always holds
    /// exactly the keys of `entries`.
    fn insert(&mut self, key: Uuid, value: V) {
        if let Some(slot) = self.entries.get_mut(&key) {
            *slot = value;
            return;
        }
        while self.entries.len() >= self.capacity {
            match self.order.pop_front() {
                Some(oldest) => {
                    self.entries.remove(&oldest);
                }
                None => break,
            }
        }
        self.order.push_back(key);
        self.entries.insert(key, value);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

/// Digests of secrets that verified, one per token.
pub(crate) struct Successes {
    inner: Mutex<Bounded<Digest>>,
}

impl Successes {
    pub(crate) fn new(capacity: usize) -> Successes {
        Successes {
            inner: Mutex::new(Bounded::new(capacity)),
        }
    }

    pub(crate) fn contains(&self, token_id: Uuid, digest: &Digest) -> bool {
        let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        map.get_mut(&token_id)
            .is_some_and(|known| same(known, digest))
    }

    pub(crate) fn insert(&self, token_id: Uuid, digest: Digest) {
        let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        map.insert(token_id, digest);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().unwrap().len()
    }
}

/// How failures per token id are limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureLimits {
    /// How long failures are remembered, counted from the first of a window.
    pub window: Duration,
    /// Argon2 verifications that may fail per token id within a window; further unknown
    /// secrets for that id are refused without hashing until the window ends.
    pub max_failures: u32,
    /// Most token ids tracked at once.
    pub capacity: usize,
}

/// Defaults: ten failed verifications per token id per minute.
impl Default for FailureLimits {
    fn default() -> Self {
        FailureLimits {
            window: Duration::from_secs(60),
            max_failures: 10,
            capacity: 10_000,
        }
    }
}

/// What to do with a secret that is not a remembered success.
#[derive(Debug)]
pub(crate) enum Admission<'a> {
    /// Verify it with Argon2, holding the attempt until the verdict is recorded.
    Verify(Attempt<'a>),
    /// This exact secret failed moments ago: refuse without hashing.
    KnownWrong,
    /// Too many failures, finished or in progress, for this token id: refuse without hashing.
    Throttled,
}

/// A verification in progress for one token id. It counts against the id's failure budget
/// until dropped, so a burst of different wrong secrets sent at once cannot all slip past the
/// limit before the first of them has failed.
#[derive(Debug)]
pub(crate) struct Attempt<'a> {
    failures: &'a Failures,
    token_id: Uuid,
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        let mut inner = self.failures.lock();
        if let Some(count) = inner.in_flight.get_mut(&self.token_id) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                inner.in_flight.remove(&self.token_id);
            }
        }
    }
}

const REMEMBERED_WRONG_SECRETS: usize = 8;

struct Window {
    started: Instant,
    failures: u32,
    recent: VecDeque<Digest>,
}

/// Recent failed verifications per token id, and the verifications still running.
#[derive(Debug)]
pub(crate) struct Failures {
    limits: FailureLimits,
    inner: Mutex<FailureState>,
}

struct FailureState {
    windows: Bounded<Window>,
    /// Verifications in progress per token id; an id leaves when its last one ends, so this
    /// holds no more entries than there are Argon2 runs waiting or running.
    in_flight: HashMap<Uuid, u32>,
}

impl std::fmt::Debug for FailureState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FailureState")
            .field("in_flight", &self.in_flight.len())
            .finish_non_exhaustive()
    }
}

impl Failures {
    pub(crate) fn new(limits: FailureLimits) -> Failures {
        Failures {
            limits,
            inner: Mutex::new(FailureState {
                windows: Bounded::new(limits.capacity),
                in_flight: HashMap::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FailureState> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn admit(&self, token_id: Uuid, digest: &Digest) -> Admission<'_> {
        let mut inner = self.lock();
        let failures = match inner.windows.get_mut(&token_id) {
            Some(window) if window.started.elapsed() < self.limits.window => {
                if window.recent.iter().any(|known| same(known, digest)) {
                    return Admission::KnownWrong;
                }
                window.failures
            }
            _ => 0,
        };
        let running = inner.in_flight.entry(token_id).or_insert(0);
        if failures.saturating_add(*running) >= self.limits.max_failures {
            if *running == 0 {
                inner.in_flight.remove(&token_id);
            }
            return Admission::Throttled;
        }
        *running += 1;
        Admission::Verify(Attempt {
            failures: self,
            token_id,
        })
    }

    pub(crate) fn record(&self, token_id: Uuid, digest: Digest) {
        let mut inner = self.lock();
        let map = &mut inner.windows;
        match map.get_mut(&token_id) {
            Some(window) if window.started.elapsed() < self.limits.window => {
                window.failures = window.failures.saturating_add(1);
                if window.recent.len() == REMEMBERED_WRONG_SECRETS {
                    window.recent.pop_front();
                }
                window.recent.push_back(digest);
            }
            _ => map.insert(
                token_id,
                Window {
                    started: Instant::now(),
                    failures: 1,
                    recent: VecDeque::from([digest]),
                },
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_depend_on_every_input_and_the_key() {
        let d = Digester::new();
        let id = Uuid::new_v4();
        let base = d.digest(id, "$hash", "secret");
        assert_eq!(base, d.digest(id, "$hash", "secret"));
        assert_ne!(base, d.digest(Uuid::new_v4(), "$hash", "secret"));
        assert_ne!(base, d.digest(id, "$hash2", "secret"));
        assert_ne!(base, d.digest(id, "$hash", "secret2"));
        // Moving bytes between the hash and the secret changes the digest.
        assert_ne!(base, d.digest(id, "$hashs", "ecret"));
        assert_ne!(base, Digester::new().digest(id, "$hash", "secret"));
    }

    #[test]
    fn successes_match_only_the_remembered_digest() {
        let d = Digester::new();
        let successes = Successes::new(10);
        let id = Uuid::new_v4();
        successes.insert(id, d.digest(id, "h", "right"));
        assert!(successes.contains(id, &d.digest(id, "h", "right")));
        assert!(!successes.contains(id, &d.digest(id, "h", "wrong")));
        assert!(!successes.contains(Uuid::new_v4(), &d.digest(id, "h", "right")));
    }

    #[test]
    fn the_success_cache_is_bounded() {
        let successes = Successes::new(3);
        let ids: Vec<Uuid> = (0..5).map(|_| Uuid::new_v4()).collect();
        for id in &ids {
            successes.insert(*id, [1; 32]);
        }
        assert_eq!(successes.len(), 3);
        assert!(!successes.contains(ids[0], &[1; 32]));
        assert!(!successes.contains(ids[1], &[1; 32]));
        assert!(successes.contains(ids[4], &[1; 32]));
        // Replacing an entry does not grow the cache.
        successes.insert(ids[4], [2; 32]);
        assert_eq!(successes.len(), 3);
        assert!(successes.contains(ids[4], &[2; 32]));
    }

    #[test]
    fn failures_remember_wrong_secrets_and_throttle() {
        let failures = Failures::new(FailureLimits {
            window: Duration::from_secs(60),
            max_failures: 3,
            capacity: 10,
        });
        let id = Uuid::new_v4();
        assert!(matches!(failures.admit(id, &[1; 32]), Admission::Verify(_)));
        failures.record(id, [1; 32]);
        assert!(matches!(
            failures.admit(id, &[1; 32]),
            Admission::KnownWrong
        ));
        assert!(matches!(failures.admit(id, &[2; 32]), Admission::Verify(_)));
        failures.record(id, [2; 32]);
        failures.record(id, [3; 32]);
        assert!(matches!(failures.admit(id, &[4; 32]), Admission::Throttled));
        assert!(matches!(
            failures.admit(Uuid::new_v4(), &[4; 32]),
            Admission::Verify(_)
        ));
    }

    #[test]
    fn verifications_in_progress_count_against_the_limit() {
        let failures = Failures::new(FailureLimits {
            window: Duration::from_secs(60),
            max_failures: 3,
            capacity: 10,
        });
        let id = Uuid::new_v4();
        let running: Vec<Admission<'_>> = (1..=3u8).map(|n| failures.admit(id, &[n; 32])).collect();
        assert!(running.iter().all(|a| matches!(a, Admission::Verify(_))));
        assert!(
            matches!(failures.admit(id, &[4; 32]), Admission::Throttled),
            "three secrets still being hashed use up the budget"
        );
        assert!(matches!(
            failures.admit(Uuid::new_v4(), &[4; 32]),
            Admission::Verify(_)
        ));
        drop(running);
        assert!(matches!(failures.admit(id, &[4; 32]), Admission::Verify(_)));
        assert!(
            failures.lock().in_flight.is_empty(),
            "ended attempts leave no entry"
        );
    }

    #[test]
    fn failures_are_forgotten_after_the_window() {
        let failures = Failures::new(FailureLimits {
            window: Duration::ZERO,
            max_failures: 1,
            capacity: 10,
        });
        let id = Uuid::new_v4();
        failures.record(id, [1; 32]);
        assert!(matches!(failures.admit(id, &[1; 32]), Admission::Verify(_)));
        assert!(matches!(failures.admit(id, &[2; 32]), Admission::Verify(_)));
    }
}
