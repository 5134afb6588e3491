//! [`TokenBudgetStore`] in Redis: one script per reservation or settlement, over the org's
//! bucket and the token's, which share the org's hash tag and so one slot of a cluster.

use std::sync::{Arc, LazyLock};

use redis::Script;

use super::caps::{CapCharge, CapState, SpendCap};
use super::tokens::{CappedDecision, Op, TokenBudget, TokenBudgetStore, TokenDecision, binding};
use crate::store::{RedisPool, StoreError, StoreFuture, org_key};

/// The arithmetic of `tokens::apply`, on the Redis clock, and the spend caps beside it.
///
/// KEYS: the limited buckets (the org's, then the token's; none, one or both), then one
/// counter per cap. ARGV: `reserve` or `settle`, how many bucket keys, the tokens (or
/// reserved), the used tokens, each bucket's limit, then per cap: for a reservation its limit,
/// amount, TTL in seconds and seed (-1: none), for a settlement its correction alone. Returns
/// `-1` and the missing caps' indexes (from 0) when a counter is missing without a seed;
/// otherwise `allowed`, the number of buckets, per bucket `fits, limit, remaining, reset_us,
/// retry_us`, then per cap (a reservation only) `fits, limit, counter`. TATs are µs of the
/// server's TIME, so replicas with skewed clocks agree.
///
/// Each argument, `redis.call` and number crossing between Lua and Redis costs more inside
/// Redis than the arithmetic, so a bucket or a figure that does not apply is not sent, values
/// that only pass through (a seed, an amount, a correction) go to Redis as the strings they
/// came as, and the buckets' `TIME` is read only when a bucket is limited.
static SCRIPT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local settle = ARGV[1] == 'settle'
local nb = tonumber(ARGV[2])
local ncaps = #KEYS - nb
local allowed = 1
local caps = {}
if settle then
  for j = 1, ncaps do
    local key, delta = KEYS[nb + j], ARGV[4 + nb + j]
    if delta ~= '0' and redis.call('EXISTS', key) == 1 then
      if redis.call('INCRBY', key, delta) < 0 then
        redis.call('SET', key, '0', 'KEEPTTL')
      end
    end
  end
elseif ncaps > 0 then
  local missing
  for j = 1, ncaps do
    local at = 4 * j + nb
    local v = redis.call('GET', KEYS[nb + j])
    if v then
      v = tonumber(v)
    elseif tonumber(ARGV[at + 4]) < 0 then
      missing = missing or {-1}
      missing[#missing + 1] = j - 1
    else
      redis.call('SETEX', KEYS[nb + j], ARGV[at + 3], ARGV[at + 4])
      v = tonumber(ARGV[at + 4])
    end
    if v then
      local limit = tonumber(ARGV[at + 1])
      local fit = 1
      if v + tonumber(ARGV[at + 2]) > limit then fit = 0; allowed = 0 end
      caps[#caps + 1] = fit
      caps[#caps + 1] = limit
      caps[#caps + 1] = v
    end
  end
  if missing then return missing end
end
local out = {allowed, nb}
if nb > 0 then
  local a = tonumber(ARGV[3])
  local t = redis.call('TIME')
  local now, period = tonumber(t[1]) * 1000000 + tonumber(t[2]), 60000000
  local rows = {}
  for i = 1, nb do
    local limit = tonumber(ARGV[4 + i])
    local interval = period / limit
    local tat = tonumber(redis.call('GET', KEYS[i])) or now
    if tat < now then tat = now end
    local new, fit = 0, 1
    if settle then
      new = tat + (tonumber(ARGV[4]) - math.min(a, limit)) * interval
      if new > now + period then new = now + period end
      if new < now then new = now end
    else
      new = tat + math.min(a, limit) * interval
      if new - now > period then fit = 0; allowed = 0 end
    end
    rows[i] = {limit, tat, new, fit}
  end
  out[1] = allowed
  for i = 1, nb do
    local limit, kept, new, fit = rows[i][1], rows[i][2], rows[i][3], rows[i][4]
    if allowed == 1 then
      kept = new
      if kept > now then
        redis.call('PSETEX', KEYS[i], math.ceil((kept - now) / 1000) + 1, string.format('%.3f', kept))
      else
        redis.call('DEL', KEYS[i])
      end
    end
    local retry = 0
    if fit == 0 then retry = new - period - now end
    out[#out + 1] = fit
    out[#out + 1] = limit
    out[#out + 1] = math.floor(math.max(0, (now + period - kept) / (period / limit)))
    out[#out + 1] = math.ceil(kept - now)
    out[#out + 1] = math.ceil(retry)
  end
end
if allowed == 1 then
  for j = 1, ncaps do
    local amount = ARGV[4 * j + nb + 2]
    if caps[3 * j] and amount ~= '0' then
      caps[3 * j] = redis.call('INCRBY', KEYS[nb + j], amount)
    end
  end
end
for j = 1, #caps do out[#out + 1] = caps[j] end
return out
",
    )
});

/// Token allowances in Redis, shared by every replica: one round trip per reservation and
/// per settlement. Keys: `{prefix}svc:{<org_id>}:tpm` for the org and
/// `{prefix}svc:{<org_id>}:tpm:<token_id>` for a token, each expiring when its bucket is
/// full again.
#[derive(Debug, Clone)]
pub struct RedisTokenBudgetStore {
    pool: RedisPool,
    prefix: Arc<str>,
}

impl RedisTokenBudgetStore {
    /// A store on `pool` with keys prefixed by `prefix`.
    pub fn new(pool: RedisPool, prefix: impl Into<String>) -> RedisTokenBudgetStore {
        RedisTokenBudgetStore {
            pool,
            prefix: Arc::from(prefix.into()),
        }
    }

    fn run(&self, budget: TokenBudget, op: Op) -> StoreFuture<TokenDecision> {
        if !budget.is_limited() {
            return Box::pin(std::future::ready(Ok(budget.unmetered())));
        }
        let run = self.run_capped(budget, op, Vec::new());
        Box::pin(async move {
            match run.await? {
                CappedDecision::Counted { tokens, .. } => Ok(tokens),
                CappedDecision::Missing(_) => Err(unexpected()),
            }
        })
    }

    /// One script over the limited buckets and `caps` (a settlement sends each cap's first
    /// figure, its correction, alone).
    fn run_capped(
        &self,
        budget: TokenBudget,
        op: Op,
        caps: Vec<(String, [i64; 4])>,
    ) -> StoreFuture<CappedDecision> {
        let pool = self.pool.clone();
        let key = |suffix: &str| org_key(&self.prefix, &budget.org_id, suffix);
        // Figures sent per cap, and cap states answered: a settlement answers none.
        let (name, a, b, figures, states) = match op {
            Op::Reserve(tokens) => ("reserve", tokens, 0, 4, caps.len()),
            Op::Settle { reserved, used } => ("settle", reserved, used, 1, 0),
        };
        let limited = [budget.org_limit, budget.token_limit];
        let mut invocation = SCRIPT.prepare_invoke();
        invocation
            .arg(name)
            .arg(limited.iter().flatten().count())
            .arg(a)
            .arg(b);
        if let Some(limit) = budget.org_limit {
            invocation.key(key("tpm")).arg(limit);
        }
        if let Some(limit) = budget.token_limit {
            invocation
                .key(key(&format!("tpm:{}", budget.token_id)))
                .arg(limit);
        }
        for (name, cap) in &caps {
            invocation.key(key(&format!("cap:{name}")));
            for figure in &cap[..figures] {
                invocation.arg(*figure);
            }
        }
        Box::pin(async move {
            let reply: Vec<i64> = pool.invoke(&invocation).await?;
            decode(&reply, budget, states)
        })
    }
}

fn unexpected() -> StoreError {
    StoreError::new("unexpected token budget script reply")
}

/// The script's reply for `budget` and `caps` caps.
fn decode(reply: &[i64], budget: TokenBudget, caps: usize) -> Result<CappedDecision, StoreError> {
    let count = |v: i64| u64::try_from(v).unwrap_or(0);
    if let Some((-1, missing)) = reply.split_first() {
        let missing = missing.iter().map(|i| usize::try_from(*i).unwrap_or(0));
        return Ok(CappedDecision::Missing(missing.collect()));
    }
    let [_allowed, n, rest @ ..] = reply else {
        return Err(unexpected());
    };
    let buckets = usize::try_from(*n).map_err(|_| unexpected())? * 5;
    if rest.len() != buckets + caps * 3 {
        return Err(unexpected());
    }
    let (buckets, states) = rest.split_at(buckets);
    let tokens = if buckets.is_empty() {
        budget.unmetered()
    } else {
        let figures = buckets.chunks_exact(5).map(|b| TokenDecision {
            allowed: b[0] == 1,
            limit: count(b[1]),
            remaining: count(b[2]),
            reset_after_secs: count(b[3]).div_ceil(1_000_000),
            retry_after_secs: if b[0] == 1 {
                0
            } else {
                count(b[4]).div_ceil(1_000_000).max(1)
            },
        });
        let fits_buckets = figures.clone().all(|d| d.allowed);
        TokenDecision {
            allowed: fits_buckets,
            ..binding(figures)
        }
    };
    let caps = states
        .chunks_exact(3)
        .map(|c| CapState {
            fits: c[0] == 1,
            limit: count(c[1]),
            spent: count(c[2]),
        })
        .collect();
    Ok(CappedDecision::Counted { tokens, caps })
}

impl TokenBudgetStore for RedisTokenBudgetStore {
    fn reserve(&self, budget: TokenBudget, tokens: u64) -> StoreFuture<TokenDecision> {
        self.run(budget, Op::Reserve(tokens))
    }

    fn settle(&self, budget: TokenBudget, reserved: u64, used: u64) -> StoreFuture<TokenDecision> {
        self.run(budget, Op::Settle { reserved, used })
    }

    fn reserve_capped(
        &self,
        budget: TokenBudget,
        tokens: u64,
        caps: Vec<SpendCap>,
    ) -> StoreFuture<CappedDecision> {
        if caps.is_empty() && !budget.is_limited() {
            return Box::pin(std::future::ready(Ok(CappedDecision::Counted {
                tokens: budget.unmetered(),
                caps: Vec::new(),
            })));
        }
        let figure = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let caps = caps
            .into_iter()
            .map(|cap| {
                let seed = cap.seed.map_or(-1, figure);
                let figures = [
                    figure(cap.limit),
                    figure(cap.amount),
                    figure(cap.ttl_secs.max(1)),
                    seed,
                ];
                (cap.name, figures)
            })
            .collect();
        self.run_capped(budget, Op::Reserve(tokens), caps)
    }

    fn settle_capped(
        &self,
        budget: TokenBudget,
        reserved: u64,
        used: u64,
        caps: Vec<CapCharge>,
    ) -> StoreFuture<TokenDecision> {
        if caps.is_empty() {
            return self.settle(budget, reserved, used);
        }
        let figure = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let caps = caps
            .into_iter()
            .map(|cap| {
                let correction = figure(cap.used).saturating_sub(figure(cap.reserved));
                (cap.name, [correction, 0, 0, 0])
            })
            .collect();
        let run = self.run_capped(budget, Op::Settle { reserved, used }, caps);
        Box::pin(async move {
            match run.await? {
                CappedDecision::Counted { tokens, .. } => Ok(tokens),
                CappedDecision::Missing(_) => Err(unexpected()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;

    fn store() -> (RedisTokenBudgetStore, RedisPool, String) {
        let pool = RedisPool::new(&svc_testkit::redis_url()).unwrap();
        let prefix = svc_testkit::redis_prefix();
        let store = RedisTokenBudgetStore::new(pool.clone(), prefix.clone());
        (store, pool, prefix)
    }

    #[tokio::test]
    async fn reservations_fit_or_take_nothing_and_settle_back() {
        let (store, _, _) = store();
        let budget = TokenBudget::org(Uuid::new_v4(), 1_000);
        let mut passed = 0;
        for _ in 0..5 {
            if store.reserve(budget, 300).await.unwrap().allowed {
                passed += 1;
            }
        }
        assert_eq!(passed, 3);
        let refused = store.reserve(budget, 300).await.unwrap();
        assert!(!refused.allowed);
        assert!((1..=18).contains(&refused.retry_after_secs), "{refused:?}");
        // Each of the three used 10 tokens: 870 come back.
        for _ in 0..3 {
            store.settle(budget, 300, 10).await.unwrap();
        }
        let after = store.reserve(budget, 300).await.unwrap();
        assert!(after.allowed);
        assert!((660..=671).contains(&after.remaining), "{after:?}");
    }

    #[tokio::test]
    async fn an_overshoot_costs_one_window_at_most() {
        let (store, _, _) = store();
        let budget = TokenBudget::org(Uuid::new_v4(), 10_000);
        assert!(store.reserve(budget, 500).await.unwrap().allowed);
        // The call used sixty times the limit.
        store.settle(budget, 500, 600_000).await.unwrap();
        let refused = store.reserve(budget, 500).await.unwrap();
        assert!(!refused.allowed);
        assert!((1..=60).contains(&refused.retry_after_secs), "{refused:?}");
        assert!(refused.reset_after_secs <= 60, "{refused:?}");
    }

    #[tokio::test]
    async fn the_tokens_bucket_shares_the_orgs_slot_and_binds_when_stricter() {
        let (store, pool, prefix) = store();
        let (org, token) = (Uuid::new_v4(), Uuid::new_v4());
        let budget = TokenBudget::org(org, 10_000).with_token(token, Some(100));
        let first = store.reserve(budget, 80).await.unwrap();
        assert_eq!(
            (first.allowed, first.limit, first.remaining),
            (true, 100, 20)
        );
        let refused = store.reserve(budget, 80).await.unwrap();
        assert_eq!((refused.allowed, refused.limit), (false, 100));
        for key in [
            format!("{prefix}svc:{{{org}}}:tpm"),
            format!("{prefix}svc:{{{org}}}:tpm:{token}"),
        ] {
            let ttl_ms: i64 = pool.query(redis::cmd("PTTL").arg(&key)).await.unwrap();
            assert!((1..=60_002).contains(&ttl_ms), "{key}: {ttl_ms}");
        }
    }

    /// Only the buckets that are limited travel to the script, so a token's bucket alone is the
    /// script's first key: the figures must still be the in-memory store's, bucket by bucket.
    #[tokio::test]
    async fn any_set_of_buckets_and_caps_counts_as_in_memory() {
        use super::super::tokens::MemoryTokenBudgetStore;
        let (store, pool, prefix) = store();
        let memory = MemoryTokenBudgetStore::new();
        // The remaining tokens refill by each store's clock between the two calls: within one.
        let same = |r: TokenDecision, m: TokenDecision| {
            (r.allowed, r.limit) == (m.allowed, m.limit) && r.remaining.abs_diff(m.remaining) <= 1
        };
        for (org_limit, token_limit) in [
            (Some(1_000), None),
            (None, Some(500)),
            (Some(800), Some(300)),
        ] {
            let (org, token) = (Uuid::new_v4(), Uuid::new_v4());
            let budget = TokenBudget {
                org_id: org,
                org_limit,
                token_id: token,
                token_limit,
            };
            for (reserve, used) in [(200, 50), (400, 400), (250, 10), (900, 0), (100, 100)] {
                let caps = || vec![cap("c", 10_000, reserve, Some(0))];
                let in_redis = store.reserve_capped(budget, reserve, caps()).await.unwrap();
                let in_memory = memory
                    .reserve_capped(budget, reserve, caps())
                    .await
                    .unwrap();
                let (
                    CappedDecision::Counted {
                        tokens: r,
                        caps: rc,
                    },
                    CappedDecision::Counted {
                        tokens: m,
                        caps: mc,
                    },
                ) = (in_redis, in_memory)
                else {
                    panic!("both counted")
                };
                assert!(same(r, m), "{budget:?} reserving {reserve}: {r:?} {m:?}");
                assert_eq!(rc, mc, "{budget:?} reserving {reserve}");
                if r.allowed {
                    let charge = || {
                        vec![CapCharge {
                            name: "c".to_owned(),
                            reserved: reserve,
                            used,
                        }]
                    };
                    let r = store
                        .settle_capped(budget, reserve, used, charge())
                        .await
                        .unwrap();
                    let m = memory
                        .settle_capped(budget, reserve, used, charge())
                        .await
                        .unwrap();
                    assert!(same(r, m), "{budget:?} settling {used}: {r:?} {m:?}");
                }
            }
            // A bucket without a limit is never written.
            for (limit, suffix) in [
                (org_limit, "tpm".to_owned()),
                (token_limit, format!("tpm:{token}")),
            ] {
                let exists: i64 = pool
                    .query(redis::cmd("EXISTS").arg(format!("{prefix}svc:{{{org}}}:{suffix}")))
                    .await
                    .unwrap();
                assert_eq!(exists == 1, limit.is_some(), "{suffix} of {budget:?}");
            }
        }
    }

    fn cap(name: &str, limit: u64, amount: u64, seed: Option<u64>) -> SpendCap {
        SpendCap {
            name: name.to_owned(),
            limit,
            amount,
            ttl_secs: 60,
            seed,
        }
    }

    #[tokio::test]
    async fn caps_are_taken_with_the_tokens_all_or_nothing_and_never_overshoot() {
        let (store, pool, prefix) = store();
        let org = Uuid::new_v4();
        let budget = TokenBudget::org(org, 1_000_000);
        // A missing counter is reported, and nothing is taken.
        let missing = store
            .reserve_capped(
                budget,
                10,
                vec![cap("a", 100, 10, None), cap("b", 5, 1, Some(0))],
            )
            .await
            .unwrap();
        assert_eq!(missing, CappedDecision::Missing(vec![0]));
        let tpm: Option<String> = pool
            .query(redis::cmd("GET").arg(format!("{prefix}svc:{{{org}}}:tpm")))
            .await
            .unwrap();
        assert_eq!(tpm, None, "a missing cap takes no tokens");
        // Seeded from a durable record: 30 already spent of 100; 64 racing reservations of 10
        // leave room for exactly seven.
        let mut racing = Vec::new();
        for _ in 0..64 {
            let store = store.clone();
            racing.push(tokio::spawn(async move {
                store
                    .reserve_capped(budget, 10, vec![cap("a", 100, 10, Some(30))])
                    .await
                    .unwrap()
            }));
        }
        let mut allowed = 0;
        for race in racing {
            if race.await.unwrap().allowed() {
                allowed += 1;
            }
        }
        assert_eq!(allowed, 7);
        let key = format!("{prefix}svc:{{{org}}}:cap:a");
        let counter: i64 = pool.query(redis::cmd("GET").arg(&key)).await.unwrap();
        assert_eq!(counter, 100);
        let ttl: i64 = pool.query(redis::cmd("TTL").arg(&key)).await.unwrap();
        assert!((1..=60).contains(&ttl), "{ttl}");
        // A refusal names the cap that did not fit and takes nothing from the tokens.
        let refused = store
            .reserve_capped(budget, 10, vec![cap("a", 100, 10, None)])
            .await
            .unwrap();
        let CappedDecision::Counted { tokens, caps } = refused else {
            panic!("counted")
        };
        assert!(tokens.allowed);
        assert_eq!(
            caps,
            vec![CapState {
                fits: false,
                limit: 100,
                spent: 100
            }]
        );
        // Settling gives back what a call did not use, never below zero.
        let charge = |reserved, used| CapCharge {
            name: "a".to_owned(),
            reserved,
            used,
        };
        store
            .settle_capped(budget, 10, 1, vec![charge(10, 4)])
            .await
            .unwrap();
        let counter: i64 = pool.query(redis::cmd("GET").arg(&key)).await.unwrap();
        assert_eq!(counter, 94);
        store
            .settle_capped(budget, 10, 1, vec![charge(500, 0)])
            .await
            .unwrap();
        let counter: i64 = pool.query(redis::cmd("GET").arg(&key)).await.unwrap();
        assert_eq!(counter, 0);
        // A counter that is gone stays gone: the record it is rebuilt from has the call.
        let gone = CapCharge {
            name: "gone".to_owned(),
            reserved: 1,
            used: 5,
        };
        store
            .settle_capped(budget, 10, 1, vec![gone])
            .await
            .unwrap();
        let exists: i64 = pool
            .query(redis::cmd("EXISTS").arg(format!("{prefix}svc:{{{org}}}:cap:gone")))
            .await
            .unwrap();
        assert_eq!(exists, 0);
    }
}
