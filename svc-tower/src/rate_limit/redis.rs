use std::sync::{Arc, LazyLock};

use redis::Script;
use uuid::Uuid;

use super::store::{Decision, Gcra, RateLimitStore, decision_from_micros};
use crate::store::{RedisPool, StoreError, StoreFuture, org_key};

/// GCRA in one script, so a decision is one round trip and atomic across replicas.
///
/// KEYS[1] holds the org's theoretical arrival time (TAT) in microseconds of the Redis
/// server's clock (TIME), so replicas with skewed clocks still agree. Returns
/// `{allowed, remaining, reset_us, retry_us}`.
static GCRA_SCRIPT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.replicate_commands then redis.replicate_commands() end
local limit = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local capacity = interval * limit
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local new_tat = tat + interval
if new_tat > now + capacity then
  return {0, 0, tat - now, new_tat - capacity - now}
end
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.ceil((new_tat - now) / 1000))
return {1, math.floor((now + capacity - new_tat) / interval), new_tat - now, 0}
",
    )
});

/// Gives back one request [`GCRA_SCRIPT`] allowed: the TAT moves back one interval, and a TAT
/// no later than now is deleted, which is the same as a whole allowance.
static REFUND_SCRIPT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.replicate_commands then redis.replicate_commands() end
local tat = tonumber(redis.call('GET', KEYS[1]))
if not tat then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local new_tat = tat - tonumber(ARGV[1])
if new_tat <= now then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.ceil((new_tat - now) / 1000))
end
return 1
",
    )
});

/// A rate-limit store in Redis, shared by every replica: one round trip per decision.
///
/// # Algorithm and exactness
///
/// GCRA (the Generic Cell Rate Algorithm, as in `redis-cell` and Stripe's limiter): an org
/// may send `limit` requests at once, then one every `60 s / limit`. It is exact for bursts:
/// of any number of requests arriving together, precisely `limit` pass, however many replicas
/// they hit, because the script reads, decides and writes atomically on the Redis clock. Over
/// an arbitrary sliding minute an org that first bursts and then keeps the sustained rate can
/// get up to `2 * limit - 1` requests through: the allowance refills continuously rather than
/// at a window edge, which is what spares clients a thundering herd at every minute boundary.
/// The interval is whole microseconds (`60_000_000 / limit`, rounded down), an error below
/// one request per minute for any limit under a million.
///
/// The state is one small string key per active org, `{prefix}svc:{<org_id>}:rl`, that
/// expires when the org's allowance is whole again.
#[derive(Debug, Clone)]
pub struct RedisRateLimitStore {
    pool: RedisPool,
    prefix: Arc<str>,
}

impl RedisRateLimitStore {
    /// A store on `pool` with keys prefixed by `prefix` (empty in production; tests use a
    /// random one).
    pub fn new(pool: RedisPool, prefix: impl Into<String>) -> RedisRateLimitStore {
        RedisRateLimitStore {
            pool,
            prefix: Arc::from(prefix.into()),
        }
    }
}

impl RateLimitStore for RedisRateLimitStore {
    fn check(&self, org_id: Uuid, limit: u32) -> StoreFuture<Decision> {
        self.check_key(org_key(&self.prefix, &org_id, "rl"), limit)
    }

    /// The token's allowance lives under its org's hash tag, `svc:{<org_id>}:rl:<token_id>`:
    /// the same cluster slot as the org's.
    fn check_token(&self, org_id: Uuid, token_id: Uuid, limit: u32) -> StoreFuture<Decision> {
        self.check_key(token_key(&self.prefix, org_id, token_id), limit)
    }

    fn refunds(&self) -> bool {
        true
    }

    fn refund(&self, org_id: Uuid, limit: u32) -> StoreFuture<()> {
        self.refund_key(org_key(&self.prefix, &org_id, "rl"), limit)
    }

    fn refund_token(&self, org_id: Uuid, token_id: Uuid, limit: u32) -> StoreFuture<()> {
        self.refund_key(token_key(&self.prefix, org_id, token_id), limit)
    }
}

fn token_key(prefix: &str, org_id: Uuid, token_id: Uuid) -> String {
    org_key(prefix, &org_id, &format!("rl:{token_id}"))
}

impl RedisRateLimitStore {
    fn refund_key(&self, key: String, limit: u32) -> StoreFuture<()> {
        let pool = self.pool.clone();
        let interval = Gcra::new(limit).interval_us();
        Box::pin(async move {
            let mut invocation = REFUND_SCRIPT.prepare_invoke();
            invocation.key(key).arg(interval);
            let _given_back: i64 = pool.invoke(&invocation).await?;
            Ok(())
        })
    }

    fn check_key(&self, key: String, limit: u32) -> StoreFuture<Decision> {
        let pool = self.pool.clone();
        let limit = limit.max(1);
        let gcra = Gcra::new(limit);
        Box::pin(async move {
            let mut invocation = GCRA_SCRIPT.prepare_invoke();
            invocation.key(key).arg(limit).arg(gcra.interval_us());
            let reply: Vec<i64> = pool.invoke(&invocation).await?;
            let [allowed, remaining, reset_us, retry_us] = reply[..] else {
                return Err(StoreError::new("unexpected rate-limit script reply"));
            };
            let micros = |v: i64| u64::try_from(v).unwrap_or(0);
            Ok(decision_from_micros(
                allowed == 1,
                u64::from(limit),
                micros(remaining),
                micros(reset_us),
                micros(retry_us),
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> RedisRateLimitStore {
        let pool = RedisPool::new(&svc_testkit::redis_url()).unwrap();
        RedisRateLimitStore::new(pool, svc_testkit::redis_prefix())
    }

    #[tokio::test]
    async fn a_burst_of_exactly_the_limit_passes() {
        let store = store();
        let org = Uuid::new_v4();
        let mut remaining = Vec::new();
        for _ in 0..7 {
            let decision = store.check(org, 5).await.unwrap();
            remaining.push((decision.allowed, decision.remaining));
        }
        assert_eq!(
            remaining,
            [
                (true, 4),
                (true, 3),
                (true, 2),
                (true, 1),
                (true, 0),
                (false, 0),
                (false, 0)
            ]
        );
        let refused = store.check(org, 5).await.unwrap();
        assert_eq!(refused.limit, 5);
        assert!((1..=12).contains(&refused.retry_after_secs));
        assert!((59..=60).contains(&refused.reset_after_secs));
    }

    #[tokio::test]
    async fn the_key_carries_the_org_hash_tag_and_expires() {
        let pool = RedisPool::new(&svc_testkit::redis_url()).unwrap();
        let prefix = svc_testkit::redis_prefix();
        let store = RedisRateLimitStore::new(pool.clone(), prefix.clone());
        let org = Uuid::new_v4();
        store.check(org, 10).await.unwrap();
        let key = format!("{prefix}svc:{{{org}}}:rl");
        let ttl_ms: i64 = pool.query(redis::cmd("PTTL").arg(&key)).await.unwrap();
        assert!((1..=6_000).contains(&ttl_ms), "ttl {ttl_ms}");
    }

    #[tokio::test]
    async fn a_refund_gives_back_one_request() {
        let store = store();
        let (org, token) = (Uuid::new_v4(), Uuid::new_v4());
        for _ in 0..3 {
            assert!(store.check(org, 3).await.unwrap().allowed);
            assert!(store.check_token(org, token, 3).await.unwrap().allowed);
        }
        assert!(!store.check(org, 3).await.unwrap().allowed);
        store.refund(org, 3).await.unwrap();
        store.refund_token(org, token, 3).await.unwrap();
        let org_again = store.check(org, 3).await.unwrap();
        assert!(org_again.allowed);
        assert_eq!(org_again.remaining, 0);
        assert!(store.check_token(org, token, 3).await.unwrap().allowed);
        // A refund of an allowance already whole leaves it whole.
        let fresh = Uuid::new_v4();
        store.refund(fresh, 3).await.unwrap();
        assert_eq!(store.check(fresh, 3).await.unwrap().remaining, 2);
    }

    #[tokio::test]
    async fn orgs_are_limited_independently() {
        let store = store();
        let (noisy, quiet) = (Uuid::new_v4(), Uuid::new_v4());
        for _ in 0..3 {
            store.check(noisy, 2).await.unwrap();
        }
        assert!(!store.check(noisy, 2).await.unwrap().allowed);
        assert!(store.check(quiet, 2).await.unwrap().allowed);
    }
}
