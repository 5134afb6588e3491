use std::sync::{Arc, LazyLock};

use redis::{Script, ScriptInvocation};
use uuid::Uuid;

use super::store::{Decision, Gcra, RateLimitStore};
use crate::store::{RedisPool, StoreError, StoreFuture, org_key};

/// GCRA in one script, so a decision is one round trip and atomic across replicas.
///
/// Each key holds a theoretical arrival time (TAT) in microseconds of the Redis server's clock
/// (TIME), so replicas with skewed clocks still agree; each is decided on its own, in order.
/// ARGV: per key, its limit and its interval in microseconds, as two little-endian doubles in
/// one argument (see [`packed`]). Answers per key how far its TAT
/// is ahead of now: the new TAT when allowed (at least the interval, so at least 1), or `-1 -`
/// the stored one when refused; [`Gcra`] derives the rest of the decision from it. One key is
/// answered with an integer, several with a list.
///
/// Inside Redis each `redis.call`, each argument and each number crossing between a string and
/// Lua costs more than the arithmetic (a 16-digit `tonumber` or a `%.17g` is thousands of
/// instructions), so the script reads the clock once for all the keys and keeps the TAT as
/// [`READ_TAT`] and [`WRITE_TAT`] say. Scripts replicate their effects, not themselves, on
/// every Redis this needs (6.0, for `KEEPTTL`), so none calls `redis.replicate_commands`.
static GCRA_SCRIPT: LazyLock<Script> = LazyLock::new(|| {
    tat_script(
        r"
local t = call('TIME')
local now = t[1] * 1000000 + t[2]
local out
for i = 1, #KEYS do
  local limit, interval = unpack('<dd', ARGV[i])
  local key = KEYS[i]
  --[[READ_TAT]]
  if not tat or tat < now then tat = now end
  local new_tat = tat + interval
  local ahead
  if new_tat > now + interval * limit then
    ahead = now - tat - 1
  else
    --[[WRITE_TAT]]
    ahead = new_tat - now
  end
  if #KEYS == 1 then return ahead end
  if out then out[i] = ahead else out = {ahead} end
end
return out
",
    )
});

/// Lua, in place of each `--[[READ_TAT]]` line: reads the TAT of `key` into `tat` (`nil` when
/// there is none) and into `until_us` the time, in µs of the Redis clock, before which the key
/// cannot expire (0: none).
///
/// A value is the TAT and that time as two little-endian doubles (16 bytes, exact below 2^53
/// µs), then, on a key whose org or token also has a tokens-per-minute limit, that bucket's TAT
/// (8 more, written by the token script), which is kept in `rest` for [`WRITE_TAT`] to put
/// back; a shorter value is taken for none. The lines are put in each script's text
/// rather than called as Lua functions: a script's `local function` is a new closure at every
/// call, which Redis then collects (about 800 instructions a call for two).
pub(super) const READ_TAT: &str = r"
  local tat, until_us, rest = nil, 0, nil
  local v = call('GET', key)
  if v and #v >= 16 then
    tat, until_us = unpack('<dd', v)
    if #v > 16 then rest = string.sub(v, 17) end
  end
";

/// Lua, in place of each `--[[WRITE_TAT]]` line: stores `new_tat` in `key`, read with
/// [`READ_TAT`] into `until_us`, at `now`. In place, its expiry kept (`KEEPTTL`), while the TAT
/// is no later than `until_us`; otherwise with an expiry two minutes from now, recorded a
/// second short of it. A TAT is never further ahead of now than a minute, so an active key's
/// expiry is renewed about once a minute and an idle one is gone at most two minutes after its
/// TAT. Setting an expiry is most of what `PSETEX` costs inside Redis: about 11,000
/// instructions, against 5,000 for `SET ... KEEPTTL`.
pub(super) const WRITE_TAT: &str = r"
  if new_tat <= until_us then
    local value = pack('<dd', new_tat, until_us)
    if rest then value = value .. rest end
    call('SET', key, value, 'KEEPTTL')
  else
    local value = pack('<dd', new_tat, now + 119000000)
    if rest then value = value .. rest end
    call('PSETEX', key, '120000', value)
  end
";

/// Lua, opening each script [`tat_script`] makes: the functions the scripts call, as locals.
/// A global (`redis`, `struct`) is a lookup in the table Redis keeps read-only for every call,
/// then one for the field: about 900 instructions a call for the token script's dozen calls.
pub(super) const PRELUDE: &str = r"
local call, unpack, pack = redis.call, struct.unpack, struct.pack
";

/// A script from Lua, after [`PRELUDE`], whose `--[[READ_TAT]]` and `--[[WRITE_TAT]]` lines
/// stand for [`READ_TAT`] and [`WRITE_TAT`].
pub(super) fn tat_script(lua: &str) -> Script {
    let lua = std::iter::once(PRELUDE.trim())
        .chain(lua.lines())
        .map(|line| match line.trim() {
            "--[[READ_TAT]]" => READ_TAT.trim_end(),
            "--[[WRITE_TAT]]" => WRITE_TAT.trim_end(),
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n");
    Script::new(&lua)
}

/// Gives back one request [`GCRA_SCRIPT`] allowed: the TAT moves back one interval, and a TAT
/// no later than now is deleted, which is the same as a whole allowance.
static REFUND_SCRIPT: LazyLock<Script> = LazyLock::new(|| {
    tat_script(
        r"
local key = KEYS[1]
--[[READ_TAT]]
if not tat then return 0 end
local t = call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local new_tat = tat - tonumber(ARGV[1])
if new_tat <= now and not rest then
  call('DEL', key)
else
  --[[WRITE_TAT]]
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
/// The state is one small string key per active org, `{prefix}svc:{<org_id>}:req`, that
/// expires once the org's allowance is whole again, at most two minutes after its last allowed
/// request. Earlier builds kept the TAT alone, in `:rl`, and would read this value as no TAT
/// at all; under a name of its own, each build counts in its own key while both run: during a
/// rolling upgrade an org served by both may pass its limit through each, twice it in all,
/// until the old replicas are gone.
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
        self.check_key(org_key(&self.prefix, &org_id, ALLOWANCE), limit)
    }

    /// The token's allowance lives under its org's hash tag, `svc:{<org_id>}:req:<token_id>`:
    /// the same cluster slot as the org's.
    fn check_token(&self, org_id: Uuid, token_id: Uuid, limit: u32) -> StoreFuture<Decision> {
        self.check_key(token_key(&self.prefix, org_id, token_id), limit)
    }

    /// Both allowances in one script: the keys share the org's hash tag, so one slot.
    fn check_with_token(
        &self,
        org_id: Uuid,
        limit: u32,
        token_id: Uuid,
        token_limit: u32,
    ) -> StoreFuture<(Decision, Decision)> {
        let pool = self.pool.clone();
        let (org, token) = (Gcra::new(limit), Gcra::new(token_limit));
        let mut invocation = GCRA_SCRIPT.prepare_invoke();
        count(
            &mut invocation,
            org_key(&self.prefix, &org_id, ALLOWANCE),
            &org,
        );
        count(
            &mut invocation,
            token_key(&self.prefix, org_id, token_id),
            &token,
        );
        Box::pin(async move {
            let ahead: Vec<i64> = pool.invoke(&invocation).await?;
            match ahead[..] {
                [for_org, for_token] => Ok((org.answer(for_org), token.answer(for_token))),
                _ => Err(StoreError::new("unexpected rate-limit script reply")),
            }
        })
    }

    fn refunds(&self) -> bool {
        true
    }

    fn refund(&self, org_id: Uuid, limit: u32) -> StoreFuture<()> {
        self.refund_key(org_key(&self.prefix, &org_id, ALLOWANCE), limit)
    }

    fn refund_token(&self, org_id: Uuid, token_id: Uuid, limit: u32) -> StoreFuture<()> {
        self.refund_key(token_key(&self.prefix, org_id, token_id), limit)
    }
}

/// The suffix of an org's allowance key (and, followed by `:<token_id>`, a token's).
const ALLOWANCE: &str = "req";

/// Adds one key to a [`GCRA_SCRIPT`] invocation, with its limit and interval.
fn count(invocation: &mut ScriptInvocation<'_>, key: String, gcra: &Gcra) {
    invocation
        .key(key)
        .arg(&packed(&[gcra.limit() as f64, gcra.interval_us() as f64])[..]);
}

/// Numbers as a script reads them with `struct.unpack('<d...', ARGV[i])`: little-endian
/// doubles, exact below 2^53. One binary argument costs Redis less than one decimal argument
/// per number, each of which Lua would parse with `strtod`.
pub(super) fn packed(numbers: &[f64]) -> Vec<u8> {
    numbers.iter().flat_map(|n| n.to_le_bytes()).collect()
}

fn token_key(prefix: &str, org_id: Uuid, token_id: Uuid) -> String {
    org_key(prefix, &org_id, &format!("{ALLOWANCE}:{token_id}"))
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
        let gcra = Gcra::new(limit);
        let mut invocation = GCRA_SCRIPT.prepare_invoke();
        count(&mut invocation, key, &gcra);
        Box::pin(async move { Ok(gcra.answer(pool.invoke(&invocation).await?)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> RedisRateLimitStore {
        store_with_pool().0
    }

    /// A store, its pool, and the key of a new org's allowance in it.
    fn store_with_pool() -> (RedisRateLimitStore, RedisPool, Uuid, String) {
        let pool = RedisPool::new(&svc_testkit::redis_url()).unwrap();
        let prefix = svc_testkit::redis_prefix();
        let org = Uuid::new_v4();
        let key = format!("{prefix}svc:{{{org}}}:req");
        (
            RedisRateLimitStore::new(pool.clone(), prefix),
            pool,
            org,
            key,
        )
    }

    /// The Redis server's clock, in whole seconds as microseconds.
    async fn server_now(pool: &RedisPool) -> u64 {
        let server_us: (String, String) = pool.query(&redis::cmd("TIME")).await.unwrap();
        server_us.0.parse::<u64>().unwrap() * 1_000_000
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

    /// A key's TAT and the time before which it cannot expire.
    async fn stored(pool: &RedisPool, key: &str) -> (f64, f64) {
        let value: Vec<u8> = pool.query(redis::cmd("GET").arg(key)).await.unwrap();
        let (tat, until) = value.split_at(8);
        let double = |bytes: &[u8]| f64::from_le_bytes(bytes.try_into().expect("8 bytes"));
        (double(tat), double(until))
    }

    async fn pttl(pool: &RedisPool, key: &str) -> i64 {
        pool.query(redis::cmd("PTTL").arg(key)).await.unwrap()
    }

    #[tokio::test]
    async fn the_key_carries_the_org_hash_tag_and_expires() {
        let (store, pool, org, key) = store_with_pool();
        store.check(org, 10).await.unwrap();
        let ttl_ms = pttl(&pool, &key).await;
        assert!((1..=120_000).contains(&ttl_ms), "ttl {ttl_ms}");
        // Whole microseconds of the server's clock, as doubles: every replica's script, and
        // the refund's, reads them back exactly.
        let (tat, until) = stored(&pool, &key).await;
        let now = server_now(&pool).await as f64;
        assert_eq!(tat.fract(), 0.0, "whole microseconds: {tat}");
        assert!((now..now + 8e6).contains(&tat), "tat {tat}, now {now}");
        // The key outlives the time recorded for it, which is past the TAT.
        assert!(
            until > tat && until < now + 120e6,
            "until {until}, now {now}"
        );
    }

    #[tokio::test]
    async fn an_expiry_is_kept_while_the_tat_is_before_it_then_renewed() {
        let (store, pool, org, key) = store_with_pool();
        let now = server_now(&pool).await as f64;
        // Two of a limit of 3 spent, 20 s each; the key lives 55 s, and says it lives 50.
        let until = now + 50e6;
        let value = super::packed(&[now + 40e6, until]);
        let _: () = pool
            .query(redis::cmd("PSETEX").arg(&key).arg(55_000).arg(&value[..]))
            .await
            .unwrap();
        // The refund and the first check stay before the recorded time: written in place.
        store.refund(org, 3).await.unwrap();
        let first = store.check(org, 3).await.unwrap();
        assert_eq!((first.allowed, first.remaining), (true, 1));
        assert!(pttl(&pool, &key).await <= 55_000, "the expiry was kept");
        assert_eq!(stored(&pool, &key).await, (now + 40e6, until));
        // The second takes the TAT past it: a new expiry, two minutes away.
        let second = store.check(org, 3).await.unwrap();
        assert_eq!((second.allowed, second.remaining), (true, 0));
        let ttl_ms = pttl(&pool, &key).await;
        assert!(ttl_ms > 60_000, "renewed: {ttl_ms}");
        let (tat, renewed) = stored(&pool, &key).await;
        assert_eq!(tat, now + 60e6);
        assert!(renewed > now + 100e6, "until {renewed}, now {now}");
        assert!(!store.check(org, 3).await.unwrap().allowed);
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
    async fn an_org_and_its_token_are_decided_in_one_call_as_in_two() {
        let store = store();
        let memory = super::super::MemoryRateLimitStore::new();
        let (org, token) = (Uuid::new_v4(), Uuid::new_v4());
        let figures = |(org, token): (Decision, Decision)| {
            (org.allowed, org.remaining, token.allowed, token.remaining)
        };
        let mut seen = Vec::new();
        for _ in 0..4 {
            let one_call = store.check_with_token(org, 5, token, 2).await.unwrap();
            let two_calls = memory.check_with_token(org, 5, token, 2).await.unwrap();
            assert_eq!(figures(one_call), figures(two_calls));
            assert_eq!(one_call.1.retry_after_secs, two_calls.1.retry_after_secs);
            seen.push(figures(one_call));
        }
        // Each allowance counts on its own, as `check` and `check_token` do.
        assert_eq!(
            seen,
            [
                (true, 4, true, 1),
                (true, 3, true, 0),
                (true, 2, false, 0),
                (true, 1, false, 0)
            ]
        );
        assert_eq!(store.check(org, 5).await.unwrap().remaining, 0);
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
