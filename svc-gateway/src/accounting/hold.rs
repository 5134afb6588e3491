//! What a call holds before the provider sees it: its estimated tokens against the tokens-per-
//! minute limits, and its worst-case cost against every budget that applies, in one atomic
//! step of the shared store.
//!
//! - The token estimate is every part of the request a provider bills (see
//!   [`crate::token_estimate`]) and `n` times the completion cap (`max_completion_tokens`,
//!   `max_tokens` or `max_output_tokens`, else `SVC_RATE_LIMIT_DEFAULT_COMPLETION_TOKENS`).
//! - The worst-case cost is that prompt at the model's input price and that completion cap at
//!   its output price; a model without a price reserves nothing but is still refused by a
//!   budget already spent.
//! - The org's token limit is `SVC_RATE_LIMIT_TPM`, a token's own comes from ValidateToken,
//!   and so do the budgets (the org's, the agent's, the token's).
//!
//! A store that fails or is slow lets a call through unmetered when only token limits apply.
//! When a budget applies, the call is refused with 503 `BUDGET_UNAVAILABLE` instead (unless
//! `SVC_BUDGET_FAIL_OPEN=true`): a budget is a promise about money. A budget counter the
//! store lost is rebuilt from the ledger (GetBudgetSpend) before the call is admitted.
//!
//! A call's settlement waits for its org's next reservation and rides in the same script (one
//! round trip, and that reservation sees it), or [`SETTLE_WAIT`] at most when none comes, or
//! until the gateway drains: a busy org pays Redis for one step per call, not two.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use http::HeaderMap;
use svc_runtime::shutdown::{Drain, Phase};
use svc_tower::context::{Budget, OrgContext};
use svc_tower::error::{ApiError, ErrorCode};
use svc_tower::grpc::GrpcAuthClient;
use svc_tower::rate_limit::{
    CapCharge, CapState, CappedDecision, Correction, Counting, SpendCap, TokenBudget,
    TokenBudgetStore, TokenDecision,
};
use uuid::Uuid;

use crate::budget::{CallUsage, CostMeter, caps};
use crate::call::Call;
use crate::request::ApiRequest;
use crate::token_estimate;

/// Completion tokens reserved for a request that names no maximum.
pub const DEFAULT_COMPLETION_TOKENS: u64 = 1024;
/// How long a reservation may take by default (`SVC_RATE_LIMIT_TPM_TIMEOUT`) before the call
/// proceeds unmetered (or, under a budget, is refused); a settlement gets four times as long.
/// Longer than the request limit's 25 ms: a refused burst would otherwise pass unmetered
/// exactly when it queues for the store, which for a budget is the case that matters.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(250);
/// How long a settlement waits for its org's next reservation to carry it before it goes on
/// its own: long enough for a busy org's next call, short enough that other replicas see it
/// soon (they see the reservation at once).
pub const SETTLE_WAIT: Duration = Duration::from_millis(20);

/// Where the spend of a budget whose counter was lost is read: the auth service's
/// GetBudgetSpend, which sums the ledger.
pub trait SpendSource: Send + Sync + 'static {
    /// The budgets a call with `token` (acting as `agent`) draws on, each with its spend in
    /// the current period.
    fn spend(
        &self,
        token: &str,
        agent: Option<uuid::Uuid>,
    ) -> futures_util::future::BoxFuture<'static, Option<Vec<(Budget, i64)>>>;
}

impl SpendSource for GrpcAuthClient {
    fn spend(
        &self,
        token: &str,
        agent: Option<uuid::Uuid>,
    ) -> futures_util::future::BoxFuture<'static, Option<Vec<(Budget, i64)>>> {
        let client = self.clone();
        let token = token.to_owned();
        Box::pin(async move { client.budget_spend(&token, agent).await.ok() })
    }
}

/// Reserves calls' tokens and money, and settles them.
#[derive(Clone)]
pub struct Holder {
    store: Arc<dyn TokenBudgetStore>,
    /// The org's tokens per minute; `None` when only tokens' own limits apply.
    org_limit: Option<u64>,
    /// Whether token limits are counted at all (not without a shared store, as SPEC's no-op
    /// limiter); budgets are counted either way.
    meter_tokens: bool,
    default_completion: u64,
    timeout: Duration,
    budget_fail_open: bool,
    spend: Option<Arc<dyn SpendSource>>,
    cost: CostMeter,
    clock: fn() -> DateTime<Utc>,
    /// Settlements waiting for their org's next reservation.
    owed: Arc<Mutex<HashMap<Uuid, Owing>>>,
    settle_wait: Duration,
    /// Once the gateway drains, settlements wait no more.
    drain: Drain,
}

/// An org's settlements not yet sent.
#[derive(Debug, Default)]
struct Owing {
    corrections: Vec<Correction>,
    /// Whether a task will send them when [`SETTLE_WAIT`] is over.
    armed: bool,
}

impl std::fmt::Debug for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Holder")
            .field("org_limit", &self.org_limit)
            .field("meter_tokens", &self.meter_tokens)
            .field("default_completion", &self.default_completion)
            .field("budget_fail_open", &self.budget_fail_open)
            .finish_non_exhaustive()
    }
}

/// What one call holds until it settles.
#[derive(Debug, Clone, Default)]
pub struct Hold {
    /// The token buckets it drew on.
    budget: Option<TokenBudget>,
    /// Tokens reserved.
    tokens: u64,
    /// The prompt part of the estimate, for a stream cut short (`None`: not estimated).
    prompt: Option<u64>,
    /// The token store's answer, for the headers.
    decision: Option<TokenDecision>,
    /// Each budget counter drawn on, with the micro-dollars reserved.
    caps: Vec<(String, u64)>,
    /// What the tightest budget has left after the reservation, in micro-dollars.
    remaining_usd_micros: Option<u64>,
}

impl Holder {
    /// A holder on `store`: `org_limit` tokens per minute per org (`None`: only tokens' own
    /// limits apply), pricing with `cost`.
    pub fn new(
        store: Arc<dyn TokenBudgetStore>,
        org_limit: Option<u64>,
        default_completion: u64,
        timeout: Duration,
        cost: CostMeter,
    ) -> Holder {
        Holder {
            store,
            org_limit,
            meter_tokens: true,
            default_completion,
            timeout,
            budget_fail_open: false,
            spend: None,
            cost,
            clock: Utc::now,
            owed: Arc::default(),
            settle_wait: SETTLE_WAIT,
            drain: Drain::new(),
        }
    }

    /// Sends settlements at once when `drain` starts.
    pub fn drain(mut self, drain: Drain) -> Holder {
        self.drain = drain;
        self
    }

    /// Lets settlements wait `wait` for their org's next reservation.
    pub fn settle_wait(mut self, wait: Duration) -> Holder {
        self.settle_wait = wait;
        self
    }

    /// Counts budgets only: token limits need a store shared by every replica.
    pub fn budgets_only(mut self) -> Holder {
        self.meter_tokens = false;
        self
    }

    /// Lets a budgeted call through when the store cannot be reached
    /// (`SVC_BUDGET_FAIL_OPEN=true`).
    pub fn budget_fail_open(mut self, fail_open: bool) -> Holder {
        self.budget_fail_open = fail_open;
        self
    }

    /// Reads lost budget counters' spend from `source`.
    pub fn spend_source(mut self, source: Arc<dyn SpendSource>) -> Holder {
        self.spend = Some(source);
        self
    }

    /// Reads the time from `clock` (periods start and end by it).
    pub fn clock(mut self, clock: fn() -> DateTime<Utc>) -> Holder {
        self.clock = clock;
        self
    }

    /// The prompt and completion estimate of `api`.
    pub fn estimate(&self, api: &ApiRequest) -> (u64, u64) {
        let prompt = token_estimate::prompt_tokens(&api.json, api.message_count);
        let completion =
            token_estimate::completion_tokens(&api.json, api.max_tokens, self.default_completion);
        (prompt, completion)
    }

    /// The token buckets a call of `org` draws on.
    fn budget(&self, org: &OrgContext) -> TokenBudget {
        TokenBudget {
            org_id: org.org_id,
            org_limit: self.org_limit.filter(|_| self.meter_tokens),
            token_id: org.token_id,
            token_limit: org.limits.tokens_per_minute.filter(|_| self.meter_tokens),
        }
    }

    /// Whether a call of `org` reserves anything: a token limit or a budget applies.
    pub fn meters(&self, org: &OrgContext) -> bool {
        self.budget(org).is_limited() || !org.budgets.is_empty()
    }

    /// Reserves `call`'s tokens and worst-case cost, or says why not. A request whose
    /// rate-limit count was left to the call is counted in the same store step as the
    /// reservation where the store can (one script), else alone before it; over its limit it
    /// is refused and nothing is reserved.
    pub async fn hold(&self, call: &Call) -> Result<Hold, Box<ApiError>> {
        let Some(org) = &call.org else {
            return Ok(Hold::default());
        };
        let budget = self.budget(org);
        let with_reservation = call
            .count_later
            .as_ref()
            .filter(|_| self.store.counts_requests() && self.meters(org));
        if let Some(later) = &call.count_later
            && with_reservation.is_none()
            && !later.count().await
        {
            return Err(rate_limited());
        }
        if !budget.is_limited() && org.budgets.is_empty() {
            return Ok(Hold::default());
        }
        let (prompt, completion) = self.estimate(&call.api);
        let tokens = prompt.saturating_add(completion);
        let worst = self.cost.cost(
            &call.api.model,
            CallUsage {
                prompt,
                cached: 0,
                completion,
            },
        );
        let worst = u64::try_from(worst).unwrap_or(0);
        let now = (self.clock)();
        let mut caps: Vec<SpendCap> = (org.budgets.iter())
            .map(|b| caps::cap(b, worst, now))
            .collect();
        let mut seeded = false;
        let mut owed = self.take_owed(org.org_id);
        loop {
            let owed = std::mem::take(&mut owed);
            let counting = with_reservation.filter(|later| !later.is_counted());
            let reserve = match counting {
                Some(later) => (self.store).reserve_counting(
                    later.requests(),
                    owed,
                    budget,
                    tokens,
                    caps.clone(),
                ),
                None => {
                    let reserve =
                        (self.store).reserve_correcting(owed, budget, tokens, caps.clone());
                    Box::pin(async move {
                        Ok(Counting {
                            requests: None,
                            reserved: Some(reserve.await?),
                        })
                    })
                }
            };
            let outcome = tokio::time::timeout(self.timeout, reserve).await;
            if let Some(later) = counting {
                match &outcome {
                    Ok(Ok(Counting {
                        requests: Some(decision),
                        ..
                    })) => later.counted(Some(*decision)),
                    // Nothing counted: a counter missing, counted again once seeded.
                    Ok(Ok(Counting { requests: None, .. })) => {}
                    // The store failed: the request limit fails open, as the limiter's does.
                    _ => later.counted(None),
                }
            }
            let outcome = outcome.map(|counted| counted.map(|counted| counted.reserved));
            let decision = match outcome {
                Ok(Ok(None)) => return Err(rate_limited()),
                Ok(Ok(Some(CappedDecision::Missing(_)))) if !seeded => {
                    seeded = true;
                    match self.seeds(call, org).await {
                        Some(seeds) => {
                            seed(&mut caps, &org.budgets, &seeds, now);
                            continue;
                        }
                        None => return self.unavailable(budget, prompt, "reading spend"),
                    }
                }
                Ok(Ok(Some(CappedDecision::Missing(_)))) => {
                    return self.unavailable(budget, prompt, "rebuilding a counter");
                }
                Ok(Ok(Some(CappedDecision::Counted {
                    tokens: decision,
                    caps: states,
                }))) => (decision, states),
                outcome => {
                    let timed_out = outcome.is_err();
                    if org.budgets.is_empty() {
                        warn_fail_open(timed_out, "token rate limit");
                        return Ok(Hold::unmetered(budget, prompt));
                    }
                    return self.unavailable(budget, prompt, "reserving");
                }
            };
            return self.decide(org, budget, tokens, prompt, &caps, decision, now);
        }
    }

    /// Settles `hold` to what the call used: `usage` tokens, costing `cost` micro-dollars.
    /// The settlement waits for the org's next reservation to carry it, [`SETTLE_WAIT`] at
    /// most.
    pub fn settle(&self, hold: &Hold, usage: CallUsage, cost: u64) {
        let Some(correction) = hold.correction(usage, cost) else {
            return;
        };
        let org = correction.budget.org_id;
        let arm = {
            let mut owed = self.owed.lock().unwrap_or_else(PoisonError::into_inner);
            let owing = owed.entry(org).or_default();
            owing.corrections.push(correction);
            !std::mem::replace(&mut owing.armed, true)
        };
        // A body dropped as the runtime stops has no task to settle on; the counters then
        // expire with their window or period.
        if arm && let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let holder = self.clone();
            runtime.spawn(async move {
                tokio::select! {
                    () = tokio::time::sleep(holder.settle_wait) => {}
                    () = holder.drain.reached(Phase::Draining) => {}
                }
                holder.send_owed(org).await;
            });
        }
    }

    /// The org's settlements not yet sent, for its reservation to carry.
    fn take_owed(&self, org: Uuid) -> Vec<Correction> {
        let mut owed = self.owed.lock().unwrap_or_else(PoisonError::into_inner);
        (owed.get_mut(&org)).map_or_else(Vec::new, |owing| std::mem::take(&mut owing.corrections))
    }

    /// Sends the org's settlements that no reservation carried.
    async fn send_owed(&self, org: Uuid) {
        let owing = self
            .owed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&org);
        let Some(owing) = owing.filter(|o| !o.corrections.is_empty()) else {
            return;
        };
        let sent = self.store.correct(owing.corrections);
        if !matches!(
            tokio::time::timeout(self.timeout * 4, sent).await,
            Ok(Ok(()))
        ) {
            warn_fail_open(false, "settlement");
        }
    }

    /// What ValidateToken's budgets spent, from the ledger; `None` when it cannot be read.
    async fn seeds(&self, call: &Call, org: &OrgContext) -> Option<Vec<(Budget, i64)>> {
        let token = call.credential.as_ref().and_then(|c| c.expose());
        let (Some(source), Some(token)) = (&self.spend, token) else {
            // No auth service to ask (a test's own stack): the counter starts at zero.
            return Some(org.budgets.iter().map(|b| (*b, 0)).collect());
        };
        let asked = source.spend(token, org.agent_id);
        tokio::time::timeout(self.timeout * 4, asked).await.ok()?
    }

    #[allow(clippy::too_many_arguments)]
    fn decide(
        &self,
        org: &OrgContext,
        budget: TokenBudget,
        tokens: u64,
        prompt: u64,
        caps: &[SpendCap],
        (decision, states): (TokenDecision, Vec<CapState>),
        now: DateTime<Utc>,
    ) -> Result<Hold, Box<ApiError>> {
        if !decision.allowed {
            return Err(Box::new(decision.rejection()));
        }
        let tightest = caps::tightest(&org.budgets, &states);
        if let Some((refusing, state)) = tightest.filter(|(_, state)| !state.fits) {
            return Err(Box::new(caps::refusal(refusing, state, now)));
        }
        Ok(Hold {
            budget: Some(budget),
            tokens,
            prompt: Some(prompt),
            decision: budget.is_limited().then_some(decision),
            caps: caps
                .iter()
                .map(|cap| (cap.name.clone(), cap.amount))
                .collect(),
            remaining_usd_micros: tightest.map(|(_, state)| state.remaining()),
        })
    }

    /// A budgeted call the store cannot hold: refused, or let through unmetered when so
    /// configured.
    fn unavailable(
        &self,
        budget: TokenBudget,
        prompt: u64,
        doing: &str,
    ) -> Result<Hold, Box<ApiError>> {
        warn_fail_open(false, doing);
        if self.budget_fail_open {
            return Ok(Hold::unmetered(budget, prompt));
        }
        Err(Box::new(ApiError::new(ErrorCode::BudgetUnavailable)))
    }
}

/// A request over its rate limit; `OrgRateLimit` answers it with the decision's 429.
fn rate_limited() -> Box<ApiError> {
    Box::new(ApiError::new(ErrorCode::RateLimited))
}

/// Seeds every cap with its budget's spend from the ledger.
fn seed(caps: &mut [SpendCap], budgets: &[Budget], seeds: &[(Budget, i64)], now: DateTime<Utc>) {
    for (cap, budget) in caps.iter_mut().zip(budgets) {
        let spent = (seeds.iter())
            .find(|(seeded, _)| seeded.target == budget.target)
            .map_or(0, |(_, spent)| *spent);
        cap.seed = Some(u64::try_from(spent).unwrap_or(0));
        debug_assert_eq!(cap.name, caps::counter(budget, now));
    }
}

impl Hold {
    /// Nothing counted: the store failed and the call goes on.
    fn unmetered(budget: TokenBudget, prompt: u64) -> Hold {
        Hold {
            budget: None,
            prompt: Some(prompt),
            decision: budget.is_limited().then(|| budget.unmetered()),
            ..Hold::default()
        }
    }

    /// The token limit's `x-ratelimit-*-tokens` headers and the budget's remaining dollars.
    pub fn set_headers(&self, headers: &mut HeaderMap) {
        if let Some(decision) = &self.decision {
            decision.set_headers(headers);
        }
        if let Some(micros) = self.remaining_usd_micros {
            headers.insert(
                caps::X_SVC_BUDGET_REMAINING_USD.clone(),
                caps::remaining_header(micros),
            );
        }
    }

    /// What settles this hold for a call that used `usage` tokens costing `cost`; `None` when
    /// it holds nothing to settle.
    fn correction(&self, usage: CallUsage, cost: u64) -> Option<Correction> {
        let caps: Vec<CapCharge> = (self.caps.iter())
            .map(|(name, reserved)| CapCharge {
                name: name.clone(),
                reserved: *reserved,
                used: cost,
            })
            .collect();
        let budget = (self.budget).filter(|b| b.is_limited() || !caps.is_empty())?;
        Some(Correction {
            budget,
            reserved: if self.decision.is_some() {
                self.tokens
            } else {
                0
            },
            used: usage.prompt.saturating_add(usage.completion),
            caps,
        })
    }

    /// The prompt estimate the hold was made with, if one was made: what a stream cut short
    /// is charged for its prompt, without estimating it again.
    pub fn prompt_estimate(&self) -> Option<u64> {
        self.prompt
    }

    /// Whether anything was reserved, so something must be settled.
    pub fn holds_anything(&self) -> bool {
        self.budget.is_some()
    }
}

/// Warns at most every few seconds: a Redis outage must not flood the log.
fn warn_fail_open(timed_out: bool, doing: &str) {
    static LAST: AtomicI64 = AtomicI64::new(0);
    let now = chrono::Utc::now().timestamp();
    let last = LAST.load(Ordering::Relaxed);
    if now - last >= 5
        && LAST
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        tracing::warn!(
            timed_out,
            doing,
            "the token limit and budget store failed; token limits are not counted, \
             budgeted calls are refused unless SVC_BUDGET_FAIL_OPEN"
        );
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicI64;

    use bytes::Bytes;
    use chrono::TimeZone;
    use svc_tower::context::{BudgetPeriod, BudgetTarget, Permissions};
    use svc_tower::rate_limit::RedisTokenBudgetStore;
    use svc_tower::store::RedisPool;
    use uuid::Uuid;

    use super::*;
    use crate::config::{DEFAULT_PROVIDER_TIMEOUT, LlmMode, ProviderConfig};
    use crate::provider::Registry;
    use crate::request::Endpoint;

    /// The test's clock, in Unix seconds.
    static NOW: AtomicI64 = AtomicI64::new(0);

    fn clock() -> DateTime<Utc> {
        DateTime::from_timestamp(NOW.load(Ordering::SeqCst), 0).expect("a time")
    }

    fn call(org: OrgContext) -> Call {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", "application/json".parse().unwrap());
        let body = Bytes::from_static(
            br#"{"model":"svc-mock-1","messages":[{"role":"user","content":"hi"}],"max_tokens":10}"#,
        );
        let api = crate::validate::request(Endpoint::ChatCompletions, &headers, body).unwrap();
        let (mut parts, ()) = http::Request::new(()).into_parts();
        parts.extensions.insert(org);
        Call::from_parts(&parts, Arc::new(api), std::time::Instant::now())
    }

    /// A holder on Redis under a random key prefix, with the mock's prices ($1 in, $2 out per
    /// million tokens), its pool and the prefix.
    fn holder_on_redis() -> (Holder, redis::Client, String) {
        let registry = Registry::from_config(&ProviderConfig {
            mode: LlmMode::Mock,
            base_url: None,
            api_key: None,
            timeout: DEFAULT_PROVIDER_TIMEOUT,
            models: vec!["svc-mock-1".to_owned()],
            file: None,
        })
        .unwrap();
        let pool = RedisPool::new(&svc_testkit::redis_url()).unwrap();
        let prefix = svc_testkit::redis_prefix();
        let store = Arc::new(RedisTokenBudgetStore::new(pool.clone(), prefix.clone()));
        let holder = Holder::new(
            store,
            None,
            DEFAULT_COMPLETION_TOKENS,
            Duration::from_secs(5),
            CostMeter::new(registry),
        );
        let client = redis::Client::open(svc_testkit::redis_url()).unwrap();
        (holder, client, prefix)
    }

    /// An org with a day budget of a dollar, and the Redis key of its counter.
    fn budgeted_org(prefix: &str) -> (OrgContext, String) {
        let budget = Budget {
            target: BudgetTarget::Org,
            limit_usd_micros: 1_000_000,
            period: BudgetPeriod::Day,
        };
        let org_id = Uuid::new_v4();
        let name = caps::counter(&budget, Utc::now());
        let org = OrgContext::new(org_id, Permissions::CHAT_COMPLETIONS, Uuid::new_v4())
            .with_budgets(vec![budget]);
        (org, format!("{prefix}svc:{{{org_id}}}:cap:{name}"))
    }

    async fn counter(redis: &redis::Client, key: &str) -> Option<i64> {
        let mut connection = redis.get_multiplexed_async_connection().await.unwrap();
        redis::cmd("GET")
            .arg(key)
            .query_async(&mut connection)
            .await
            .unwrap()
    }

    /// Polls the counter at `key` until it reads `expected`, for five seconds at most.
    async fn counter_reaches(pool: &redis::Client, key: &str, expected: i64) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while counter(pool, key).await != Some(expected) {
            assert!(
                std::time::Instant::now() < deadline,
                "{key} never reached {expected}"
            );
            tokio::task::yield_now().await;
        }
    }

    const USED: CallUsage = CallUsage {
        prompt: 5,
        cached: 0,
        completion: 3,
    };

    #[tokio::test]
    async fn a_settlement_rides_with_the_orgs_next_reservation() {
        let (holder, pool, prefix) = holder_on_redis();
        // Nothing goes on its own during the test.
        let holder = holder.settle_wait(Duration::from_secs(3_600));
        let (org, key) = budgeted_org(&prefix);
        let first = holder.hold(&call(org.clone())).await.unwrap();
        let worst = counter(&pool, &key)
            .await
            .expect("the reservation's counter");
        assert!(worst > 11, "{worst}");
        holder.settle(&first, USED, 11);
        // Held for the next reservation: the counter still has the worst case.
        assert_eq!(counter(&pool, &key).await, Some(worst));
        let second = holder.hold(&call(org.clone())).await.unwrap();
        assert_eq!(counter(&pool, &key).await, Some(11 + worst));
        // That reservation saw the settlement: its remaining dollars count the first call's 11.
        let mut headers = HeaderMap::new();
        second.set_headers(&mut headers);
        assert_eq!(
            headers[&caps::X_SVC_BUDGET_REMAINING_USD],
            caps::remaining_header(u64::try_from(1_000_000 - 11 - worst).unwrap())
        );
        assert!(holder.take_owed(org.org_id).is_empty());
    }

    #[tokio::test]
    async fn a_settlement_no_reservation_carries_goes_after_the_wait_or_at_the_drain() {
        let (holder, pool, prefix) = holder_on_redis();
        let drain = Drain::new();
        let waiting = holder
            .clone()
            .settle_wait(Duration::from_secs(3_600))
            .drain(drain.clone());
        let (org, key) = budgeted_org(&prefix);
        let hold = waiting.hold(&call(org.clone())).await.unwrap();
        waiting.settle(&hold, USED, 7);
        drain.start();
        counter_reaches(&pool, &key, 7).await;

        let quick = holder.settle_wait(Duration::from_millis(1));
        let (org, key) = budgeted_org(&prefix);
        let hold = quick.hold(&call(org)).await.unwrap();
        quick.settle(&hold, USED, 9);
        counter_reaches(&pool, &key, 9).await;
    }

    #[tokio::test]
    async fn a_day_budget_spent_out_is_usable_again_when_the_day_changes() {
        NOW.store(
            Utc.with_ymd_and_hms(2026, 11, 25, 23, 59, 0)
                .unwrap()
                .timestamp(),
            Ordering::SeqCst,
        );
        let (holder, _, _) = holder_on_redis();
        let holder = holder.clock(clock);
        let org_id = Uuid::new_v4();
        let probe = call(OrgContext::new(
            org_id,
            Permissions::CHAT_COMPLETIONS,
            Uuid::new_v4(),
        ));
        let (prompt, completion) = holder.estimate(&probe.api);
        // The mock's $1 in, $2 out per million tokens: a budget of exactly one call.
        let worst = i64::try_from(prompt + 2 * completion).unwrap();
        let budget = Budget {
            target: BudgetTarget::Org,
            limit_usd_micros: worst,
            period: BudgetPeriod::Day,
        };
        let org = OrgContext::new(org_id, Permissions::CHAT_COMPLETIONS, Uuid::new_v4())
            .with_budgets(vec![budget]);
        let first = holder.hold(&call(org.clone())).await.unwrap();
        let mut headers = HeaderMap::new();
        first.set_headers(&mut headers);
        assert_eq!(headers[&caps::X_SVC_BUDGET_REMAINING_USD], "0");
        let refused = holder.hold(&call(org.clone())).await.unwrap_err();
        assert_eq!(refused.code(), &ErrorCode::BudgetExceeded);
        // A minute to midnight: the client is told to come back in a minute.
        assert_eq!(refused.headers()[http::header::RETRY_AFTER], "60");

        NOW.fetch_add(61, Ordering::SeqCst);
        let next_day = holder.hold(&call(org)).await;
        assert!(next_day.is_ok(), "{next_day:?}");
    }
}
