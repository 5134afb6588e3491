use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::Script;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::fingerprint::Fingerprint;
use super::record::{self, Record};
use super::store::{Claim, ClaimToken, IdempotencyStore, StoredResponse};
use crate::store::{RedisPool, StoreError, StoreFuture, org_key};

/// `SET NX PX` the pending record; when the key is taken, return what holds it instead, in the
/// same round trip.
static CLAIM: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return false end
return redis.call('GET', KEYS[1])
",
    )
});

/// Compare-and-set: replace the pending record with the committed one only if the claim is
/// still ours (it may have expired and been claimed again).
static COMMIT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
",
    )
});

/// Compare-and-delete on the claim, for the same reason.
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
",
    )
});

/// An idempotency store in Redis, shared by every replica.
///
/// One key per org and client key, `{prefix}svc:{<org_id>}:idem:<sha256(key)>`: the org hash
/// tag keeps an org's keys in one Cluster slot, and the digest keeps client-chosen bytes out of
/// key names. The value is the pending claim (token and fingerprint) or the committed record
/// (fingerprint, status, stored headers, body), each with its TTL. Every operation is one
/// round trip.
#[derive(Debug, Clone)]
pub struct RedisIdempotencyStore {
    pool: RedisPool,
    prefix: Arc<str>,
}

impl RedisIdempotencyStore {
    /// A store on `pool` with keys prefixed by `prefix` (empty in production; tests use a
    /// random one).
    pub fn new(pool: RedisPool, prefix: impl Into<String>) -> RedisIdempotencyStore {
        RedisIdempotencyStore {
            pool,
            prefix: Arc::from(prefix.into()),
        }
    }

    fn key(&self, org_id: &Uuid, key: &str) -> String {
        let digest = Sha256::digest(key.as_bytes());
        let mut suffix = String::with_capacity(5 + 64);
        suffix.push_str("idem:");
        for byte in digest {
            suffix.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
            suffix.push(char::from_digit(u32::from(byte & 0xF), 16).unwrap_or('0'));
        }
        org_key(&self.prefix, org_id, &suffix)
    }
}

fn millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl IdempotencyStore for RedisIdempotencyStore {
    fn claim(
        &self,
        org_id: Uuid,
        key: &str,
        fingerprint: Fingerprint,
        pending_ttl: Duration,
    ) -> StoreFuture<Claim> {
        let pool = self.pool.clone();
        let key = self.key(&org_id, key);
        Box::pin(async move {
            let token = ClaimToken::new(fingerprint);
            let mut invocation = CLAIM.prepare_invoke();
            invocation
                .key(key)
                .arg(record::encode_pending(&token))
                .arg(millis(pending_ttl));
            let holder: Option<Vec<u8>> = pool.invoke(&invocation).await?;
            let Some(holder) = holder else {
                return Ok(Claim::Claimed(token));
            };
            match record::decode(&holder) {
                Some(Record::Pending {
                    fingerprint: held, ..
                }) if held == fingerprint => Ok(Claim::InProgress),
                Some(Record::Committed {
                    fingerprint: held,
                    response,
                }) if held == fingerprint => Ok(Claim::Committed(response)),
                Some(_) => Ok(Claim::Mismatch),
                None => Err(StoreError::new("unreadable idempotency record")),
            }
        })
    }

    fn commit(
        &self,
        org_id: Uuid,
        key: &str,
        token: &ClaimToken,
        response: StoredResponse,
        ttl: Duration,
    ) -> StoreFuture<bool> {
        let pool = self.pool.clone();
        let key = self.key(&org_id, key);
        let pending = record::encode_pending(token);
        let committed = record::encode_committed(&token.fingerprint(), &response);
        Box::pin(async move {
            let mut invocation = COMMIT.prepare_invoke();
            invocation
                .key(key)
                .arg(pending)
                .arg(committed)
                .arg(millis(ttl));
            let done: i64 = pool.invoke(&invocation).await?;
            Ok(done == 1)
        })
    }

    fn release(&self, org_id: Uuid, key: &str, token: &ClaimToken) -> StoreFuture<bool> {
        let pool = self.pool.clone();
        let key = self.key(&org_id, key);
        let pending = record::encode_pending(token);
        Box::pin(async move {
            let mut invocation = RELEASE.prepare_invoke();
            invocation.key(key).arg(pending);
            let done: i64 = pool.invoke(&invocation).await?;
            Ok(done == 1)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keys_are_digests_under_the_org_hash_tag() {
        let pool = RedisPool::new(&svc_testkit::redis_url()).unwrap();
        let prefix = svc_testkit::redis_prefix();
        let store = RedisIdempotencyStore::new(pool.clone(), prefix.clone());
        let org = Uuid::new_v4();
        let fingerprint = Fingerprint::from_bytes([9; 32]);
        let claim = store
            .claim(org, "my key", fingerprint, Duration::from_secs(30))
            .await
            .unwrap();
        assert!(matches!(claim, Claim::Claimed(_)));
        let pattern = format!("{prefix}svc:{{{org}}}:idem:*");
        let keys: Vec<String> = pool.query(redis::cmd("KEYS").arg(&pattern)).await.unwrap();
        assert_eq!(keys.len(), 1);
        assert!(!keys[0].contains("my key"));
        assert_eq!(keys[0].len(), pattern.len() - 1 + 64);
        let ttl_ms: i64 = pool.query(redis::cmd("PTTL").arg(&keys[0])).await.unwrap();
        assert!((1..=30_000).contains(&ttl_ms), "ttl {ttl_ms}");
    }

    #[tokio::test]
    async fn a_foreign_value_is_an_error_not_a_claim() {
        let pool = RedisPool::new(&svc_testkit::redis_url()).unwrap();
        let store = RedisIdempotencyStore::new(pool.clone(), svc_testkit::redis_prefix());
        let org = Uuid::new_v4();
        let key = store.key(&org, "k");
        let _: () = pool
            .query(
                redis::cmd("SET")
                    .arg(&key)
                    .arg("garbage")
                    .arg("PX")
                    .arg(30_000),
            )
            .await
            .unwrap();
        let claim = store
            .claim(
                org,
                "k",
                Fingerprint::from_bytes([0; 32]),
                Duration::from_secs(1),
            )
            .await;
        assert!(claim.is_err());
    }
}
