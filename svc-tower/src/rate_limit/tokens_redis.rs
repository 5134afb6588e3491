//! [`TokenBudgetStore`] in Redis: one script per reservation or settlement, over the org's
//! bucket and the token's, which share the org's hash tag and so one slot of a cluster.

use std::sync::{Arc, LazyLock};

use redis::Script;

use super::caps::{CapCharge, CapState, SpendCap};
use super::redis::STORED_TAT;
use super::tokens::{
    Bucket, CappedDecision, Op, TokenBudget, TokenBudgetStore, TokenDecision, apply,
};
use crate::store::{RedisPool, StoreError, StoreFuture, org_key};

/// The decision of `tokens::apply`, on the Redis clock, and the spend caps beside it.
///
/// KEYS: the limited buckets (the org's, then the token's; none, one or both), then one
/// counter per cap. ARGV: the mode (`r` a reservation, `s` a reservation seeding missing
/// counters, `x` a settlement), how many bucket keys, the tokens (or reserved), for a
/// settlement the used tokens, each bucket's limit, then per cap: for `r` its limit and
/// amount, for `s` also its TTL in seconds and seed, for `x` its correction. Returns `-1` and
/// the missing caps' indexes (from 0) when a counter is missing in mode `r`; otherwise
/// whether the reservation was taken (1) or not (0), each cap's counter before it (a
/// reservation only), and per bucket how far its TAT was ahead of now before the call, in
/// nanoseconds: `tokens::apply` derives every figure of the decision from those, as the
/// memory store does.
///
/// Each argument, each reply value, each `redis.call` and each number crossing between a
/// string and Lua costs more inside Redis than the arithmetic, so a bucket or a figure that
/// does not apply is not sent, values that only pass through (a seed, an amount, a correction)
/// go to Redis as the strings they came as, the buckets' `TIME` is read only when a bucket is
/// limited, a TAT is stored as the 8 bytes of a double with a literal TTL of a minute (a TAT
/// is never further ahead than that), and a settlement corrects a counter with one `INCRBY`:
/// a counter that answers with exactly the correction was missing (or at zero), and is
/// deleted, for the next reservation to rebuild it from the ledger.
static SCRIPT: LazyLock<Script> = LazyLock::new(|| {
    let script = r"
local mode = ARGV[1]
local nb = tonumber(ARGV[2])
local settle = mode == 'x'
local at = 3 + nb
if settle then at = at + 1 end
local ncaps = #KEYS - nb
local out = {1}
if settle then
  for j = 1, ncaps do
    local delta = ARGV[at + j]
    if delta ~= '0' then
      local key = KEYS[nb + j]
      local v = redis.call('INCRBY', key, delta)
      if v == tonumber(delta) then
        redis.call('DEL', key)
      elseif v < 0 then
        redis.call('SET', key, '0', 'KEEPTTL')
      end
    end
  end
elseif ncaps > 0 then
  local stride = 2
  if mode == 's' then stride = 4 end
  local missing
  for j = 1, ncaps do
    local f = at + stride * (j - 1)
    local v = redis.call('GET', KEYS[nb + j])
    if v then
      v = tonumber(v)
    elseif stride == 4 and ARGV[f + 4] ~= '-1' then
      redis.call('SETEX', KEYS[nb + j], ARGV[f + 3], ARGV[f + 4])
      v = tonumber(ARGV[f + 4])
    else
      missing = missing or {-1}
      missing[#missing + 1] = j - 1
    end
    if v then
      if v + tonumber(ARGV[f + 2]) > tonumber(ARGV[f + 1]) then out[1] = 0 end
      out[#out + 1] = v
    end
  end
  if missing then return missing end
end
if nb > 0 then
  local t = redis.call('TIME')
  local now = t[1] * 1000000 + t[2]
  local a = tonumber(ARGV[3])
  local first = #out
  local news = {}
  for i = 1, nb do
    local limit = tonumber(ARGV[at - nb + i])
    local tat = stored(redis.call('GET', KEYS[i])) or now
    if tat < now then tat = now end
    local take = a
    if take > limit then take = limit end
    local new
    if settle then
      new = tat + (tonumber(ARGV[4]) - take) * 60000000 / limit
      if new > now + 60000000 then new = now + 60000000 end
    else
      new = tat + take * 60000000 / limit
      if new > now + 60000000 then out[1] = 0 end
    end
    news[i] = new
    out[first + i] = (tat - now) * 1000
  end
  if out[1] == 1 then
    for i = 1, nb do
      if news[i] > now then
        store(KEYS[i], news[i])
      else
        redis.call('DEL', KEYS[i])
      end
    end
  end
end
if out[1] == 1 and not settle then
  for j = 1, ncaps do
    local amount = ARGV[at + 2 * j]
    if mode == 's' then amount = ARGV[at + 4 * j - 2] end
    if amount ~= '0' then redis.call('INCRBY', KEYS[nb + j], amount) end
  end
end
return out
";
    Script::new(&[STORED_TAT, script].concat())
});

/// Token allowances in Redis, shared by every replica: one round trip per reservation and
/// per settlement. Keys: `{prefix}svc:{<org_id>}:tpm` for the org and
/// `{prefix}svc:{<org_id>}:tpm:<token_id>` for a token, each expiring a minute after its
/// last write (by then its bucket is full again).
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

    /// One script over the limited buckets and `caps`: for a reservation each cap's limit and
    /// amount, and its TTL and seed too when `seeding`; for a settlement its correction.
    fn run_capped(
        &self,
        budget: TokenBudget,
        op: Op,
        caps: Vec<(String, Figures)>,
    ) -> StoreFuture<CappedDecision> {
        let pool = self.pool.clone();
        let key = |suffix: &str| org_key(&self.prefix, &budget.org_id, suffix);
        let seeding = caps
            .iter()
            .any(|(_, f)| matches!(f, Figures::Seeding { .. }));
        let mut invocation = SCRIPT.prepare_invoke();
        let mode = match op {
            Op::Reserve(_) if seeding => "s",
            Op::Reserve(_) => "r",
            Op::Settle { .. } => "x",
        };
        let limited = [budget.org_limit, budget.token_limit];
        invocation.arg(mode).arg(limited.iter().flatten().count());
        match op {
            Op::Reserve(tokens) => invocation.arg(tokens),
            Op::Settle { reserved, used } => invocation.arg(reserved).arg(used),
        };
        if let Some(limit) = budget.org_limit {
            invocation.key(key("tpm")).arg(limit);
        }
        if let Some(limit) = budget.token_limit {
            invocation
                .key(key(&format!("tpm:{}", budget.token_id)))
                .arg(limit);
        }
        let counted = caps.len();
        let mut sent = Vec::with_capacity(counted);
        for (name, figures) in caps {
            invocation.key(key(&format!("cap:{name}")));
            match figures {
                Figures::Taking { limit, amount } => {
                    invocation.arg(limit).arg(amount);
                    if seeding {
                        invocation.arg(1).arg(-1);
                    }
                    sent.push((limit, amount));
                }
                Figures::Seeding {
                    limit,
                    amount,
                    ttl_secs,
                    seed,
                } => {
                    invocation.arg(limit).arg(amount).arg(ttl_secs).arg(seed);
                    sent.push((limit, amount));
                }
                Figures::Correcting(correction) => {
                    invocation.arg(correction);
                }
            }
        }
        let limits: Vec<u64> = limited.into_iter().flatten().collect();
        Box::pin(async move {
            let reply: Vec<i64> = pool.invoke(&invocation).await?;
            decode(&reply, budget, op, &limits, &sent, counted)
        })
    }
}

/// What one cap sends to the script.
#[derive(Debug, Clone, Copy)]
enum Figures {
    /// A reservation of `amount` under `limit`.
    Taking { limit: i64, amount: i64 },
    /// The same, seeding a missing counter with `seed` that lives `ttl_secs`.
    Seeding {
        limit: i64,
        amount: i64,
        ttl_secs: i64,
        seed: i64,
    },
    /// A settlement's correction of the counter.
    Correcting(i64),
}

/// A count as the script takes it.
fn figure(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn unexpected() -> StoreError {
    StoreError::new("unexpected token budget script reply")
}

/// The script's reply to `op` over buckets of `limits` and caps `sent` (limit and amount of
/// each, a reservation's) out of `counted`.
fn decode(
    reply: &[i64],
    budget: TokenBudget,
    op: Op,
    limits: &[u64],
    sent: &[(i64, i64)],
    counted: usize,
) -> Result<CappedDecision, StoreError> {
    let count = |v: i64| u64::try_from(v).unwrap_or(0);
    if let Some((-1, missing)) = reply.split_first() {
        let missing = missing.iter().map(|i| usize::try_from(*i).unwrap_or(0));
        return Ok(CappedDecision::Missing(missing.collect()));
    }
    let counters = if matches!(op, Op::Reserve(_)) {
        counted
    } else {
        0
    };
    let [taken, rest @ ..] = reply else {
        return Err(unexpected());
    };
    if rest.len() != counters + limits.len() {
        return Err(unexpected());
    }
    let taken = *taken == 1;
    let (counters, aheads) = rest.split_at(counters);
    let tokens = if limits.is_empty() {
        budget.unmetered()
    } else {
        // Each TAT as far ahead of a `now` of 0 as the script found it, in µs.
        let buckets: Vec<Bucket> = limits
            .iter()
            .zip(aheads)
            .map(|(limit, ahead)| Bucket {
                limit: *limit,
                tat: *ahead as f64 / 1_000.0,
            })
            .collect();
        let (decision, _) = apply(&buckets, op, 0.0);
        if decision.allowed && !taken {
            // The buckets had room but a cap refused: nothing was taken from them.
            TokenDecision {
                allowed: true,
                ..apply(&buckets, Op::Reserve(0), 0.0).0
            }
        } else {
            decision
        }
    };
    let caps = sent
        .iter()
        .zip(counters)
        .map(|((limit, amount), counter)| {
            let (limit, amount, before) = (count(*limit), count(*amount), count(*counter));
            CapState {
                fits: before.saturating_add(amount) <= limit,
                limit,
                spent: if taken {
                    before.saturating_add(amount)
                } else {
                    before
                },
            }
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
        let caps = caps
            .into_iter()
            .map(|cap| {
                let (limit, amount) = (figure(cap.limit), figure(cap.amount));
                let figures = match cap.seed {
                    Some(seed) => Figures::Seeding {
                        limit,
                        amount,
                        ttl_secs: figure(cap.ttl_secs.max(1)),
                        seed: figure(seed),
                    },
                    None => Figures::Taking { limit, amount },
                };
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
        let caps = caps
            .into_iter()
            .map(|cap| {
                let correction = figure(cap.used).saturating_sub(figure(cap.reserved));
                (cap.name, Figures::Correcting(correction))
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
            assert!((1..=60_000).contains(&ttl_ms), "{key}: {ttl_ms}");
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

    /// The budget counter at `key`; `None` when there is none.
    async fn counter(pool: &RedisPool, key: &str) -> Option<i64> {
        pool.query(redis::cmd("GET").arg(key)).await.unwrap()
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
        assert_eq!(counter(&pool, &key).await, Some(100));
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
        assert_eq!(counter(&pool, &key).await, Some(94));
        store
            .settle_capped(budget, 10, 1, vec![charge(500, 0)])
            .await
            .unwrap();
        assert_eq!(counter(&pool, &key).await, Some(0));
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
        let gone = format!("{prefix}svc:{{{org}}}:cap:gone");
        assert_eq!(counter(&pool, &gone).await, None);
        // So is one at zero that a call adds to: no reservation of that call is in it (it
        // would not be at zero), so the ledger, which has the call, rebuilds it.
        store
            .settle_capped(budget, 10, 1, vec![charge(1, 6)])
            .await
            .unwrap();
        assert_eq!(counter(&pool, &key).await, None);
        let missing = store
            .reserve_capped(budget, 10, vec![cap("a", 100, 10, None)])
            .await
            .unwrap();
        assert_eq!(missing, CappedDecision::Missing(vec![0]));
    }
}
