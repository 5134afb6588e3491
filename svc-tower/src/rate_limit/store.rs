use std::sync::Arc;

use uuid::Uuid;

use crate::store::StoreFuture;

/// The outcome of one rate-limit check, with what the `X-RateLimit-*` headers report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// The org's limit, in requests per minute.
    pub limit: u32,
    /// How many more requests would be allowed right now.
    pub remaining: u32,
    /// Seconds until the org's allowance is whole again (rounded up).
    pub reset_after_secs: u64,
    /// Seconds until the next request would be allowed (rounded up; 0 when allowed).
    pub retry_after_secs: u64,
}

/// The requests a call counts against the rate limits when its reservation counts them too
/// (see [`TokenBudgetStore::reserve_counting`](super::TokenBudgetStore::reserve_counting)): its org's, and its token's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestCount {
    /// The org counted against.
    pub org_id: Uuid,
    /// The org's requests per minute.
    pub limit: u32,
    /// The token and its own requests per minute, when it has a limit of its own.
    pub token: Option<(Uuid, u32)>,
}

/// Where the per-org request counts live.
///
/// One call is one request: the store records it and decides, atomically. The shipped stores
/// all implement GCRA (see `RedisRateLimitStore`), so a
/// single-process and a shared deployment behave alike.
pub trait RateLimitStore: Send + Sync + 'static {
    /// Counts one request of `org_id` against `limit` requests per minute and decides.
    fn check(&self, org_id: Uuid, limit: u32) -> StoreFuture<Decision>;

    /// Counts one request of `token_id`, a token of `org_id`, against the token's own `limit`
    /// requests per minute. The shipped stores count it beside the org's (in the org's hash
    /// slot, in Redis); the default counts nothing, leaving the org's limit alone to apply.
    fn check_token(&self, org_id: Uuid, token_id: Uuid, limit: u32) -> StoreFuture<Decision> {
        let _ = (org_id, token_id);
        Box::pin(std::future::ready(Ok(Decision::unmetered(limit))))
    }

    /// Whether [`refund`](Self::refund) gives back what `check` counted. Only a store that
    /// can give back may decide before it is known whether the request will be served (see
    /// [`EarlyRateLimit`](super::EarlyRateLimit)); the default cannot.
    fn refunds(&self) -> bool {
        false
    }

    /// Gives back one request of `org_id` that `check` allowed against `limit` but that was
    /// never served, as if it had not been counted. The default gives back nothing.
    fn refund(&self, org_id: Uuid, limit: u32) -> StoreFuture<()> {
        let _ = (org_id, limit);
        Box::pin(std::future::ready(Ok(())))
    }

    /// Counts one request of `token_id` against both its org's `limit` and the token's own
    /// `token_limit`, as [`check`](Self::check) and [`check_token`](Self::check_token) would:
    /// the org's decision, then the token's. A store that can decide both in one round trip
    /// does (Redis: one script over both keys); the default asks both at once.
    fn check_with_token(
        &self,
        org_id: Uuid,
        limit: u32,
        token_id: Uuid,
        token_limit: u32,
    ) -> StoreFuture<(Decision, Decision)> {
        let org = self.check(org_id, limit);
        let token = self.check_token(org_id, token_id, token_limit);
        Box::pin(async move {
            let (org, token) = futures_util::future::join(org, token).await;
            Ok((org?, token?))
        })
    }

    /// [`refund`](Self::refund) for what `check_token` allowed.
    fn refund_token(&self, org_id: Uuid, token_id: Uuid, limit: u32) -> StoreFuture<()> {
        let _ = (org_id, token_id, limit);
        Box::pin(std::future::ready(Ok(())))
    }
}

/// A store behind a pointer is the store.
macro_rules! forward_store {
    ($($pointer:ident),+) => {$(
        impl<S: RateLimitStore + ?Sized> RateLimitStore for $pointer<S> {
            fn check(&self, org_id: Uuid, limit: u32) -> StoreFuture<Decision> {
                (**self).check(org_id, limit)
            }

            fn check_token(
                &self,
                org_id: Uuid,
                token_id: Uuid,
                limit: u32,
            ) -> StoreFuture<Decision> {
                (**self).check_token(org_id, token_id, limit)
            }

            fn check_with_token(
                &self,
                org_id: Uuid,
                limit: u32,
                token_id: Uuid,
                token_limit: u32,
            ) -> StoreFuture<(Decision, Decision)> {
                (**self).check_with_token(org_id, limit, token_id, token_limit)
            }

            fn refunds(&self) -> bool {
                (**self).refunds()
            }

            fn refund(&self, org_id: Uuid, limit: u32) -> StoreFuture<()> {
                (**self).refund(org_id, limit)
            }

            fn refund_token(&self, org_id: Uuid, token_id: Uuid, limit: u32) -> StoreFuture<()> {
                (**self).refund_token(org_id, token_id, limit)
            }
        }
    )+};
}

forward_store!(Arc, Box);

/// Allows everything: the limiter used when no `REDIS_URL` is configured.
///
/// Its decisions still carry the limit, so the `X-RateLimit-*` headers stay truthful about
/// the configured value while nothing is counted.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopRateLimitStore;

impl RateLimitStore for NoopRateLimitStore {
    fn check(&self, _org_id: Uuid, limit: u32) -> StoreFuture<Decision> {
        Box::pin(std::future::ready(Ok(Decision::unmetered(limit))))
    }
}

impl Decision {
    /// The stricter of two decisions on one request: a refusal (the longer wait, when both
    /// refuse), else the one with fewer requests left (the smaller limit on a tie).
    pub fn stricter(self, other: Decision) -> Decision {
        let key = |d: &Decision| {
            (
                d.allowed,
                std::cmp::Reverse(d.retry_after_secs),
                d.remaining,
                d.limit,
            )
        };
        if key(&other) < key(&self) {
            other
        } else {
            self
        }
    }

    /// The decision when nothing is counted: allowed, with the whole limit remaining.
    pub(crate) fn unmetered(limit: u32) -> Decision {
        Decision {
            allowed: true,
            limit,
            remaining: limit,
            reset_after_secs: 0,
            retry_after_secs: 0,
        }
    }
}

/// The Generic Cell Rate Algorithm, in whole microseconds, shared by every store.
///
/// An org may send `limit` requests at once; after that one request every `PERIOD / limit`.
/// The only state is the org's theoretical arrival time (TAT): when its allowance would be
/// whole again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gcra {
    limit: u64,
    interval_us: u64,
}

pub(crate) const PERIOD_US: u64 = 60_000_000;

impl Gcra {
    pub(crate) fn new(limit: u32) -> Gcra {
        let limit = u64::from(limit.max(1));
        Gcra {
            limit,
            interval_us: (PERIOD_US / limit).max(1),
        }
    }

    /// Microseconds between two requests at the sustained rate.
    #[cfg(feature = "redis")]
    pub(crate) fn interval_us(&self) -> u64 {
        self.interval_us
    }

    /// Requests at once (at least one).
    #[cfg(feature = "redis")]
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }

    /// The decision from how far the TAT is ahead of now, as the Redis script answers it: the
    /// new TAT when allowed (positive), `-1 -` the stored one when refused.
    #[cfg(feature = "redis")]
    pub(crate) fn answer(&self, ahead: i64) -> Decision {
        if ahead > 0 {
            self.allowed(ahead.unsigned_abs())
        } else {
            self.refused(ahead.unsigned_abs().saturating_sub(1))
        }
    }

    /// The TAT after giving back one allowed request at `now`; `None` when the allowance is
    /// whole again, which is the same as no TAT at all.
    pub(crate) fn give_back(&self, stored_tat: u64, now: u64) -> Option<u64> {
        Some(stored_tat.saturating_sub(self.interval_us)).filter(|tat| *tat > now)
    }

    /// Decides one request at `now`; returns the new TAT to store when it is allowed.
    pub(crate) fn decide(&self, stored_tat: Option<u64>, now: u64) -> (Option<u64>, Decision) {
        let tat = stored_tat.unwrap_or(now).max(now);
        let new_tat = tat + self.interval_us;
        if new_tat > now + self.capacity_us() {
            return (None, self.refused(tat - now));
        }
        (Some(new_tat), self.allowed(new_tat - now))
    }

    /// An allowed request, with its new TAT `reset_us` ahead of now.
    pub(crate) fn allowed(&self, reset_us: u64) -> Decision {
        let remaining = self.capacity_us().saturating_sub(reset_us) / self.interval_us;
        decision_from_micros(true, self.limit, remaining, reset_us, 0)
    }

    /// A refused request, the stored TAT `reset_us` ahead of now: the next request fits once
    /// one more interval fits in the capacity.
    pub(crate) fn refused(&self, reset_us: u64) -> Decision {
        let retry_us = (reset_us + self.interval_us).saturating_sub(self.capacity_us());
        decision_from_micros(false, self.limit, 0, reset_us, retry_us)
    }

    fn capacity_us(&self) -> u64 {
        self.interval_us * self.limit
    }
}

/// Builds a decision from microsecond figures.
fn decision_from_micros(
    allowed: bool,
    limit: u64,
    remaining: u64,
    reset_us: u64,
    retry_us: u64,
) -> Decision {
    Decision {
        allowed,
        limit: u32::try_from(limit).unwrap_or(u32::MAX),
        remaining: u32::try_from(remaining).unwrap_or(u32::MAX),
        reset_after_secs: reset_us.div_ceil(1_000_000),
        // A refused client told "retry in 0 s" would spin; one second is the floor.
        retry_after_secs: if allowed {
            0
        } else {
            retry_us.div_ceil(1_000_000).max(1)
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_exactly_the_limit_passes() {
        let gcra = Gcra::new(5);
        let mut tat = None;
        let now = 1_000_000_000;
        for expected_remaining in (0..5).rev() {
            let (new_tat, decision) = gcra.decide(tat, now);
            assert!(decision.allowed);
            assert_eq!(decision.remaining, expected_remaining);
            tat = new_tat;
        }
        let (new_tat, decision) = gcra.decide(tat, now);
        assert!(!decision.allowed);
        assert_eq!(new_tat, None);
        assert_eq!(decision.retry_after_secs, 12);
        assert_eq!(decision.reset_after_secs, 60);
    }

    #[test]
    fn one_request_comes_back_per_interval() {
        let gcra = Gcra::new(60);
        let mut tat = None;
        let mut now = 0;
        for _ in 0..60 {
            tat = gcra.decide(tat, now).0;
        }
        assert!(!gcra.decide(tat, now).1.allowed);
        now += 999_999;
        assert!(!gcra.decide(tat, now).1.allowed);
        now += 1;
        let (next, decision) = gcra.decide(tat, now);
        assert!(decision.allowed);
        assert_eq!(decision.remaining, 0);
        assert!(!gcra.decide(next, now).1.allowed);
    }

    #[test]
    fn a_request_given_back_is_as_if_never_counted() {
        let gcra = Gcra::new(3);
        let now = 5_000_000;
        let (first, _) = gcra.decide(None, now);
        let (second, decision) = gcra.decide(first, now);
        assert_eq!(decision.remaining, 1);
        let given_back = second.and_then(|tat| gcra.give_back(tat, now));
        assert_eq!(given_back, first);
        assert_eq!(gcra.decide(given_back, now).1.remaining, 1);
        assert_eq!(first.and_then(|tat| gcra.give_back(tat, now)), None);
    }

    #[test]
    fn a_zero_limit_is_treated_as_one() {
        let gcra = Gcra::new(0);
        let (tat, first) = gcra.decide(None, 0);
        assert!(first.allowed);
        assert!(!gcra.decide(tat, 0).1.allowed);
    }
}
