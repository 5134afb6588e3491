//! What one process remembers about secrets it has checked: successes (so Argon2 runs once
//! per token and secret) and recent failures (so a leaked token id cannot become a CPU burner).
//!
//! Nothing here stores a secret. Both caches hold HMAC-SHA256 digests under a key drawn at
//! start and never written anywhere, so a memory dump reveals no usable secret either.
//! Neither can turn a failure into a success: a success still needs the digest of the exact
//! secret, and the caller reads the token row (revocation, expiry) before asking.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;
use uuid::Uuid;

/// A keyed digest of one (token id, secret) pair.
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

    /// Computed before the token row is read, so that a remembered success decides the lane.
    /// A token's stored hash never changes (no call re-issues a secret under the same id), so
    /// the pair names the secret as well as the triple would.
    pub(crate) fn digest(&self, token_id: Uuid, secret: &str) -> Digest {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.key) else {
            unreachable!("HMAC takes keys of any length")
        };
        mac.update(token_id.as_bytes());
        mac.update(secret.as_bytes());
        mac.finalize().into_bytes().into()
    }
}

/// Equality that takes the same time wherever the first difference is.
fn same(a: &Digest, b: &Digest) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A map of at most `capacity` entries that forgets the oldest insertion first.
pub(crate) struct Bounded<V> {
    entries: HashMap<Uuid, V>,
    order: VecDeque<Uuid>,
    capacity: usize,
}

impl<V> Bounded<V> {
    pub(crate) fn new(capacity: usize) -> Bounded<V> {
        Bounded {
            entries: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    pub(crate) fn get_mut(&mut self, key: &Uuid) -> Option<&mut V> {
        self.entries.get_mut(key)
    }

    /// Entries are replaced in place and never removed one by one, so `order` always holds
    /// exactly the keys of `entries`.
    pub(crate) fn insert(&mut self, key: Uuid, value: V) {
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

/// How wrong secrets are remembered and how much hashing never-seen secrets may cost.
///
/// Wrong secrets are remembered by what was tried, the digest of (token id, secret), never by
/// token id alone: a flood of wrong secrets on a token id cannot lock out its right secret.
/// What bounds the flood instead is the hashing budget, global and shared fairly between the
/// orgs asking (see `budget`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureLimits {
    /// How long a wrong secret is remembered (refused again without hashing).
    pub window: Duration,
    /// Most wrong secrets remembered at once. It is also the budget of never-seen secrets per
    /// `window`: a verification starts only while remembered wrong secrets and verifications
    /// under way number fewer than this, so the memory never overflows and nothing in it is
    /// ever pushed out early, however many token ids a flood cycles through.
    pub capacity: usize,
    /// Most verifications of never-seen secrets waiting for or running Argon2 at once; more
    /// are refused as busy (retryable, never "invalid"). One token id may hold at most half of
    /// them, and while several orgs ask, one org at most this over their number: a flood on
    /// one org's ids leaves room for the first use of every other org's token.
    pub max_pending: usize,
    /// Cold validations (secrets not remembered as successes) started per second, in turns
    /// fair between orgs; see `pacer`.
    pub cold_rate: u32,
}

/// Defaults: wrong secrets remembered for a minute, at most 50,000 of them (so at most 50,000
/// never-seen secrets hashed per minute, ~830 a second), 256 verifications pending, 1,000 cold
/// validations started a second.
impl Default for FailureLimits {
    fn default() -> Self {
        FailureLimits {
            window: Duration::from_secs(60),
            capacity: 50_000,
            max_pending: 256,
            cold_rate: super::pacer::DEFAULT_COLD_RATE,
        }
    }
}

impl FailureLimits {
    pub(crate) fn max_pending_per_id(&self) -> usize {
        (self.max_pending / 2).max(1)
    }
}

/// What the memory says of a secret that is not a remembered success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recall {
    /// Not tried lately, and there is room to remember it should it be wrong: check it.
    Unknown,
    /// This exact secret failed moments ago: refuse without hashing.
    KnownWrong,
    /// The memory could not take its verdict: refuse without hashing, as a retryable fault.
    Full,
}

/// Wrong secrets remembered for a window.
#[derive(Debug)]
pub(crate) struct Failures {
    limits: FailureLimits,
    inner: Mutex<Wrong>,
}

struct Wrong {
    /// Remembered wrong digests and when each is forgotten.
    until: HashMap<Digest, Instant>,
    /// The same digests in the order they expire (all share one window).
    expiry: VecDeque<(Instant, Digest)>,
}

impl std::fmt::Debug for Wrong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wrong")
            .field("remembered", &self.until.len())
            .finish_non_exhaustive()
    }
}

impl Wrong {
    fn forget_expired(&mut self, now: Instant) {
        while let Some((at, digest)) = self.expiry.front().copied() {
            if at > now {
                break;
            }
            self.expiry.pop_front();
            if self.until.get(&digest).is_some_and(|until| *until == at) {
                self.until.remove(&digest);
            }
        }
    }
}

impl Failures {
    pub(crate) fn new(limits: FailureLimits) -> Arc<Failures> {
        Arc::new(Failures {
            limits,
            inner: Mutex::new(Wrong {
                until: HashMap::new(),
                expiry: VecDeque::new(),
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Wrong> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What is known of `digest`, with `pending` verifications under way that may each need
    /// a place: there is room for a new one only while the two together number fewer than
    /// the capacity, so the memory never overflows and nothing in it is pushed out early.
    pub(crate) fn recall(&self, digest: &Digest, pending: usize) -> Recall {
        let mut wrong = self.lock();
        wrong.forget_expired(Instant::now());
        if wrong.until.contains_key(digest) {
            Recall::KnownWrong
        } else if wrong.until.len() + pending >= self.limits.capacity {
            Recall::Full
        } else {
            Recall::Unknown
        }
    }

    /// Remembers a wrong secret for the window. Admission keeps the memory under its capacity,
    /// so this never has to push anything out.
    pub(crate) fn record(&self, digest: Digest) {
        let mut wrong = self.lock();
        let until = Instant::now() + self.limits.window;
        wrong.until.insert(digest, until);
        wrong.expiry.push_back((until, digest));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_depend_on_every_input_and_the_key() {
        let d = Digester::new();
        let id = Uuid::new_v4();
        let base = d.digest(id, "secret");
        assert_eq!(base, d.digest(id, "secret"));
        assert_ne!(base, d.digest(Uuid::new_v4(), "secret"));
        assert_ne!(base, d.digest(id, "secret2"));
        assert_ne!(base, Digester::new().digest(id, "secret"));
    }

    #[test]
    fn successes_match_only_the_remembered_digest() {
        let d = Digester::new();
        let successes = Successes::new(10);
        let id = Uuid::new_v4();
        successes.insert(id, d.digest(id, "right"));
        assert!(successes.contains(id, &d.digest(id, "right")));
        assert!(!successes.contains(id, &d.digest(id, "wrong")));
        assert!(!successes.contains(Uuid::new_v4(), &d.digest(id, "right")));
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

    fn limits(capacity: usize) -> FailureLimits {
        FailureLimits {
            window: Duration::from_secs(60),
            capacity,
            ..FailureLimits::default()
        }
    }

    #[test]
    fn wrong_secrets_are_refused_by_digest_and_never_lock_out_the_token_id() {
        let failures = Failures::new(limits(100));
        for n in 1..=20u8 {
            assert_eq!(failures.recall(&[n; 32], 0), Recall::Unknown);
            failures.record([n; 32]);
            assert_eq!(failures.recall(&[n; 32], 0), Recall::KnownWrong);
        }
        // Twenty wrong secrets later, a secret never tried is still checked.
        assert_eq!(failures.recall(&[99; 32], 0), Recall::Unknown);
    }

    #[test]
    fn a_full_memory_refuses_new_secrets_instead_of_forgetting_old_ones() {
        let failures = Failures::new(limits(3));
        for n in 1..=2u8 {
            failures.record([n; 32]);
        }
        // One place left, and one verification under way may need it.
        assert_eq!(failures.recall(&[4; 32], 1), Recall::Full);
        assert_eq!(failures.recall(&[4; 32], 0), Recall::Unknown);
        failures.record([3; 32]);
        assert_eq!(failures.recall(&[4; 32], 0), Recall::Full);
        for n in 1..=3u8 {
            assert_eq!(failures.recall(&[n; 32], 0), Recall::KnownWrong);
        }
    }

    #[test]
    fn wrong_secrets_are_forgotten_after_the_window() {
        let failures = Failures::new(FailureLimits {
            window: Duration::ZERO,
            ..limits(1)
        });
        failures.record([1; 32]);
        assert_eq!(failures.recall(&[1; 32], 0), Recall::Unknown);
        assert_eq!(failures.lock().until.len(), 0);
    }
}
