//! The stateful layers' store round trips on loopback Redis, next to the in-memory stores.
//!
//! Run with `cargo bench -p svc-tower --bench stores` (Redis from `SVC_TEST_REDIS_URL`, else
//! 127.0.0.1:6379). Before criterion's statistics it prints p50/p99/max of sequential
//! operations, the figures the README compares against its target (p99 < 0.5 ms).

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput};
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use svc_tower::idempotency::{
    Claim, Fingerprint, IdempotencyStore, MemoryIdempotencyStore, RedisIdempotencyStore,
    StoredResponse,
};
use svc_tower::rate_limit::{MemoryRateLimitStore, RateLimitStore, RedisRateLimitStore};
use svc_tower::store::RedisPool;
use tokio::runtime::Runtime;
use uuid::Uuid;

const PENDING: Duration = Duration::from_secs(120);
const TTL: Duration = Duration::from_secs(60);
const SAMPLES: usize = 5_000;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn pool() -> RedisPool {
    RedisPool::new(&svc_testkit::redis_url()).expect("a valid Redis URL")
}

/// A typical completion body: about 1 KiB of JSON.
fn response() -> StoredResponse {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let content = "lorem ipsum ".repeat(70);
    StoredResponse {
        status: StatusCode::OK,
        headers,
        body: Bytes::from(format!(
            r#"{{"id":"cmpl-1","object":"chat.completion","choices":[{{"message":{{"role":"assistant","content":"{content}"}}}}]}}"#
        )),
    }
}

/// Claims a fresh key and commits a response to it: the store work of one idempotent request.
async fn claim_and_commit<S: IdempotencyStore>(store: &S, org: Uuid, response: &StoredResponse) {
    let key = Uuid::new_v4().to_string();
    let mut fingerprint = [0u8; 32];
    fingerprint[..16].copy_from_slice(Uuid::new_v4().as_bytes());
    let fingerprint = Fingerprint::from_bytes(fingerprint);
    let Ok(Claim::Claimed(token)) = store.claim(org, &key, fingerprint, PENDING).await else {
        panic!("a fresh key is claimed");
    };
    let committed = store.commit(org, &key, &token, response.clone(), TTL).await;
    assert_eq!(committed.ok(), Some(true));
}

/// p50/p99/max of `SAMPLES` sequential operations, after a warm-up.
fn percentiles<F, Fut>(runtime: &Runtime, name: &str, mut op: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut micros = runtime.block_on(async {
        for _ in 0..500 {
            op().await;
        }
        let mut micros = Vec::with_capacity(SAMPLES);
        for _ in 0..SAMPLES {
            let started = Instant::now();
            op().await;
            micros.push(started.elapsed().as_secs_f64() * 1e6);
        }
        micros
    });
    micros.sort_by(f64::total_cmp);
    let at = |q: f64| micros[((micros.len() as f64 * q) as usize).min(micros.len() - 1)];
    println!(
        "{name:<40} p50 {:>7.1} us   p99 {:>7.1} us   max {:>8.1} us   ({SAMPLES} sequential)",
        at(0.50),
        at(0.99),
        micros[micros.len() - 1]
    );
}

fn print_percentiles(runtime: &Runtime) {
    let redis_rl = RedisRateLimitStore::new(pool(), svc_testkit::redis_prefix());
    let memory_rl = MemoryRateLimitStore::new();
    let redis_idem = RedisIdempotencyStore::new(pool(), svc_testkit::redis_prefix());
    let memory_idem = MemoryIdempotencyStore::new();
    let org = Uuid::new_v4();
    let response = response();
    println!();
    percentiles(runtime, "rate_limit/redis decision", || async {
        black_box(redis_rl.check(org, 1_000_000).await.expect("a decision"));
    });
    percentiles(runtime, "rate_limit/memory decision", || async {
        black_box(memory_rl.check(org, 1_000_000).await.expect("a decision"));
    });
    percentiles(runtime, "idempotency/redis claim+commit (1 KiB)", || {
        claim_and_commit(&redis_idem, org, &response)
    });
    percentiles(runtime, "idempotency/memory claim+commit (1 KiB)", || {
        claim_and_commit(&memory_idem, org, &response)
    });
    println!();
}

fn bench_rate_limit(c: &mut Criterion, runtime: &Runtime) {
    let mut group = c.benchmark_group("rate_limit");
    group.throughput(Throughput::Elements(1));
    let redis = RedisRateLimitStore::new(pool(), svc_testkit::redis_prefix());
    let memory = MemoryRateLimitStore::new();
    let org = Uuid::new_v4();
    group.bench_function("redis_decision", |b| {
        b.to_async(runtime)
            .iter(|| async { black_box(redis.check(org, 1_000_000).await.expect("a decision")) })
    });
    group.bench_function("memory_decision", |b| {
        b.to_async(runtime)
            .iter(|| async { black_box(memory.check(org, 1_000_000).await.expect("a decision")) })
    });
    group.finish();
}

fn bench_idempotency(c: &mut Criterion, runtime: &Runtime) {
    let mut group = c.benchmark_group("idempotency");
    group.throughput(Throughput::Elements(1));
    let redis = RedisIdempotencyStore::new(pool(), svc_testkit::redis_prefix());
    let memory = MemoryIdempotencyStore::new();
    let org = Uuid::new_v4();
    let response = response();
    group.bench_function("redis_claim_commit", |b| {
        b.to_async(runtime)
            .iter(|| claim_and_commit(&redis, org, &response))
    });
    group.bench_function("memory_claim_commit", |b| {
        b.to_async(runtime)
            .iter(|| claim_and_commit(&memory, org, &response))
    });
    group.finish();
}

fn bench_fingerprint(c: &mut Criterion) {
    let mut group = c.benchmark_group("fingerprint");
    for kib in [1usize, 100] {
        let content = "x".repeat(kib * 1024);
        let body = format!(
            r#"{{"model":"svc-mock-1","messages":[{{"role":"user","content":"{content}"}}],"temperature":0.2}}"#
        );
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(
            BenchmarkId::from_parameter(format!("{kib}KiB")),
            &body,
            |b, body| {
                b.iter(|| {
                    Fingerprint::compute(&Method::POST, "/v1/chat/completions", body.as_bytes())
                })
            },
        );
    }
    group.finish();
}

fn main() {
    let runtime = runtime();
    // The pools start their background tasks on the runtime they are built in.
    let _entered = runtime.enter();
    print_percentiles(&runtime);
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    bench_rate_limit(&mut criterion, &runtime);
    bench_idempotency(&mut criterion, &runtime);
    bench_fingerprint(&mut criterion);
    criterion.final_summary();
}
