//! Tokens per minute: a call reserves its estimated tokens before it runs and settles to what
//! it really used afterwards, against its org's allowance and its token's own, atomically.
//!
//! The allowance is GCRA with a cost: `limit` tokens a minute, refilled continuously, and a
//! call of `n` tokens moves the bucket's theoretical arrival time (TAT) by `n` times
//! `60 s / limit`. A reservation passes only when it fits every bucket it draws on (the org's,
//! and the token's when it has a limit), and then is taken from all of them at once, so
//! concurrent calls, on any number of replicas sharing the store, cannot together overshoot
//! a limit by more than one call's misestimate. A call larger than a whole limit is charged as
//! the whole limit, so it can pass when the bucket is full rather than never.
//!
//! Settling moves the buckets by `used - reserved`: an estimate that was high gives the rest
//! back at once (never beyond a full bucket), one that was low is owed by the calls after it,
//! up to one window of the limit (an empty bucket): a single overshoot can cost the org the
//! next minute, never more.
//!
//! This is a store, not a layer, on purpose: what a call will cost is known only once its body
//! is parsed, and what it cost only once its answer (or its stream) has ended, both of which
//! are the service's business. The svc gateway reserves and settles around its provider call;
//! a service of yours does the same around whatever it meters.
//!
//! ```
//! use svc_tower::rate_limit::{MemoryTokenBudgetStore, TokenBudget, TokenBudgetStore};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let store = MemoryTokenBudgetStore::new();
//! let budget = TokenBudget::org(uuid::Uuid::new_v4(), 1_000).with_token(uuid::Uuid::new_v4(), Some(300));
//! let first = store.reserve(budget, 200).await.unwrap();
//! assert!(first.allowed);
//! assert_eq!((first.limit, first.remaining), (300, 100)); // the token's limit is the stricter
//! assert!(!store.reserve(budget, 200).await.unwrap().allowed);
//! // The first call used 50 tokens, not 200: the rest comes back.
//! store.settle(budget, 200, 50).await.unwrap();
//! assert!(store.reserve(budget, 200).await.unwrap().allowed);
//! # }
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use http::{HeaderMap, HeaderName, HeaderValue};
use tokio::time::Instant;
use uuid::Uuid;

use super::caps::{self, CapCharge, CapState, MemoryCaps, SpendCap};
use super::layer::openai_duration;
use super::store::{Decision, RequestCount};
use crate::error::{ApiError, ErrorCode};
use crate::store::{StoreError, StoreFuture};

/// `x-ratelimit-limit-tokens`: the binding tokens-per-minute limit, as OpenAI's API names it.
pub(crate) static X_RATELIMIT_LIMIT_TOKENS: HeaderName =
    HeaderName::from_static("x-ratelimit-limit-tokens");
/// `x-ratelimit-remaining-tokens`: tokens still available right now under that limit.
pub(crate) static X_RATELIMIT_REMAINING_TOKENS: HeaderName =
    HeaderName::from_static("x-ratelimit-remaining-tokens");
/// `x-ratelimit-reset-tokens`: when that allowance is whole again, as OpenAI writes it (`6m0s`).
pub(crate) static X_RATELIMIT_RESET_TOKENS: HeaderName =
    HeaderName::from_static("x-ratelimit-reset-tokens");

/// What one call draws on: its org's tokens per minute and its token's own, where set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBudget {
    /// The org.
    pub org_id: Uuid,
    /// The org's tokens per minute; `None` is no org limit.
    pub org_limit: Option<u64>,
    /// The calling token.
    pub token_id: Uuid,
    /// The token's own tokens per minute; `None` is no limit of its own.
    pub token_limit: Option<u64>,
}

impl TokenBudget {
    /// The org's allowance alone.
    pub fn org(org_id: Uuid, limit: u64) -> TokenBudget {
        TokenBudget {
            org_id,
            org_limit: Some(limit),
            token_id: Uuid::nil(),
            token_limit: None,
        }
    }

    /// The same budget, drawing on `token_id`'s own allowance too when it has a limit.
    pub fn with_token(mut self, token_id: Uuid, limit: Option<u64>) -> TokenBudget {
        self.token_id = token_id;
        self.token_limit = limit;
        self
    }

    /// The answer when nothing is counted (no store, or a failed one): allowed, the whole of
    /// the strictest limit remaining.
    pub fn unmetered(&self) -> TokenDecision {
        let limit = self
            .limits()
            .into_iter()
            .filter(|l| *l > 0)
            .min()
            .unwrap_or(0);
        TokenDecision::unmetered(limit)
    }

    /// Whether any limit applies at all.
    pub fn is_limited(&self) -> bool {
        self.org_limit.is_some() || self.token_limit.is_some()
    }

    /// The limits of the org's bucket and the token's, 0 where none.
    pub(crate) fn limits(&self) -> [u64; 2] {
        [self.org_limit.unwrap_or(0), self.token_limit.unwrap_or(0)]
    }
}

/// The outcome of a reservation or a settlement: the binding bucket's figures, for the
/// `x-ratelimit-*-tokens` headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenDecision {
    /// Whether the reservation was taken (a settlement is always applied).
    pub allowed: bool,
    /// The binding limit, in tokens per minute.
    pub limit: u64,
    /// Tokens still available right now in the binding bucket.
    pub remaining: u64,
    /// Seconds until the binding bucket is full again (rounded up).
    pub reset_after_secs: u64,
    /// Seconds until the refused reservation would fit (rounded up, at least 1; 0 when
    /// allowed).
    pub retry_after_secs: u64,
}

impl TokenDecision {
    /// Writes the three `x-ratelimit-*-tokens` headers.
    pub fn set_headers(&self, headers: &mut HeaderMap) {
        headers.insert(
            X_RATELIMIT_LIMIT_TOKENS.clone(),
            HeaderValue::from(self.limit),
        );
        headers.insert(
            X_RATELIMIT_REMAINING_TOKENS.clone(),
            HeaderValue::from(self.remaining),
        );
        if let Ok(reset) = HeaderValue::try_from(openai_duration(self.reset_after_secs)) {
            headers.insert(X_RATELIMIT_RESET_TOKENS.clone(), reset);
        }
    }

    /// The 429 `RATE_LIMITED` of a refused reservation, with `Retry-After` and the headers.
    pub fn rejection(&self) -> ApiError {
        let mut headers = HeaderMap::new();
        self.set_headers(&mut headers);
        let mut error =
            ApiError::new(ErrorCode::RateLimited).with_retry_after(self.retry_after_secs);
        for (name, value) in headers {
            if let Some(name) = name {
                error = error.with_header(name, value);
            }
        }
        error
    }

    /// Nothing counted: allowed, the whole `limit` remaining (a store that failed, or none).
    pub fn unmetered(limit: u64) -> TokenDecision {
        TokenDecision {
            allowed: true,
            limit,
            remaining: limit,
            reset_after_secs: 0,
            retry_after_secs: 0,
        }
    }
}

/// The outcome of a reservation with caps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CappedDecision {
    /// Every counter was there: the tokens' decision and each cap's state, in the order the
    /// caps were given. The reservation was taken when the tokens were allowed and every cap
    /// fits, and not at all otherwise.
    Counted {
        /// The token buckets' figures.
        tokens: TokenDecision,
        /// Each cap's counter.
        caps: Vec<CapState>,
    },
    /// These caps' counters are missing (indexes into the caps given) and had no seed: nothing
    /// was taken.
    Missing(Vec<usize>),
}

impl CappedDecision {
    /// Whether the reservation was taken.
    pub fn allowed(&self) -> bool {
        match self {
            CappedDecision::Counted { tokens, caps } => {
                tokens.allowed && caps.iter().all(|cap| cap.fits)
            }
            CappedDecision::Missing(_) => false,
        }
    }
}

/// One call's settlement, kept to go with a later step of its org's (see
/// [`TokenBudgetStore::reserve_correcting`]): what
/// [`settle_capped`](TokenBudgetStore::settle_capped) takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Correction {
    /// The buckets the call drew on.
    pub budget: TokenBudget,
    /// Tokens it reserved.
    pub reserved: u64,
    /// Tokens it used.
    pub used: u64,
    /// Each cap it reserved from, with what it used.
    pub caps: Vec<CapCharge>,
}

/// What [`TokenBudgetStore::reserve_counting`] answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counting {
    /// The request's decision: the stricter of the org's and the token's. `None` when nothing
    /// was counted: a cap's counter is missing (`reserved` says which), and the call is asked
    /// again once it is seeded.
    pub requests: Option<Decision>,
    /// The reservation's, unless a request was refused (then nothing was reserved).
    pub reserved: Option<CappedDecision>,
}

/// Where token allowances live. Both calls are atomic over every bucket a budget names.
pub trait TokenBudgetStore: Send + Sync + 'static {
    /// Takes `tokens` from every limited bucket of `budget`, or from none when one cannot
    /// hold them.
    fn reserve(&self, budget: TokenBudget, tokens: u64) -> StoreFuture<TokenDecision>;

    /// Corrects an earlier reservation of `reserved` tokens to the `used` ones.
    fn settle(&self, budget: TokenBudget, reserved: u64, used: u64) -> StoreFuture<TokenDecision>;

    /// Takes `tokens` from every limited bucket of `budget` and each cap's amount from its
    /// counter, all or nothing, in one atomic step (see [`SpendCap`]). A store that
    /// keeps no caps fails when asked for one.
    fn reserve_capped(
        &self,
        budget: TokenBudget,
        tokens: u64,
        caps: Vec<SpendCap>,
    ) -> StoreFuture<CappedDecision> {
        if !caps.is_empty() {
            return no_caps();
        }
        let reserve = self.reserve(budget, tokens);
        Box::pin(async move {
            Ok(CappedDecision::Counted {
                tokens: reserve.await?,
                caps: Vec::new(),
            })
        })
    }

    /// [`settle`](TokenBudgetStore::settle), and corrects each cap's counter by what the call
    /// used, in the same step.
    fn settle_capped(
        &self,
        budget: TokenBudget,
        reserved: u64,
        used: u64,
        caps: Vec<CapCharge>,
    ) -> StoreFuture<TokenDecision> {
        if !caps.is_empty() {
            return no_caps();
        }
        self.settle(budget, reserved, used)
    }

    /// Settles `corrections` (earlier calls of `budget`'s org), then reserves as
    /// [`reserve_capped`](TokenBudgetStore::reserve_capped), in one atomic step where the store
    /// can: a service that holds its settlements until the org's next reservation pays one
    /// round trip for both. A settlement that fails does not stop the reservation.
    fn reserve_correcting(
        &self,
        corrections: Vec<Correction>,
        budget: TokenBudget,
        tokens: u64,
        caps: Vec<SpendCap>,
    ) -> StoreFuture<CappedDecision> {
        after(
            self.correct(corrections),
            self.reserve_capped(budget, tokens, caps),
        )
    }

    /// Whether [`reserve_counting`](TokenBudgetStore::reserve_counting) counts requests; the
    /// default does not.
    fn counts_requests(&self) -> bool {
        false
    }

    /// Counts one request against `requests`' limits as the rate limiter would (each on its
    /// own, kept when allowed), then, when every one is allowed, reserves as
    /// [`reserve_correcting`](TokenBudgetStore::reserve_correcting); the corrections are made
    /// either way. One atomic step: a call under a token limit or a budget pays the store one
    /// round trip for its request and its reservation. The Redis store counts the requests in
    /// the keys a [`RedisRateLimitStore`](super::RedisRateLimitStore) of the same prefix keeps;
    /// a store that counts no requests ([`counts_requests`](Self::counts_requests) false) fails.
    fn reserve_counting(
        &self,
        requests: RequestCount,
        corrections: Vec<Correction>,
        budget: TokenBudget,
        tokens: u64,
        caps: Vec<SpendCap>,
    ) -> StoreFuture<Counting> {
        let _ = (requests, corrections, budget, tokens, caps);
        Box::pin(std::future::ready(Err(StoreError::new(
            "this store counts no requests",
        ))))
    }

    /// Settles `corrections`, those of one org in one step where the store can.
    fn correct(&self, corrections: Vec<Correction>) -> StoreFuture<()> {
        in_order(
            (corrections.into_iter())
                .map(|c| self.settle_capped(c.budget, c.reserved, c.used, c.caps))
                .collect(),
        )
    }
}

/// `next` once `settled` is over, whatever it answered: settlements are made alone, as each
/// would have been, and one that fails does not stop what follows.
pub(crate) fn after<T: Send + 'static>(
    settled: StoreFuture<()>,
    next: StoreFuture<T>,
) -> StoreFuture<T> {
    Box::pin(async move {
        let _ = settled.await;
        next.await
    })
}

/// Runs `steps` one after the other, each whatever the one before answered; fails with the
/// last error, if any.
pub(crate) fn in_order<T: Send + 'static>(steps: Vec<StoreFuture<T>>) -> StoreFuture<()> {
    Box::pin(async move {
        let mut outcome = Ok(());
        for step in steps {
            if let Err(error) = step.await {
                outcome = Err(error);
            }
        }
        outcome
    })
}

/// The answer of a store that keeps no spend caps when asked for one.
fn no_caps<T: Send + 'static>() -> StoreFuture<T> {
    Box::pin(std::future::ready(Err(StoreError::new(
        "this store keeps no spend caps",
    ))))
}

impl<S: TokenBudgetStore + ?Sized> TokenBudgetStore for Arc<S> {
    fn reserve(&self, budget: TokenBudget, tokens: u64) -> StoreFuture<TokenDecision> {
        (**self).reserve(budget, tokens)
    }

    fn settle(&self, budget: TokenBudget, reserved: u64, used: u64) -> StoreFuture<TokenDecision> {
        (**self).settle(budget, reserved, used)
    }

    fn reserve_capped(
        &self,
        budget: TokenBudget,
        tokens: u64,
        caps: Vec<SpendCap>,
    ) -> StoreFuture<CappedDecision> {
        (**self).reserve_capped(budget, tokens, caps)
    }

    fn settle_capped(
        &self,
        budget: TokenBudget,
        reserved: u64,
        used: u64,
        caps: Vec<CapCharge>,
    ) -> StoreFuture<TokenDecision> {
        (**self).settle_capped(budget, reserved, used, caps)
    }

    fn reserve_correcting(
        &self,
        corrections: Vec<Correction>,
        budget: TokenBudget,
        tokens: u64,
        caps: Vec<SpendCap>,
    ) -> StoreFuture<CappedDecision> {
        (**self).reserve_correcting(corrections, budget, tokens, caps)
    }

    fn correct(&self, corrections: Vec<Correction>) -> StoreFuture<()> {
        (**self).correct(corrections)
    }

    fn counts_requests(&self) -> bool {
        (**self).counts_requests()
    }

    fn reserve_counting(
        &self,
        requests: RequestCount,
        corrections: Vec<Correction>,
        budget: TokenBudget,
        tokens: u64,
        caps: Vec<SpendCap>,
    ) -> StoreFuture<Counting> {
        (**self).reserve_counting(requests, corrections, budget, tokens, caps)
    }
}

/// Counts nothing: every reservation passes (no Redis configured).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopTokenBudgetStore;

impl TokenBudgetStore for NoopTokenBudgetStore {
    fn reserve(&self, budget: TokenBudget, _tokens: u64) -> StoreFuture<TokenDecision> {
        Box::pin(std::future::ready(Ok(budget.unmetered())))
    }

    fn settle(
        &self,
        budget: TokenBudget,
        _reserved: u64,
        _used: u64,
    ) -> StoreFuture<TokenDecision> {
        Box::pin(std::future::ready(Ok(budget.unmetered())))
    }
}

const PERIOD_US: f64 = 60_000_000.0;

/// A reservation of `n` tokens, or a settlement of `reserved` to `used`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Op {
    Reserve(u64),
    Settle { reserved: u64, used: u64 },
}

/// One bucket's state before and after: what the Redis script computes too.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Bucket {
    pub(crate) limit: u64,
    pub(crate) tat: f64,
}

/// Applies `op` at `now` (µs) to the limited buckets; returns the decision and, when applied,
/// the new TATs (in the same order).
pub(crate) fn apply(buckets: &[Bucket], op: Op, now: f64) -> (TokenDecision, Option<Vec<f64>>) {
    let next: Vec<(f64, bool)> = buckets
        .iter()
        .map(|bucket| {
            let limit = bucket.limit as f64;
            let interval = PERIOD_US / limit;
            let tat = bucket.tat.max(now);
            match op {
                Op::Reserve(tokens) => {
                    let new = tat + (tokens as f64).min(limit) * interval;
                    (new, new - now <= PERIOD_US)
                }
                Op::Settle { reserved, used } => {
                    let charged = (reserved as f64).min(limit);
                    // A debt reaches one window at most: an overshoot costs the org a
                    // minute of its limit, not hours of it.
                    let new = (tat + (used as f64 - charged) * interval).min(now + PERIOD_US);
                    (new.max(now), true)
                }
            }
        })
        .collect();
    let allowed = next.iter().all(|(_, fits)| *fits);
    let figures = buckets.iter().zip(&next).map(|(bucket, (new, fits))| {
        let interval = PERIOD_US / bucket.limit as f64;
        let kept = if allowed { *new } else { bucket.tat.max(now) };
        TokenDecision {
            allowed: *fits,
            limit: bucket.limit,
            remaining: ((now + PERIOD_US - kept) / interval).floor().max(0.0) as u64,
            reset_after_secs: ((kept - now) / 1e6).ceil().max(0.0) as u64,
            retry_after_secs: if *fits {
                0
            } else {
                ((new - PERIOD_US - now) / 1e6).ceil().max(1.0) as u64
            },
        }
    });
    let decision = binding(figures);
    (
        TokenDecision {
            allowed,
            ..decision
        },
        allowed.then(|| next.into_iter().map(|(tat, _)| tat).collect()),
    )
}

/// The figures that answer: the refusing bucket with the longest wait, else the bucket with
/// the fewest tokens left (the smaller limit on a tie).
pub(crate) fn binding(figures: impl IntoIterator<Item = TokenDecision>) -> TokenDecision {
    figures
        .into_iter()
        .min_by_key(|d| {
            (
                d.allowed,
                std::cmp::Reverse(d.retry_after_secs),
                d.remaining,
                d.limit,
            )
        })
        .unwrap_or(TokenDecision::unmetered(0))
}

/// A single-process token allowance store: right for one replica (`svc dev`), wrong for
/// several. Reads [`tokio::time::Instant`], so tests can drive it with paused time.
#[derive(Debug, Clone)]
pub struct MemoryTokenBudgetStore {
    inner: Arc<Mutex<MemoryState>>,
}

#[derive(Debug)]
struct MemoryState {
    epoch: Instant,
    tats: HashMap<(Uuid, Uuid), f64>,
    caps: MemoryCaps,
}

impl Default for MemoryTokenBudgetStore {
    fn default() -> Self {
        MemoryTokenBudgetStore::new()
    }
}

impl MemoryTokenBudgetStore {
    /// An empty store.
    pub fn new() -> MemoryTokenBudgetStore {
        MemoryTokenBudgetStore {
            inner: Arc::new(Mutex::new(MemoryState {
                epoch: Instant::now(),
                tats: HashMap::new(),
                caps: MemoryCaps::default(),
            })),
        }
    }

    fn run(&self, budget: TokenBudget, op: Op) -> Result<TokenDecision, StoreError> {
        let mut state = self.state()?;
        Ok(state.run(budget, op, &[]))
    }

    fn state(&self) -> Result<std::sync::MutexGuard<'_, MemoryState>, StoreError> {
        self.inner
            .lock()
            .map_err(|_| StoreError::new("token budget state poisoned"))
    }

    fn run_capped(
        &self,
        budget: TokenBudget,
        tokens: u64,
        caps: &[SpendCap],
    ) -> Result<CappedDecision, StoreError> {
        let mut state = self.state()?;
        let values = match state.caps.read(budget.org_id, caps, Instant::now()) {
            Ok(values) => values,
            Err(missing) => return Ok(CappedDecision::Missing(missing)),
        };
        let fit = caps::all_fit(caps, &values);
        let tokens = state.run(budget, Op::Reserve(tokens), &[fit]);
        let taken = tokens.allowed && fit;
        if taken {
            state.caps.take(budget.org_id, caps);
        }
        Ok(CappedDecision::Counted {
            tokens,
            caps: caps::states(caps, &values, taken),
        })
    }
}

impl MemoryState {
    /// Applies `op` to the buckets; a reservation is taken only when every one of `also` is
    /// true as well (the caps fit).
    fn run(&mut self, budget: TokenBudget, op: Op, also: &[bool]) -> TokenDecision {
        let state = self;
        let now = state.epoch.elapsed().as_micros() as f64;
        // The org's bucket is keyed by the nil token; a token's by its id.
        let keys = [
            (budget.org_id, Uuid::nil()),
            (budget.org_id, budget.token_id),
        ];
        let limited: Vec<((Uuid, Uuid), Bucket)> = keys
            .into_iter()
            .zip(budget.limits())
            .filter(|(_, limit)| *limit > 0)
            .map(|(key, limit)| {
                let tat = state.tats.get(&key).copied().unwrap_or(now);
                (key, Bucket { limit, tat })
            })
            .collect();
        if limited.is_empty() {
            return budget.unmetered();
        }
        let buckets: Vec<Bucket> = limited.iter().map(|(_, b)| *b).collect();
        let (mut decision, mut next) = apply(&buckets, op, now);
        if !also.iter().all(|ok| *ok) {
            // Refused elsewhere: nothing is taken, and the figures say so.
            let (untaken, _) = apply(&buckets, Op::Reserve(0), now);
            decision = TokenDecision {
                allowed: decision.allowed,
                ..untaken
            };
            next = None;
        }
        for ((key, _), tat) in limited.iter().zip(next.into_iter().flatten()) {
            state.tats.insert(*key, tat);
        }
        if state.tats.len() > 4096 {
            state.tats.retain(|_, tat| *tat > now);
        }
        decision
    }
}

impl TokenBudgetStore for MemoryTokenBudgetStore {
    fn reserve(&self, budget: TokenBudget, tokens: u64) -> StoreFuture<TokenDecision> {
        Box::pin(std::future::ready(self.run(budget, Op::Reserve(tokens))))
    }

    fn settle(&self, budget: TokenBudget, reserved: u64, used: u64) -> StoreFuture<TokenDecision> {
        Box::pin(std::future::ready(
            self.run(budget, Op::Settle { reserved, used }),
        ))
    }

    fn reserve_capped(
        &self,
        budget: TokenBudget,
        tokens: u64,
        caps: Vec<SpendCap>,
    ) -> StoreFuture<CappedDecision> {
        Box::pin(std::future::ready(self.run_capped(budget, tokens, &caps)))
    }

    fn settle_capped(
        &self,
        budget: TokenBudget,
        reserved: u64,
        used: u64,
        caps: Vec<CapCharge>,
    ) -> StoreFuture<TokenDecision> {
        let settled = self.state().map(|mut state| {
            state.caps.settle(budget.org_id, &caps);
            state.run(budget, Op::Settle { reserved, used }, &[])
        });
        Box::pin(std::future::ready(settled))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_reservation_fits_or_takes_nothing() {
        let store = MemoryTokenBudgetStore::new();
        let budget = TokenBudget::org(Uuid::new_v4(), 1_000);
        for expected in [600, 200] {
            let decision = store.reserve(budget, 400).await.unwrap();
            assert!(decision.allowed);
            assert_eq!(decision.remaining, expected);
        }
        let refused = store.reserve(budget, 400).await.unwrap();
        assert!(!refused.allowed);
        assert_eq!(refused.remaining, 200, "a refusal takes nothing");
        // 200 more tokens are needed: 12 s at 1,000 a minute.
        assert_eq!(refused.retry_after_secs, 12);
        tokio::time::advance(Duration::from_secs(12)).await;
        assert!(store.reserve(budget, 400).await.unwrap().allowed);
    }

    #[tokio::test(start_paused = true)]
    async fn an_overshoot_is_owed_for_one_window_at_most() {
        let store = MemoryTokenBudgetStore::new();
        let budget = TokenBudget::org(Uuid::new_v4(), 10_000);
        store.reserve(budget, 500).await.unwrap();
        let settled = store.settle(budget, 500, 600_000).await.unwrap();
        assert_eq!((settled.remaining, settled.reset_after_secs), (0, 60));
        let refused = store.reserve(budget, 500).await.unwrap();
        assert_eq!(refused.retry_after_secs, 3, "500 tokens at 10,000 a minute");
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(store.reserve(budget, 500).await.unwrap().remaining, 9_500);
    }

    #[tokio::test(start_paused = true)]
    async fn settling_gives_back_an_overestimate_and_charges_an_underestimate() {
        let store = MemoryTokenBudgetStore::new();
        let budget = TokenBudget::org(Uuid::new_v4(), 1_000);
        store.reserve(budget, 900).await.unwrap();
        let settled = store.settle(budget, 900, 100).await.unwrap();
        assert_eq!(settled.remaining, 900);
        let settled = store.settle(budget, 0, 1_400).await.unwrap();
        assert_eq!(settled.remaining, 0, "owed");
        assert!(!store.reserve(budget, 1).await.unwrap().allowed);
        // The 500 owed past an empty bucket were forgiven (a debt is one window at most); a
        // reservation took at most the whole limit, so at most that comes back; and a bucket
        // never holds more than the limit.
        let settled = store.settle(budget, 100_000, 0).await.unwrap();
        assert_eq!(settled.remaining, 1_000);
        store.settle(budget, 100_000, 0).await.unwrap();
        assert_eq!(store.reserve(budget, 0).await.unwrap().remaining, 1_000);
    }

    #[tokio::test(start_paused = true)]
    async fn the_stricter_bucket_answers_and_a_call_over_the_limit_can_pass_once() {
        let store = MemoryTokenBudgetStore::new();
        let org = Uuid::new_v4();
        let (small, big) = (Uuid::new_v4(), Uuid::new_v4());
        let small = TokenBudget::org(org, 1_000).with_token(small, Some(100));
        let first = store.reserve(small, 60).await.unwrap();
        assert_eq!((first.limit, first.remaining), (100, 40));
        let refused = store.reserve(small, 60).await.unwrap();
        assert_eq!((refused.allowed, refused.limit), (false, 100));
        // Another token of the org still has the org's allowance, less what the first took.
        let other = TokenBudget::org(org, 1_000).with_token(big, None);
        let decision = store.reserve(other, 5_000).await.unwrap();
        assert!(
            !decision.allowed,
            "a whole limit does not fit a bucket already drawn on"
        );
        let fresh = TokenBudget::org(Uuid::new_v4(), 1_000);
        assert!(store.reserve(fresh, 5_000).await.unwrap().allowed);
    }

    #[test]
    fn no_limit_is_unmetered() {
        let budget = TokenBudget::org(Uuid::new_v4(), 10).with_token(Uuid::new_v4(), Some(5));
        assert_eq!(budget.unmetered().limit, 5);
        let open = TokenBudget {
            org_limit: None,
            ..budget.with_token(Uuid::new_v4(), None)
        };
        assert!(!open.is_limited());
    }

    #[tokio::test(start_paused = true)]
    async fn caps_in_memory_fit_or_take_nothing_and_expire_with_their_period() {
        let store = MemoryTokenBudgetStore::new();
        let budget = TokenBudget::org(Uuid::new_v4(), 1_000);
        let cap = |amount, seed| SpendCap {
            name: "day:1".to_owned(),
            limit: 25,
            amount,
            ttl_secs: 60,
            seed,
        };
        assert_eq!(
            store
                .reserve_capped(budget, 10, vec![cap(10, None)])
                .await
                .unwrap(),
            CappedDecision::Missing(vec![0])
        );
        assert!(
            store
                .reserve_capped(budget, 10, vec![cap(10, Some(5))])
                .await
                .unwrap()
                .allowed()
        );
        assert!(
            store
                .reserve_capped(budget, 10, vec![cap(10, None)])
                .await
                .unwrap()
                .allowed()
        );
        let refused = store
            .reserve_capped(budget, 10, vec![cap(10, None)])
            .await
            .unwrap();
        assert!(!refused.allowed());
        // The refusal took no tokens: 20 of 1,000 are gone, not 30.
        let CappedDecision::Counted { tokens, .. } = refused else {
            panic!("counted")
        };
        assert_eq!(tokens.remaining, 980);
        let charge = CapCharge {
            name: "day:1".to_owned(),
            reserved: 10,
            used: 0,
        };
        store
            .settle_capped(budget, 10, 0, vec![charge])
            .await
            .unwrap();
        assert!(
            store
                .reserve_capped(budget, 10, vec![cap(10, None)])
                .await
                .unwrap()
                .allowed()
        );
        tokio::time::advance(Duration::from_secs(61)).await;
        assert_eq!(
            store
                .reserve_capped(budget, 10, vec![cap(10, None)])
                .await
                .unwrap(),
            CappedDecision::Missing(vec![0]),
            "a counter past its period is gone"
        );
    }
}
