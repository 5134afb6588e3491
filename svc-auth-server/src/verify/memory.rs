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

/// How wrong secrets are remembered and how much hashing never-seen secrets may cost.
///
/// Wrong secrets are remembered by what was tried, the digest of (token id, secret), never by
/// token id alone: a flood of wrong secrets on a token id cannot lock out its right secret.
/// What bounds the flood instead is the hashing budget, global and shared by every token id.
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
    /// them, so a flood on one id leaves room for the first use of every other token.
    pub max_pending: usize,
    /// Cold validations (secrets not remembered as successes) started per second, first come
    /// first served; see `pacer`.
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
    fn max_pending_per_id(&self) -> usize {
        (self.max_pending / 2).max(1)
    }
}

/// What to do with a secret that is not a remembered success.
#[derive(Debug)]
pub(crate) enum Admission {
    /// Verify it with Argon2, holding the ticket until the verdict is recorded.
    Verify(Ticket),
    /// This exact secret failed moments ago: refuse without hashing.
    KnownWrong,
    /// The hashing budget is spent: refuse without hashing, as a retryable fault.
    Busy,
}

/// A verification admitted and not yet decided. It holds its place in the budget until
/// dropped, which the verification does only after recording its verdict, wherever its caller
/// has gone meanwhile.
#[derive(Debug)]
pub(crate) struct Ticket {
    failures: Arc<Failures>,
    token_id: Uuid,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = self.failures.lock();
        state.pending = state.pending.saturating_sub(1);
        if let Some(count) = state.pending_by_id.get_mut(&self.token_id) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                state.pending_by_id.remove(&self.token_id);
            }
        }
    }
}

/// Wrong secrets remembered for a window, and the verifications under way.
#[derive(Debug)]
pub(crate) struct Failures {
    limits: FailureLimits,
    inner: Mutex<FailureState>,
}

struct FailureState {
    /// Remembered wrong digests and when each is forgotten.
    wrong: HashMap<Digest, Instant>,
    /// The same digests in the order they expire (all share one window).
    expiry: VecDeque<(Instant, Digest)>,
    pending: usize,
    pending_by_id: HashMap<Uuid, usize>,
}

impl std::fmt::Debug for FailureState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FailureState")
            .field("wrong", &self.wrong.len())
            .field("pending", &self.pending)
            .finish_non_exhaustive()
    }
}

impl FailureState {
    fn forget_expired(&mut self, now: Instant) {
        while let Some((at, digest)) = self.expiry.front().copied() {
            if at > now {
                break;
            }
            self.expiry.pop_front();
            if self.wrong.get(&digest).is_some_and(|until| *until == at) {
                self.wrong.remove(&digest);
            }
        }
    }
}

impl Failures {
    pub(crate) fn new(limits: FailureLimits) -> Arc<Failures> {
        Arc::new(Failures {
            limits,
            inner: Mutex::new(FailureState {
                wrong: HashMap::new(),
                expiry: VecDeque::new(),
                pending: 0,
                pending_by_id: HashMap::new(),
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FailureState> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn admit(self: &Arc<Self>, token_id: Uuid, digest: &Digest) -> Admission {
        let limits = self.limits;
        let mut state = self.lock();
        let now = Instant::now();
        state.forget_expired(now);
        if state.wrong.contains_key(digest) {
            return Admission::KnownWrong;
        }
        let for_id = state.pending_by_id.get(&token_id).copied().unwrap_or(0);
        if state.pending >= limits.max_pending
            || for_id >= limits.max_pending_per_id()
            || state.wrong.len() + state.pending >= limits.capacity
        {
            return Admission::Busy;
        }
        state.pending += 1;
        *state.pending_by_id.entry(token_id).or_insert(0) += 1;
        Admission::Verify(Ticket {
            failures: Arc::clone(self),
            token_id,
        })
    }

    /// Remembers a wrong secret for the window. Admission keeps the memory under its capacity,
    /// so this never has to push anything out.
    pub(crate) fn record(&self, digest: Digest) {
        let mut state = self.lock();
        let until = Instant::now() + self.limits.window;
        state.wrong.insert(digest, until);
        state.expiry.push_back((until, digest));
    }

    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.lock().pending
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

    fn limits(capacity: usize, max_pending: usize) -> FailureLimits {
        FailureLimits {
            window: Duration::from_secs(60),
            capacity,
            max_pending,
            cold_rate: super::super::pacer::DEFAULT_COLD_RATE,
        }
    }

    #[test]
    fn wrong_secrets_are_refused_by_digest_and_never_lock_out_the_token_id() {
        let failures = Failures::new(limits(100, 8));
        let id = Uuid::new_v4();
        for n in 1..=20u8 {
            let Admission::Verify(ticket) = failures.admit(id, &[n; 32]) else {
                panic!("a new secret for a flooded id was not admitted");
            };
            failures.record([n; 32]);
            drop(ticket);
            assert!(matches!(
                failures.admit(id, &[n; 32]),
                Admission::KnownWrong
            ));
        }
        // Twenty wrong secrets later, a secret never tried is still verified.
        assert!(matches!(
            failures.admit(id, &[99; 32]),
            Admission::Verify(_)
        ));
    }

    #[test]
    fn pending_verifications_are_bounded_globally_and_per_id() {
        let failures = Failures::new(limits(100, 4));
        let id = Uuid::new_v4();
        let first: Vec<Admission> = (1..=2u8).map(|n| failures.admit(id, &[n; 32])).collect();
        assert!(first.iter().all(|a| matches!(a, Admission::Verify(_))));
        assert!(
            matches!(failures.admit(id, &[3; 32]), Admission::Busy),
            "one id holds at most half of the pending budget"
        );
        let others: Vec<Admission> = (4..=5u8)
            .map(|n| failures.admit(Uuid::new_v4(), &[n; 32]))
            .collect();
        assert!(others.iter().all(|a| matches!(a, Admission::Verify(_))));
        assert!(matches!(
            failures.admit(Uuid::new_v4(), &[6; 32]),
            Admission::Busy
        ));
        drop(first);
        drop(others);
        assert_eq!(failures.pending(), 0);
        assert!(
            failures.lock().pending_by_id.is_empty(),
            "ended tickets leave nothing"
        );
        assert!(matches!(failures.admit(id, &[3; 32]), Admission::Verify(_)));
    }

    #[test]
    fn a_full_memory_refuses_new_secrets_instead_of_forgetting_old_ones() {
        let failures = Failures::new(limits(3, 8));
        for n in 1..=3u8 {
            let ticket = failures.admit(Uuid::new_v4(), &[n; 32]);
            assert!(matches!(ticket, Admission::Verify(_)));
            failures.record([n; 32]);
        }
        assert!(matches!(
            failures.admit(Uuid::new_v4(), &[4; 32]),
            Admission::Busy
        ));
        for n in 1..=3u8 {
            assert!(matches!(
                failures.admit(Uuid::new_v4(), &[n; 32]),
                Admission::KnownWrong
            ));
        }
    }

    #[test]
    fn wrong_secrets_are_forgotten_after_the_window() {
        let failures = Failures::new(FailureLimits {
            window: Duration::ZERO,
            ..limits(1, 8)
        });
        let id = Uuid::new_v4();
        failures.record([1; 32]);
        assert!(matches!(failures.admit(id, &[1; 32]), Admission::Verify(_)));
        assert_eq!(failures.lock().wrong.len(), 0);
    }
}
