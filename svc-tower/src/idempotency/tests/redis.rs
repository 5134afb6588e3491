//! What only a shared store shows: replicas deduplicate together; an unreachable Redis fails
//! open within the budget.

use std::time::{Duration, Instant};

use http::StatusCode;

use super::failures::failures;
use super::{BODY, Provider, chat, org, send};
use crate::idempotency::{IdempotencyLayer, RedisIdempotencyStore};
use crate::metrics::ProxyMetrics;
use crate::store::RedisPool;

fn replica(prefix: &str) -> RedisIdempotencyStore {
    let pool = RedisPool::new(&svc_testkit::redis_url()).unwrap();
    RedisIdempotencyStore::new(pool, prefix)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_claims_and_replays() {
    let prefix = svc_testkit::redis_prefix();
    let provider = Provider::new().gated();
    let layer = |store| IdempotencyLayer::new(store).timeout(Duration::from_secs(2));
    let (a, b) = (
        provider.stack(layer(replica(&prefix))),
        provider.stack(layer(replica(&prefix))),
    );
    let org = org();
    let mut requests = Vec::new();
    for i in 0..50 {
        let stack = if i % 2 == 0 { a.clone() } else { b.clone() };
        let org = org.clone();
        requests.push(tokio::spawn(async move {
            send(&stack, chat(Some(&org), Some("across"), BODY)).await
        }));
    }
    assert!(super::eventually(|| async { provider.calls() >= 1 }).await);
    provider.open(1);
    let mut statuses = Vec::new();
    for request in requests {
        statuses.push(request.await.unwrap().status);
    }
    assert_eq!(provider.calls(), 1);
    assert!(
        statuses
            .iter()
            .all(|s| *s == StatusCode::OK || *s == StatusCode::CONFLICT)
    );
    let from_a = send(&a, chat(Some(&org), Some("across"), BODY)).await;
    let from_b = send(&b, chat(Some(&org), Some("across"), BODY)).await;
    assert!(from_a.replayed() && from_b.replayed());
    assert_eq!(from_a.body, from_b.body);
}

#[tokio::test]
async fn unreachable_redis_fails_open_within_the_timeout() {
    let timeout = Duration::from_millis(50);
    let url = format!("redis://127.0.0.1:{}", svc_testkit::free_port());
    let store = RedisIdempotencyStore::new(RedisPool::new(&url).unwrap(), "unused:");
    let metrics = ProxyMetrics::new();
    let provider = Provider::new();
    let stack = provider.stack(
        IdempotencyLayer::new(store)
            .timeout(timeout)
            .metrics(metrics.clone()),
    );
    let org = org();
    for _ in 0..3 {
        let started = Instant::now();
        let answer = send(&stack, chat(Some(&org), Some("k"), BODY)).await;
        let elapsed = started.elapsed();
        assert_eq!(answer.status, StatusCode::OK);
        assert!(!answer.replayed());
        // A bound, not a benchmark: one claim budget plus a generous scheduling margin.
        assert!(
            elapsed < timeout + Duration::from_millis(250),
            "took {elapsed:?}"
        );
    }
    assert_eq!(provider.calls(), 3);
    assert_eq!(
        failures(&metrics, "error") + failures(&metrics, "timeout"),
        3
    );
}
