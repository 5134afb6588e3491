//! [`TokenBudgetStore`] in Redis: one script per reservation or settlement, over the org's
//! bucket and the token's, which share the org's hash tag and so one slot of a cluster; a
//! reservation carries the org's settlements that were held for it.

use std::sync::{Arc, LazyLock};

use redis::Script;
use uuid::Uuid;

use super::caps::{CapCharge, CapState, SpendCap};
use super::redis::{packed, tat_script};
use super::store::{Decision, Gcra, RequestCount};
use super::tokens::{
    Bucket, CappedDecision, Correction, Counting, Op, TokenBudget, TokenBudgetStore, TokenDecision,
    after, apply, in_order,
};
use crate::store::{RedisPool, StoreError, StoreFuture, org_key};

/// Settlements, then the call's requests (none, to reserve or settle alone), then a
/// reservation (of nothing, to settle alone), on the Redis clock: the rate limiter's decisions,
/// the decision of `tokens::apply` and the spend caps beside it, in one atomic step.
///
/// KEYS: the allowance keys (`:req` and `:req:<token_id>`, each holding its request TAT and
/// its bucket's, see [`WRITE_KEY`]; those the reservation draws on or a request is counted in,
/// the org's then the token's, then those only corrected), then one counter per cap (those the
/// reservation draws on, then those only corrected). ARGV[1]: the figures, little-endian
/// doubles (see `redis::packed`): how many allowance keys, the tokens to reserve, per key its
/// bucket's limit (0: none, or only corrected), its correction in µs, and the requests per
/// minute and interval in µs of the request counted in it (0 and 0: none), and per cap its
/// limit (`-1`: only corrected), its correction, the amount to reserve, and the TTL in seconds
/// and value a missing counter is seeded with (`-1`: not seeded, reported missing). After the
/// figures, per cap the decimal string `INCRBY` adds to it, ended by a zero byte: the
/// correction plus the amount (only the correction for a cap only corrected).
///
/// Returns `-1` and the missing caps' indexes (from 0) when a counter is missing without a
/// seed (the corrections are still made, no request is counted); otherwise whether the
/// reservation was taken (1) or not (0), each cap's counter before it, and per key how far
/// its request TAT is ahead of now as the rate limiter answers it (when a request is counted
/// in it: refused, it refuses the reservation) and how far its bucket's TAT was ahead of now
/// before it, in nanoseconds (when it has a limit): `tokens::apply` derives every figure of
/// the decision from those, as the memory store does. Without a request, a reply of one or
/// two entries comes as a number, as the limiter answers one key: with no figure (a
/// settlement alone), whether the reservation was taken; with one (a budget's counter, or one
/// bucket), the figure when the reservation was taken and `-1 -` it when not.
///
/// A correction is made as a settlement alone makes it, whatever the reservation's fate: a
/// bucket moves by it (never beyond one window either way), a counter too (never below zero),
/// and a counter that is missing or at zero is left missing, for the next reservation to
/// rebuild it from the ledger.
///
/// Inside Redis each `redis.call`, each argument and each number parsed from a string costs
/// more than the arithmetic, so the figures come packed in one argument, a cap's counter is
/// first moved by what a taken reservation adds (one `INCRBY`, whose reply says what it was:
/// a counter at zero is told from a missing one by its TTL, which only a missing one lacks;
/// a counter that nothing moves is only read), and is only moved again when the reservation is
/// refused or a correction would take it below zero. The buckets' `TIME` is read only when
/// there is a bucket, and a TAT is kept as the rate limiter keeps it (`redis::READ_TAT`).
/// Allocation counts too: the figures are read from the argument where they lie (`unpack`
/// at an offset, with a literal format) rather than into a table, a counter is left at what a
/// taken reservation leaves (a refusal reads the amounts again to give them back), and what
/// the script keeps per bucket goes in one table, made by its constructor with the first
/// bucket's four entries (a table filled one entry at a time is reallocated as it grows); the
/// reply's table is made with room for four figures, for the same reason.
static SCRIPT: LazyLock<Script> = LazyLock::new(|| {
    let script = r"
local f = ARGV[1]
local nb, a = unpack('<dd', f)
local c0 = 17 + 32 * nb
local adds = c0 + 40 * (#KEYS - nb)
local out = {1, nil, nil, nil}
local missing, asked
for j = 1, #KEYS - nb do
  local key = KEYS[nb + j]
  local limit, corr, amount, ttl, seed = unpack('<ddddd', f, c0 + 40 * (j - 1))
  local add
  if j == #KEYS - nb then
    add = string.sub(f, adds, -2)
  else
    add, adds = unpack('s', f, adds)
  end
  if limit == -1 then
    local v = call('INCRBY', key, add)
    if v == corr then
      call('DEL', key)
    elseif v < 0 then
      call('SET', key, '0', 'KEEPTTL')
    end
  else
    local v, before
    if add == '0' then
      v = call('GET', key)
      if v then
        v = tonumber(v)
        before = v
      end
    else
      v = call('INCRBY', key, add)
      before = v - corr - amount
      if before == 0 and corr == 0 and call('TTL', key) == -1 then before = nil end
    end
    if before == 0 and corr ~= 0 then before = nil end
    local base
    if before then
      base = before + corr
      if base < 0 then base = 0 end
    elseif seed ~= -1 then
      base = seed
      call('SETEX', key, string.format('%d', ttl), string.format('%d', base))
      v = base
    else
      if v then call('DEL', key) end
      missing = missing or {-1}
      missing[#missing + 1] = j - 1
    end
    if base then
      if base + amount > limit then out[1] = 0 end
      out[#out + 1] = base
      -- The counter holds what a taken reservation leaves (a refusal takes the amount back
      -- below); only a clamp or a seed moves it again here.
      if v ~= base + amount then
        call('INCRBY', key, string.format('%d', base + amount - v))
      end
    end
  end
end
if missing then out[1] = 0 end
local now, more
local taken = out[1] == 1
if nb > 0 then
  local t = call('TIME')
  now = t[1] * 1000000 + t[2]
  for i = 1, nb do
    local limit, corr, rlimit, rinterval = unpack('<dddd', f, 32 * i - 15)
    local key = KEYS[i]
    local rtat, until_us, tat = nil, 0, nil
    local v = call('GET', key)
    if v then
      if #v == 24 then
        rtat, until_us, tat = unpack('<ddd', v)
      elseif #v == 16 then
        rtat, until_us = unpack('<dd', v)
      end
    end
    if not tat or tat < now then tat = now end
    local base = tat + corr
    if base > now + 60000000 then base = now + 60000000 end
    if base < now then base = now end
    -- A request counted against the key's own allowance, as the rate limiter counts it: on
    -- its own, kept when allowed whatever else refuses the call.
    local rnew = false
    if rlimit > 0 and not missing then
      if not rtat or rtat < now then rtat = now end
      rnew = rtat + rinterval
      local ahead
      if rnew > now + rinterval * rlimit then
        out[1] = 0
        ahead = now - rtat - 1
        rnew = false
      else
        ahead = rnew - now
      end
      out[#out + 1] = ahead
      asked = true
    end
    local new = false
    if limit > 0 then
      local take = a
      if take > limit then take = limit end
      new = base + take * 60000000 / limit
      if new > now + 60000000 then out[1] = 0 end
      out[#out + 1] = (base - now) * 1000
    end
    -- The last key decides whether the reservation is taken: it is written at once, and the
    -- keys before it, kept in one table (made by its constructor) until then, after it.
    if i < nb then
      local k = 7 * i - 7
      if more then
        more[k + 1], more[k + 2], more[k + 3], more[k + 4], more[k + 5], more[k + 6], more[k + 7] = key, base, new, until_us, corr ~= 0, rnew, rtat
      else
        more = {key, base, new, until_us, corr ~= 0, rnew, rtat}
      end
    else
      taken = out[1] == 1
      local corrected = corr ~= 0
      --[[WRITE_KEY]]
      for k = 0, 7 * nb - 14, 7 do
        local key, base, new, until_us, corrected, rnew, rtat = more[k + 1], more[k + 2], more[k + 3], more[k + 4], more[k + 5], more[k + 6], more[k + 7]
        --[[WRITE_KEY]]
      end
    end
  end
end
if not taken then
  for j = 1, #KEYS - nb do
    local limit, _, amount = unpack('<ddd', f, c0 + 40 * (j - 1))
    local held = limit ~= -1 and amount ~= 0
    if held and missing then
      for k = 2, #missing do
        if missing[k] == j - 1 then held = false end
      end
    end
    if held then call('INCRBY', KEYS[nb + j], string.format('%d', -amount)) end
  end
end
if missing then return missing end
if #out == 1 then return out[1] end
if #out == 2 and not asked then
  if taken then return out[2] end
  return -1 - out[2]
end
return out
";
    tat_script(&script.replace("--[[WRITE_KEY]]", WRITE_KEY))
});

/// Lua, in place of each `--[[WRITE_KEY]]` line of [`SCRIPT`]: writes the allowance `key` after
/// the call, when anything in it moved (its bucket by the reservation taken or a correction,
/// its request by being counted). The key holds the request's TAT, the time before which the
/// key cannot expire and the bucket's TAT, as three little-endian doubles: the rate limiter
/// reads the first two as its own value and keeps the third (see `redis::READ_TAT`). Both TATs
/// are kept as the limiter keeps its one: in place while neither passes that time, else with
/// an expiry two minutes from now; a key whose TATs are both past is deleted (a whole
/// allowance and a full bucket are what no key means).
const WRITE_KEY: &str = r"
  if (taken and new) or corrected or rnew then
    local tat = (taken and new) or base
    local r = rnew or rtat or 0
    local last = tat
    if r > last then last = r end
    if last <= now then
      if until_us > 0 then call('DEL', key) end
    elseif last <= until_us then
      call('SET', key, pack('<ddd', r, until_us, tat), 'KEEPTTL')
    else
      call('PSETEX', key, '120000', pack('<ddd', r, now + 119000000, tat))
    end
  end
";

/// Token allowances in Redis, shared by every replica: one round trip per reservation and
/// per settlement, or per reservation alone when it carries its org's settlements, or one for
/// the request and the reservation together ([`TokenBudgetStore::reserve_counting`]). A bucket
/// lives beside the request allowance of its org or token, in the key the rate limiter counts
/// requests in, `{prefix}svc:{<org_id>}:req` and `{prefix}svc:{<org_id>}:req:<token_id>`: one
/// key is read and written for both. Each expires once its allowance is whole and its bucket
/// full again, at most two minutes after its last write. Earlier builds kept buckets in `:tok`
/// keys of their own; during a rolling upgrade from one, each build counts tokens in its own.
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

    /// One script: `owed` (corrections of `budget`'s org), then `requests`, then a reservation
    /// of `tokens` from `budget`'s limited buckets and from `caps`.
    fn run(
        &self,
        mut owed: Owed,
        budget: TokenBudget,
        tokens: u64,
        caps: Vec<SpendCap>,
        requests: Option<RequestCount>,
    ) -> StoreFuture<Counting> {
        let pool = self.pool.clone();
        let key = |suffix: &str| org_key(&self.prefix, &budget.org_id, suffix);
        let mut invocation = SCRIPT.prepare_invoke();
        // Each allowance key the script reads: its suffix, its bucket's limit (0: none), the
        // bucket's correction and the request allowance counted in it.
        let mut allowances: Vec<(String, u64, i64, Option<Gcra>)> = (limited_buckets(&budget)
            .into_iter())
        .map(|(limit, suffix)| {
            let correction = owed.take_bucket(&suffix);
            (suffix, limit, correction, None)
        })
        .collect();
        let asked = (requests.into_iter()).flat_map(|r| {
            let token = (r.token).map(|(id, limit)| (format!("{ALLOWANCE}:{id}"), limit));
            std::iter::once((ALLOWANCE.to_owned(), r.limit)).chain(token)
        });
        for (suffix, limit) in asked {
            let gcra = Some(Gcra::new(limit));
            match allowances.iter_mut().find(|a| a.0 == suffix) {
                Some(allowance) => allowance.3 = gcra,
                None => {
                    let correction = owed.take_bucket(&suffix);
                    allowances.push((suffix, 0, correction, gcra));
                }
            }
        }
        // A bucket only corrected, by less than a µs, is not worth a write.
        let corrected = (owed.buckets.drain(..))
            .map(|(suffix, moved)| (suffix, 0, micros(moved), None))
            .filter(|(_, _, correction, _)| *correction != 0);
        allowances.extend(corrected);
        let mut numbers = vec![allowances.len() as f64, tokens as f64];
        for (suffix, limit, correction, gcra) in &allowances {
            invocation.key(key(suffix));
            let (requests, interval) =
                gcra.map_or((0.0, 0.0), |g| (g.limit() as f64, g.interval_us() as f64));
            numbers.extend([*limit as f64, *correction as f64, requests, interval]);
        }
        // What INCRBY adds to each counter, as the string it goes to Redis as: after the
        // figures, each ended by a zero byte.
        let mut adds = Vec::with_capacity(caps.len() + owed.caps.len());
        let counted = caps.len();
        let mut sent = Vec::with_capacity(counted);
        for cap in caps {
            let correction = owed.take_cap(&cap.name);
            invocation.key(key(&format!("cap:{}", cap.name)));
            let (limit, amount) = (figure(cap.limit), figure(cap.amount));
            let (ttl_secs, seed) = cap
                .seed
                .map_or((0, -1), |seed| (figure(cap.ttl_secs.max(1)), figure(seed)));
            numbers.extend([limit, correction, amount, ttl_secs, seed].map(|n| n as f64));
            adds.push(amount.saturating_add(correction));
            sent.push((limit, amount));
        }
        for (name, correction) in owed.caps {
            invocation.key(key(&format!("cap:{name}")));
            numbers.extend([-1.0, correction as f64, 0.0, 0.0, -1.0]);
            adds.push(correction);
        }
        let mut argument = packed(&numbers);
        for add in adds {
            argument.extend_from_slice(add.to_string().as_bytes());
            argument.push(0);
        }
        invocation.arg(argument);
        let shape: Vec<(u64, Option<Gcra>)> = (allowances.into_iter())
            .map(|(_, limit, _, gcra)| (limit, gcra))
            .collect();
        let asked = shape.iter().filter(|(_, gcra)| gcra.is_some()).count();
        let count = counted + shape.iter().filter(|(limit, _)| *limit > 0).count() + asked;
        Box::pin(async move {
            let reply = figures(pool.invoke(&invocation).await?, count, asked > 0)?;
            decode(&reply, budget, tokens, &shape, &sent, counted)
        })
    }

    /// The tokens' decision of a step that counts no caps.
    fn run_tokens(
        &self,
        owed: Owed,
        budget: TokenBudget,
        tokens: u64,
    ) -> StoreFuture<TokenDecision> {
        let run = reserved(self.run(owed, budget, tokens, Vec::new(), None));
        Box::pin(async move {
            match run.await? {
                CappedDecision::Counted { tokens, .. } => Ok(tokens),
                CappedDecision::Missing(_) => Err(unexpected()),
            }
        })
    }

    /// `corrections` (those of `budget`'s org in the script; any of another org, whose keys
    /// live in another slot, settled first on their own), then `requests`, then a
    /// reservation: [`run`](Self::run) for a call.
    fn run_correcting(
        &self,
        corrections: Vec<Correction>,
        budget: TokenBudget,
        tokens: u64,
        caps: Vec<SpendCap>,
        requests: Option<RequestCount>,
    ) -> StoreFuture<Counting> {
        let (own, others): (Vec<Correction>, Vec<Correction>) =
            (corrections.into_iter()).partition(|c| c.budget.org_id == budget.org_id);
        let owed = Owed::of(&own);
        let nothing = requests.is_none() && caps.is_empty() && !budget.is_limited();
        if nothing && owed.is_empty() && others.is_empty() {
            return Box::pin(std::future::ready(Ok(Counting {
                requests: None,
                reserved: Some(CappedDecision::Counted {
                    tokens: budget.unmetered(),
                    caps: Vec::new(),
                }),
            })));
        }
        after(
            self.correct(others),
            self.run(owed, budget, tokens, caps, requests),
        )
    }

    /// `corrections` in one script per org.
    fn correct_by_org(&self, corrections: Vec<Correction>) -> Vec<StoreFuture<Counting>> {
        let mut by_org: Vec<(Uuid, Owed)> = Vec::new();
        for correction in &corrections {
            let org = correction.budget.org_id;
            let at = match by_org.iter().position(|(o, _)| *o == org) {
                Some(at) => at,
                None => {
                    by_org.push((org, Owed::default()));
                    by_org.len() - 1
                }
            };
            by_org[at].1.add(correction);
        }
        (by_org.into_iter())
            .filter(|(_, owed)| !owed.is_empty())
            .map(|(org, owed)| {
                let nothing = TokenBudget {
                    org_id: org,
                    org_limit: None,
                    token_id: Uuid::nil(),
                    token_limit: None,
                };
                self.run(owed, nothing, 0, Vec::new(), None)
            })
            .collect()
    }
}

/// Settlements of one org, summed per key: what they move each bucket by (µs) and each
/// counter by.
#[derive(Debug, Default)]
struct Owed {
    buckets: Vec<(String, f64)>,
    caps: Vec<(String, i64)>,
}

impl Owed {
    fn of(corrections: &[Correction]) -> Owed {
        let mut owed = Owed::default();
        for correction in corrections {
            owed.add(correction);
        }
        owed
    }

    /// Adds one call's settlement: a bucket moves by `used - reserved` tokens (a call larger
    /// than the limit was charged the limit) at its interval, a counter by `used - reserved`.
    fn add(&mut self, correction: &Correction) {
        let Correction {
            budget,
            reserved,
            used,
            caps,
        } = correction;
        for (limit, suffix) in limited_buckets(budget) {
            if limit == 0 {
                continue;
            }
            let charged = (*reserved).min(limit) as f64;
            let moved = (*used as f64 - charged) * 60_000_000.0 / limit as f64;
            add_to(&mut self.buckets, suffix, moved);
        }
        for charge in caps {
            let moved = figure(charge.used).saturating_sub(figure(charge.reserved));
            add_to(&mut self.caps, charge.name.clone(), moved);
        }
        self.caps.retain(|(_, moved)| *moved != 0);
    }

    fn is_empty(&self) -> bool {
        self.caps.is_empty() && self.buckets.iter().all(|(_, moved)| micros(*moved) == 0)
    }

    /// The correction owed to bucket `suffix`, in whole µs, taken out.
    fn take_bucket(&mut self, suffix: &str) -> i64 {
        let at = self.buckets.iter().position(|(s, _)| s == suffix);
        at.map_or(0, |at| micros(self.buckets.swap_remove(at).1))
    }

    /// The correction owed to cap `name`, taken out.
    fn take_cap(&mut self, name: &str) -> i64 {
        let at = self.caps.iter().position(|(n, _)| n == name);
        at.map_or(0, |at| self.caps.swap_remove(at).1)
    }
}

/// The suffix of an org's bucket key (and, followed by `:<token_id>`, a token's). Builds before
/// the TAT's expiry was kept beside it used `tpm`; see [`RedisRateLimitStore`] for why a new
/// value format takes a new name.
///
/// [`RedisRateLimitStore`]: super::RedisRateLimitStore
const ALLOWANCE: &str = "req";

/// The limit and key suffix of each bucket `budget` draws on: the org's, then the token's.
fn limited_buckets(budget: &TokenBudget) -> Vec<(u64, String)> {
    let org = budget.org_limit.map(|limit| (limit, ALLOWANCE.to_owned()));
    let token =
        (budget.token_limit).map(|limit| (limit, format!("{ALLOWANCE}:{}", budget.token_id)));
    org.into_iter().chain(token).collect()
}

fn add_to<T: std::ops::AddAssign>(sums: &mut Vec<(String, T)>, key: String, value: T) {
    match sums.iter_mut().find(|(k, _)| *k == key) {
        Some((_, sum)) => *sum += value,
        None => sums.push((key, value)),
    }
}

/// A bucket's correction in whole µs, as the script adds it to a TAT.
fn micros(moved: f64) -> i64 {
    moved.round() as i64
}

/// A count as the script takes it.
fn figure(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The reservation's decision of a step that counted no request.
fn reserved(run: StoreFuture<Counting>) -> StoreFuture<CappedDecision> {
    Box::pin(async move { run.await?.reserved.ok_or_else(unexpected) })
}

fn unexpected() -> StoreError {
    StoreError::new("unexpected token budget script reply")
}

/// The script's reply as the list it stands for, of `count` figures after the decision: with
/// none, or one and no request `asked`, it comes as a number (see [`SCRIPT`]).
fn figures(reply: redis::Value, count: usize, asked: bool) -> Result<Vec<i64>, StoreError> {
    match (reply, count) {
        (redis::Value::Int(taken), 0) => Ok(vec![taken]),
        (redis::Value::Int(n), 1) if n >= 0 && !asked => Ok(vec![1, n]),
        (redis::Value::Int(n), 1) if !asked => Ok(vec![0, -1 - n]),
        (other, _) => redis::from_redis_value(&other).map_err(|_| unexpected()),
    }
}

/// The script's reply to a reservation of `tokens` from allowance keys of `shape` (each key's
/// bucket limit, 0 for none, and the request allowance counted in it) and caps `sent` (limit
/// and amount of each) out of `counted`.
fn decode(
    reply: &[i64],
    budget: TokenBudget,
    tokens: u64,
    shape: &[(u64, Option<Gcra>)],
    sent: &[(i64, i64)],
    counted: usize,
) -> Result<Counting, StoreError> {
    let count = |v: i64| u64::try_from(v).unwrap_or(0);
    if let Some((-1, missing)) = reply.split_first() {
        let missing = missing.iter().map(|i| usize::try_from(*i).unwrap_or(0));
        return Ok(Counting {
            requests: None,
            reserved: Some(CappedDecision::Missing(missing.collect())),
        });
    }
    let [taken, rest @ ..] = reply else {
        return Err(unexpected());
    };
    let taken = *taken == 1;
    let Some((counters, mut figures)) = rest.split_at_checked(counted) else {
        return Err(unexpected());
    };
    // Each key's figures in turn: its request's, then its bucket's.
    let mut next = || {
        let (first, rest) = figures.split_first().ok_or_else(unexpected)?;
        figures = rest;
        Ok::<i64, StoreError>(*first)
    };
    let mut requests: Option<Decision> = None;
    let mut buckets = Vec::with_capacity(shape.len());
    for (limit, gcra) in shape {
        if let Some(gcra) = gcra {
            let decision = gcra.answer(next()?);
            requests = Some(requests.map_or(decision, |before| decision.stricter(before)));
        }
        if *limit > 0 {
            // The TAT as far ahead of a `now` of 0 as the script found it, in µs.
            let tat = next()? as f64 / 1_000.0;
            buckets.push(Bucket { limit: *limit, tat });
        }
    }
    if !figures.is_empty() {
        return Err(unexpected());
    }
    if requests.is_some_and(|decision| !decision.allowed) {
        return Ok(Counting {
            requests,
            reserved: None,
        });
    }
    let tokens = if buckets.is_empty() {
        budget.unmetered()
    } else {
        let (decision, _) = apply(&buckets, Op::Reserve(tokens), 0.0);
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
    Ok(Counting {
        requests,
        reserved: Some(CappedDecision::Counted { tokens, caps }),
    })
}

impl TokenBudgetStore for RedisTokenBudgetStore {
    fn reserve(&self, budget: TokenBudget, tokens: u64) -> StoreFuture<TokenDecision> {
        if !budget.is_limited() {
            return Box::pin(std::future::ready(Ok(budget.unmetered())));
        }
        self.run_tokens(Owed::default(), budget, tokens)
    }

    /// A reservation of nothing that carries the settlement: the decision is the buckets'
    /// figures after it.
    fn settle(&self, budget: TokenBudget, reserved: u64, used: u64) -> StoreFuture<TokenDecision> {
        self.settle_capped(budget, reserved, used, Vec::new())
    }

    fn reserve_capped(
        &self,
        budget: TokenBudget,
        tokens: u64,
        caps: Vec<SpendCap>,
    ) -> StoreFuture<CappedDecision> {
        self.reserve_correcting(Vec::new(), budget, tokens, caps)
    }

    fn settle_capped(
        &self,
        budget: TokenBudget,
        reserved: u64,
        used: u64,
        caps: Vec<CapCharge>,
    ) -> StoreFuture<TokenDecision> {
        let settled = Correction {
            budget,
            reserved,
            used,
            caps,
        };
        let owed = Owed::of(std::slice::from_ref(&settled));
        if !budget.is_limited() && owed.is_empty() {
            return Box::pin(std::future::ready(Ok(budget.unmetered())));
        }
        self.run_tokens(owed, budget, 0)
    }

    /// The corrections of `budget`'s org ride in the reservation's script; any of another org
    /// (whose keys live in another slot) are settled first, on their own.
    fn reserve_correcting(
        &self,
        corrections: Vec<Correction>,
        budget: TokenBudget,
        tokens: u64,
        caps: Vec<SpendCap>,
    ) -> StoreFuture<CappedDecision> {
        reserved(self.run_correcting(corrections, budget, tokens, caps, None))
    }

    fn correct(&self, corrections: Vec<Correction>) -> StoreFuture<()> {
        in_order(self.correct_by_org(corrections))
    }

    fn counts_requests(&self) -> bool {
        true
    }

    /// The request's allowances are read and written in the keys the org's and the token's
    /// buckets share with them, so a call under a token limit or a budget is one script.
    fn reserve_counting(
        &self,
        requests: RequestCount,
        corrections: Vec<Correction>,
        budget: TokenBudget,
        tokens: u64,
        caps: Vec<SpendCap>,
    ) -> StoreFuture<Counting> {
        self.run_correcting(corrections, budget, tokens, caps, Some(requests))
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
            format!("{prefix}svc:{{{org}}}:req"),
            format!("{prefix}svc:{{{org}}}:req:{token}"),
        ] {
            let ttl_ms: i64 = pool.query(redis::cmd("PTTL").arg(&key)).await.unwrap();
            assert!((1..=120_000).contains(&ttl_ms), "{key}: {ttl_ms}");
        }
    }

    /// Only the buckets that are limited travel to the script, so a token's bucket alone is the
    /// script's first key: the figures must still be the in-memory store's, bucket by bucket.
    #[tokio::test]
    async fn any_set_of_buckets_and_caps_counts_as_in_memory() {
        use super::super::tokens::MemoryTokenBudgetStore;
        let (store, pool, prefix) = store();
        let memory = MemoryTokenBudgetStore::new();
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
                assert_alike(
                    &in_redis,
                    &in_memory,
                    &format!("{budget:?} reserving {reserve}"),
                );
                if in_redis.allowed() {
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
                (org_limit, "req".to_owned()),
                (token_limit, format!("req:{token}")),
            ] {
                let exists: i64 = pool
                    .query(redis::cmd("EXISTS").arg(format!("{prefix}svc:{{{org}}}:{suffix}")))
                    .await
                    .unwrap();
                assert_eq!(exists == 1, limit.is_some(), "{suffix} of {budget:?}");
            }
        }
    }

    /// A budget alone, or one bucket alone, is answered with one number (the figure, or `-1 -`
    /// it when refused): taken or refused, the decision is the in-memory store's.
    #[tokio::test]
    async fn a_lone_budget_or_bucket_counts_as_in_memory_taken_or_refused() {
        use super::super::tokens::MemoryTokenBudgetStore;
        let (store, _, _) = store();
        let memory = MemoryTokenBudgetStore::new();
        let org = Uuid::new_v4();
        let alone = TokenBudget {
            org_id: org,
            org_limit: None,
            token_id: Uuid::new_v4(),
            token_limit: None,
        };
        let mut refused = 0;
        for amount in [200, 250, 100, 300, 49, 1] {
            let caps = || vec![cap("alone", 500, amount, Some(0))];
            let in_redis = store.reserve_capped(alone, 10, caps()).await.unwrap();
            let in_memory = memory.reserve_capped(alone, 10, caps()).await.unwrap();
            assert_alike(
                &in_redis,
                &in_memory,
                &format!("a budget reserving {amount}"),
            );
            refused += usize::from(!in_redis.allowed());
        }
        assert_eq!(refused, 2, "100 and 300 do not fit");
        let bucket = TokenBudget::org(Uuid::new_v4(), 500);
        let mut refused = 0;
        for tokens in [200, 250, 100, 49] {
            let in_redis = store.reserve(bucket, tokens).await.unwrap();
            let in_memory = memory.reserve(bucket, tokens).await.unwrap();
            assert!(
                same(in_redis, in_memory),
                "a bucket reserving {tokens}: {in_redis:?} {in_memory:?}"
            );
            refused += usize::from(!in_redis.allowed);
        }
        assert_eq!(refused, 1, "100 is the one that does not fit");
    }

    /// A reservation that carries the settlements before it decides as if they had been made
    /// first, on their own: the in-memory store's figures, bucket by bucket, cap by cap.
    #[tokio::test]
    async fn a_reservation_carrying_settlements_counts_as_settling_first() {
        use super::super::tokens::MemoryTokenBudgetStore;
        let (store, _, _) = store();
        let memory = MemoryTokenBudgetStore::new();
        for (org_limit, token_limit) in [(Some(1_000), None), (None, None), (Some(800), Some(300))]
        {
            let budget = TokenBudget {
                org_id: Uuid::new_v4(),
                org_limit,
                token_id: Uuid::new_v4(),
                token_limit,
            };
            // The caps' limit lets the third call through only once the first two settled.
            let caps = |amount| vec![cap("c", 1_000, amount, Some(0)), cap("d", 900, 1, Some(0))];
            let mut owed: Vec<Correction> = Vec::new();
            for (reserve, used) in [(400, 50), (400, 400), (400, 10), (300, 0), (900, 900)] {
                let in_redis = store
                    .reserve_correcting(owed.clone(), budget, reserve, caps(reserve))
                    .await
                    .unwrap();
                for c in owed.drain(..) {
                    memory
                        .settle_capped(c.budget, c.reserved, c.used, c.caps)
                        .await
                        .unwrap();
                }
                let in_memory = memory
                    .reserve_capped(budget, reserve, caps(reserve))
                    .await
                    .unwrap();
                assert_alike(
                    &in_redis,
                    &in_memory,
                    &format!("{budget:?} reserving {reserve}"),
                );
                if in_redis.allowed() {
                    owed.push(Correction {
                        budget,
                        reserved: reserve,
                        used,
                        caps: ["c", "d"]
                            .map(|name| CapCharge {
                                name: name.to_owned(),
                                reserved: if name == "c" { reserve } else { 1 },
                                used,
                            })
                            .to_vec(),
                    });
                }
            }
        }
    }

    /// One reservation can carry the settlements of several of its org's tokens, each with a
    /// bucket of its own: every bucket is corrected, as settling each first would.
    #[tokio::test]
    async fn the_settlements_of_several_tokens_ride_with_one_reservation() {
        use super::super::tokens::MemoryTokenBudgetStore;
        let (store, _, _) = store();
        let memory = MemoryTokenBudgetStore::new();
        let org = Uuid::new_v4();
        let budgets = [(); 4].map(|()| TokenBudget {
            org_id: org,
            org_limit: Some(1_500),
            token_id: Uuid::new_v4(),
            token_limit: Some(500),
        });
        let mut owed = Vec::new();
        for budget in &budgets[..3] {
            let in_redis = store.reserve_capped(*budget, 400, Vec::new());
            let in_memory = memory.reserve_capped(*budget, 400, Vec::new());
            assert_alike(&in_redis.await.unwrap(), &in_memory.await.unwrap(), "first");
            owed.push(Correction {
                budget: *budget,
                reserved: 400,
                used: 20,
                caps: Vec::new(),
            });
        }
        // 1,200 of the org's 1,500 are held: 450 more fit only once the three settled (their
        // buckets, the org's and four tokens', go to one script).
        let in_redis = store
            .reserve_correcting(owed.clone(), budgets[3], 450, Vec::new())
            .await
            .unwrap();
        for c in owed {
            memory
                .settle_capped(c.budget, c.reserved, c.used, c.caps)
                .await
                .unwrap();
        }
        let in_memory = memory.reserve_capped(budgets[3], 450, Vec::new());
        assert_alike(&in_redis, &in_memory.await.unwrap(), "carrying");
        assert!(in_redis.allowed(), "{in_redis:?}");
        // Each settled token's own bucket has its 380 back: 200 more fit under its 500.
        for budget in &budgets[..3] {
            let in_redis = store
                .reserve_capped(*budget, 200, Vec::new())
                .await
                .unwrap();
            let in_memory = memory.reserve_capped(*budget, 200, Vec::new());
            assert_alike(&in_redis, &in_memory.await.unwrap(), "after");
            assert!(in_redis.allowed(), "{in_redis:?}");
        }
    }

    /// Settlements land whatever the reservation they ride with decides: refused by a cap, or
    /// stopped by a missing counter; several of one org sum, those of another org land too.
    #[tokio::test]
    async fn the_settlements_a_reservation_carries_land_whatever_it_decides() {
        let (store, pool, prefix) = store();
        let (org, other) = (Uuid::new_v4(), Uuid::new_v4());
        let budget = TokenBudget::org(org, 1_000_000);
        let key = |org: Uuid, name: &str| format!("{prefix}svc:{{{org}}}:cap:{name}");
        let settled = |org: Uuid, name: &str, reserved, used| Correction {
            budget: TokenBudget::org(org, 1_000_000),
            reserved: 10,
            used: 10,
            caps: vec![CapCharge {
                name: name.to_owned(),
                reserved,
                used,
            }],
        };
        for (org, name) in [(org, "a"), (org, "b"), (other, "a")] {
            let seeded = vec![cap(name, 100, 100, Some(0))];
            let taken = store.reserve_capped(TokenBudget::org(org, 1_000_000), 10, seeded);
            assert!(taken.await.unwrap().allowed());
        }
        // Refused: `a` is full; its two settlements give back 30 and 20, and `b`'s 90, the
        // other org's 100.
        let refused = store
            .reserve_correcting(
                vec![
                    settled(org, "a", 100, 70),
                    settled(org, "a", 100, 80),
                    settled(org, "b", 100, 10),
                    settled(other, "a", 100, 0),
                ],
                budget,
                10,
                vec![cap("a", 100, 60, None)],
            )
            .await
            .unwrap();
        assert!(!refused.allowed(), "{refused:?}");
        let CappedDecision::Counted { caps, .. } = refused else {
            panic!("counted")
        };
        assert_eq!(caps[0].spent, 50, "settled first: {caps:?}");
        assert_eq!(counter(&pool, &key(org, "a")).await, Some(50));
        assert_eq!(counter(&pool, &key(org, "b")).await, Some(10));
        assert_eq!(counter(&pool, &key(other, "a")).await, Some(0));
        // Stopped by a missing counter: `b`'s settlement still lands.
        let missing = store
            .reserve_correcting(
                vec![settled(org, "b", 10, 15)],
                budget,
                10,
                vec![cap("gone", 100, 1, None)],
            )
            .await
            .unwrap();
        assert_eq!(missing, CappedDecision::Missing(vec![0]));
        assert_eq!(counter(&pool, &key(org, "b")).await, Some(15));
        // Settlements alone, of two orgs at once.
        store
            .correct(vec![settled(org, "a", 50, 0), settled(other, "a", 0, 7)])
            .await
            .unwrap();
        assert_eq!(counter(&pool, &key(org, "a")).await, Some(0));
        // A counter at zero that a call adds to is left for the ledger to rebuild.
        assert_eq!(counter(&pool, &key(other, "a")).await, None);
    }

    #[tokio::test]
    async fn a_counter_at_zero_is_counted_and_a_missing_one_is_reported() {
        let (store, pool, prefix) = store();
        let org = Uuid::new_v4();
        let budget = TokenBudget::org(org, 1_000_000);
        let key = format!("{prefix}svc:{{{org}}}:cap:z");
        // Seeded at zero, by a reservation of nothing: the counter is there, at zero.
        let seeded = store.reserve_capped(budget, 0, vec![cap("z", 100, 0, Some(0))]);
        assert!(seeded.await.unwrap().allowed());
        assert_eq!(counter(&pool, &key).await, Some(0));
        let taken = store
            .reserve_capped(budget, 10, vec![cap("z", 100, 5, None)])
            .await
            .unwrap();
        let CappedDecision::Counted { caps, .. } = taken else {
            panic!("a counter at zero is counted: {taken:?}")
        };
        assert_eq!((caps[0].fits, caps[0].spent), (true, 5));
        assert_eq!(counter(&pool, &key).await, Some(5));
        let ttl: i64 = pool.query(redis::cmd("TTL").arg(&key)).await.unwrap();
        assert!(ttl > 0, "the seed's TTL stays: {ttl}");
        // A missing one is reported and stays missing.
        let gone = format!("{prefix}svc:{{{org}}}:cap:gone");
        let missing = store
            .reserve_capped(budget, 10, vec![cap("gone", 100, 5, None)])
            .await
            .unwrap();
        assert_eq!(missing, CappedDecision::Missing(vec![0]));
        assert_eq!(counter(&pool, &gone).await, None);
        // A reservation of nothing only reads: a missing counter is reported and not made, one
        // at zero is counted.
        let nothing = |name| store.reserve_capped(budget, 10, vec![cap(name, 100, 0, None)]);
        assert_eq!(
            nothing("gone").await.unwrap(),
            CappedDecision::Missing(vec![0])
        );
        assert_eq!(counter(&pool, &gone).await, None);
        let seeded = store.reserve_capped(budget, 0, vec![cap("zero", 100, 0, Some(0))]);
        assert!(seeded.await.unwrap().allowed());
        let read = nothing("zero").await.unwrap();
        let CappedDecision::Counted { caps, .. } = read else {
            panic!("a counter at zero is counted: {read:?}")
        };
        assert_eq!((caps[0].fits, caps[0].spent), (true, 0));
    }

    /// A request counted with its reservation is counted as the rate limiter counts it (the
    /// org's and the token's each on its own) and the reservation made as on its own, only
    /// when the request is allowed: the memory stores' decisions in two steps, for an org
    /// alone and with a token's own limit, with and without a token limit, under a budget.
    #[tokio::test]
    async fn a_request_counted_with_its_reservation_counts_as_two_steps_in_memory() {
        use super::super::memory::MemoryRateLimitStore;
        use super::super::store::RateLimitStore;
        use super::super::tokens::MemoryTokenBudgetStore;
        let (store, _, _) = store();
        let (limiter, memory) = (MemoryRateLimitStore::new(), MemoryTokenBudgetStore::new());
        for (token_rpm, tpm) in [
            (None, Some(1_000)),
            (Some(2), None),
            (Some(3), Some(700)),
            (None, None),
        ] {
            let (org, token) = (Uuid::new_v4(), Uuid::new_v4());
            let requests = RequestCount {
                org_id: org,
                limit: 4,
                token: token_rpm.map(|limit| (token, limit)),
            };
            let budget = TokenBudget {
                org_id: org,
                org_limit: tpm,
                token_id: token,
                token_limit: None,
            };
            let mut refused = 0;
            for call in 0..6 {
                let caps = || vec![cap("c", 10_000, 300, Some(0))];
                let counted = store
                    .reserve_counting(requests, Vec::new(), budget, 300, caps())
                    .await
                    .unwrap();
                let expected = match token_rpm {
                    Some(limit) => {
                        let both = limiter.check_with_token(org, 4, token, limit).await;
                        let (org, token) = both.unwrap();
                        token.stricter(org)
                    }
                    None => limiter.check(org, 4).await.unwrap(),
                };
                let what = format!("{requests:?} {budget:?} call {call}");
                let decision = counted.requests.expect("counted");
                assert_eq!(
                    (decision.allowed, decision.limit, decision.remaining),
                    (expected.allowed, expected.limit, expected.remaining),
                    "{what}"
                );
                if expected.allowed {
                    let in_memory = memory.reserve_capped(budget, 300, caps()).await.unwrap();
                    assert_alike(
                        counted.reserved.as_ref().expect("reserved"),
                        &in_memory,
                        &what,
                    );
                } else {
                    refused += 1;
                    assert_eq!(counted.reserved, None, "{what}");
                }
            }
            assert!(refused > 0, "{requests:?}: some request is refused");
            // What a refused request would have reserved was not: the counters agree.
            let spent = || vec![cap("c", 10_000, 0, Some(0))];
            let in_redis = store.reserve_capped(budget, 0, spent()).await.unwrap();
            let in_memory = memory.reserve_capped(budget, 0, spent()).await.unwrap();
            assert_alike(&in_redis, &in_memory, &format!("{requests:?} after"));
        }
    }

    /// The request's TAT and the bucket's share one key: the rate limiter alone, its refund
    /// (even one that gives the allowance back whole) and a reservation alone each keep the
    /// other's.
    #[tokio::test]
    async fn the_limiter_and_a_reservation_keep_each_others_tat_in_their_key() {
        use super::super::redis::RedisRateLimitStore;
        use super::super::store::RateLimitStore;
        let (store, pool, prefix) = store();
        let limiter = RedisRateLimitStore::new(pool.clone(), prefix.clone());
        let org = Uuid::new_v4();
        let budget = TokenBudget::org(org, 1_000);
        assert!(store.reserve(budget, 600).await.unwrap().allowed);
        assert_eq!(limiter.check(org, 3).await.unwrap().remaining, 2);
        limiter.refund(org, 3).await.unwrap();
        let tokens = store.reserve(budget, 300).await.unwrap();
        assert!(tokens.allowed, "{tokens:?}");
        assert!((95..=110).contains(&tokens.remaining), "{tokens:?}");
        let requests = RequestCount {
            org_id: org,
            limit: 3,
            token: None,
        };
        let counted = (store.reserve_counting(requests, Vec::new(), budget, 50, Vec::new()))
            .await
            .unwrap();
        assert_eq!(counted.requests.map(|d| d.remaining), Some(2));
        assert_eq!(limiter.check(org, 3).await.unwrap().remaining, 1);
        let left = store.reserve(budget, 0).await.unwrap();
        assert!((45..=60).contains(&left.remaining), "{left:?}");
        let key = format!("{prefix}svc:{{{org}}}:req");
        let ttl_ms: i64 = pool.query(redis::cmd("PTTL").arg(&key)).await.unwrap();
        assert!((1..=120_000).contains(&ttl_ms), "{key}: {ttl_ms}");
    }

    /// Whether two token decisions agree; the remaining tokens refill by each store's clock
    /// between the two calls, so within one.
    fn same(r: TokenDecision, m: TokenDecision) -> bool {
        (r.allowed, r.limit) == (m.allowed, m.limit) && r.remaining.abs_diff(m.remaining) <= 1
    }

    /// Asserts that Redis and the memory store both counted, alike: the tokens as [`same`],
    /// every cap exactly.
    fn assert_alike(in_redis: &CappedDecision, in_memory: &CappedDecision, what: &str) {
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
            panic!("{what}: both counted: {in_redis:?} {in_memory:?}")
        };
        assert!(same(*r, *m), "{what}: {r:?} {m:?}");
        assert_eq!(rc, mc, "{what}");
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
            .query(redis::cmd("GET").arg(format!("{prefix}svc:{{{org}}}:req")))
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
