//! [`TokenBudgetStore`] in Redis: one script per reservation or settlement, over the org's
//! bucket and the token's, which share the org's hash tag and so one slot of a cluster.

use std::sync::{Arc, LazyLock};

use redis::Script;

use super::tokens::{Op, TokenBudget, TokenBudgetStore, TokenDecision, binding};
use crate::store::{RedisPool, StoreError, StoreFuture, org_key};

/// The arithmetic of `tokens::apply`, on the Redis clock. KEYS: the org's bucket, the
/// token's. ARGV: `reserve` or `settle`, the tokens (or reserved), the used tokens, the org's
/// limit and the token's (0: none). Returns `allowed`, then per limited bucket `fits, limit,
/// remaining, reset_us, retry_us`. TATs are µs of the server's TIME, so replicas with skewed
/// clocks agree.
static SCRIPT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local period = 60000000
local op = ARGV[1]
local a = tonumber(ARGV[2])
local b = tonumber(ARGV[3])
local n, allowed = 0, 1
local keys, limits, tats, news, fits = {}, {}, {}, {}, {}
for i = 1, 2 do
  local limit = tonumber(ARGV[3 + i])
  if limit > 0 then
    n = n + 1
    local interval = period / limit
    local tat = tonumber(redis.call('GET', KEYS[i])) or now
    if tat < now then tat = now end
    local new, fit = 0, 1
    if op == 'reserve' then
      new = tat + math.min(a, limit) * interval
      if new - now > period then fit = 0; allowed = 0 end
    else
      new = tat + (b - math.min(a, limit)) * interval
      if new > now + period then new = now + period end
      if new < now then new = now end
    end
    keys[n], limits[n], tats[n], news[n], fits[n] = KEYS[i], limit, tat, new, fit
  end
end
local out = {allowed}
for i = 1, n do
  local kept = tats[i]
  if allowed == 1 then
    kept = news[i]
    if kept > now then
      redis.call('SET', keys[i], string.format('%.3f', kept), 'PX', math.ceil((kept - now) / 1000) + 1)
    else
      redis.call('DEL', keys[i])
    end
  end
  local retry = 0
  if fits[i] == 0 then retry = news[i] - period - now end
  out[#out + 1] = fits[i]
  out[#out + 1] = limits[i]
  out[#out + 1] = math.floor(math.max(0, (now + period - kept) / (period / limits[i])))
  out[#out + 1] = math.ceil(kept - now)
  out[#out + 1] = math.ceil(retry)
end
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
        let pool = self.pool.clone();
        let org = org_key(&self.prefix, &budget.org_id, "tpm");
        let token = org_key(
            &self.prefix,
            &budget.org_id,
            &format!("tpm:{}", budget.token_id),
        );
        let (name, a, b) = match op {
            Op::Reserve(tokens) => ("reserve", tokens, 0),
            Op::Settle { reserved, used } => ("settle", reserved, used),
        };
        let limits = [
            budget.org_limit.unwrap_or(0),
            budget.token_limit.unwrap_or(0),
        ];
        Box::pin(async move {
            let mut invocation = SCRIPT.prepare_invoke();
            invocation
                .key(org)
                .key(token)
                .arg(name)
                .arg(a)
                .arg(b)
                .arg(limits[0])
                .arg(limits[1]);
            let reply: Vec<i64> = pool.invoke(&invocation).await?;
            let Some((allowed, buckets)) = reply.split_first() else {
                return Err(StoreError::new("unexpected token budget script reply"));
            };
            if buckets.is_empty() || buckets.len() % 5 != 0 {
                return Err(StoreError::new("unexpected token budget script reply"));
            }
            let count = |v: i64| u64::try_from(v).unwrap_or(0);
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
            Ok(TokenDecision {
                allowed: *allowed == 1,
                ..binding(figures)
            })
        })
    }
}

impl TokenBudgetStore for RedisTokenBudgetStore {
    fn reserve(&self, budget: TokenBudget, tokens: u64) -> StoreFuture<TokenDecision> {
        self.run(budget, Op::Reserve(tokens))
    }

    fn settle(&self, budget: TokenBudget, reserved: u64, used: u64) -> StoreFuture<TokenDecision> {
        self.run(budget, Op::Settle { reserved, used })
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
}
