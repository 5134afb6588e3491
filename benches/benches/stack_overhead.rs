//! What the whole svc-tower stack adds to one request, measured against the bare service it
//! wraps.
//!
//! The stack is the gateway's protected path, outermost first: RequestId, ErrorEnvelope,
//! BodyLimit, PatAuth, AgentCheck, OrgRateLimit, Idempotency, then an inner service that answers
//! at once. The backends are in process and answer at once too (a validator closure, the
//! in-memory rate-limit and idempotency stores), so the figures are the layers' own cost: header
//! parsing, extensions, the futures, body buffering and the envelope machinery, never a network
//! round trip. Each request is a small chat-completion JSON body sent through
//! `ServiceExt::oneshot` on a ready clone, and its response body is read to the end.
//!
//! Cases: `bare` (the inner service alone), `stack/no_key` (no `Idempotency-Key`: the request
//! body is still buffered, nothing is stored) and `stack/fresh_key` (a new key every request:
//! claim, fingerprint, commit). Target: under 20 µs added per request.
//!
//! Run with `cargo bench -p svc-benches --bench stack_overhead`. Besides criterion's means, it
//! prints for each case p50 and p99 of the added cost (the stack's percentile less the bare
//! service's) from a plain timed loop of 20k requests each, bare and stack alternating after as
//! many warm-up rounds: the figures to compare with the README.

use std::convert::Infallible;
use std::fmt::Debug;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use http::{Request, Response, StatusCode, header};
use http_body::Body;
use http_body_util::{BodyExt, Full};
use svc_tower::agent::{AgentCheckLayer, AgentError};
use svc_tower::auth::{PatAuthLayer, TokenError};
use svc_tower::body_limit::BodyLimitLayer;
use svc_tower::context::{OrgContext, Permissions};
use svc_tower::envelope::ErrorEnvelopeLayer;
use svc_tower::idempotency::{IdempotencyLayer, MemoryIdempotencyStore};
use svc_tower::rate_limit::{MemoryRateLimitStore, OrgRateLimitLayer};
use svc_tower::request_id::RequestIdLayer;
use tokio::runtime::Runtime;
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};
use uuid::Uuid;

const TOKEN: &str = "svc_pat_0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b_BenchSecret0123456789";
const AGENT: &str = "0190f5a4-8e2c-7b7e-a1a4-000000000001";
const BODY: &str = r#"{"model":"svc-mock-1","messages":[{"role":"user","content":"Say hello."}],"temperature":0.2,"max_tokens":64}"#;
const COMPLETION: &str = r#"{"id":"cmpl-1","object":"chat.completion","model":"svc-mock-1","choices":[{"index":0,"message":{"role":"assistant","content":"Hello."},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#;
const MAX_BODY_BYTES: usize = 1024 * 1024;
/// The timed loop: samples per case, after as many warm-up requests.
const SAMPLES: usize = 20_000;

/// The provider stand-in: answers at once, as the bare service and as the stack's innermost.
async fn provider(_request: Request<Full<Bytes>>) -> Result<Response<Full<Bytes>>, Infallible> {
    let mut response = Response::new(Full::new(Bytes::from_static(COMPLETION.as_bytes())));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

fn context() -> OrgContext {
    OrgContext::new(
        Uuid::from_u128(0x0190f5a4_8e2c_7b7e_a1a4_3c1d2e3f0001),
        Permissions::CHAT_COMPLETIONS,
        Uuid::from_u128(0x0190f5a4_8e2c_7b7e_a1a4_3c1d2e3f4a5b),
    )
}

/// One request as a client sends it; `key` adds an `Idempotency-Key`.
fn request(key: Option<String>) -> Request<Full<Bytes>> {
    let mut builder = Request::post("/v1/chat/completions")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .header("x-svc-agent-id", AGENT)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CONTENT_LENGTH, BODY.len());
    if let Some(key) = key {
        builder = builder.header("idempotency-key", key);
    }
    builder
        .body(Full::new(Bytes::from_static(BODY.as_bytes())))
        .expect("a valid request")
}

/// A new key on every call, so each request claims, runs and commits.
fn fresh_key() -> Option<String> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    Some(format!("bench-{}", NEXT.fetch_add(1, Ordering::Relaxed)))
}

/// Sends `request` through a ready clone of `service` and reads the whole response.
async fn send<S, B>(service: &S, request: Request<Full<Bytes>>) -> StatusCode
where
    S: Service<Request<Full<Bytes>>, Response = Response<B>, Error = Infallible> + Clone,
    B: Body<Data = Bytes>,
    B::Error: Debug,
{
    let response = service
        .clone()
        .oneshot(request)
        .await
        .unwrap_or_else(|never| match never {});
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("an in-memory body")
        .to_bytes();
    black_box(body);
    status
}

/// Percentile `q` of sorted `samples`.
fn at(samples: &[Duration], q: f64) -> Duration {
    let index = ((samples.len() as f64 * q) as usize).min(samples.len() - 1);
    samples[index]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Alternates bare and stack requests `n` times, after `n` warm-up rounds, and prints the
/// added cost at p50 and p99.
fn report<S, B, T, C>(
    rt: &Runtime,
    label: &str,
    bare: &T,
    stack: &S,
    key: fn() -> Option<String>,
    n: usize,
) where
    S: Service<Request<Full<Bytes>>, Response = Response<B>, Error = Infallible> + Clone,
    B: Body<Data = Bytes>,
    B::Error: Debug,
    T: Service<Request<Full<Bytes>>, Response = Response<C>, Error = Infallible> + Clone,
    C: Body<Data = Bytes>,
    C::Error: Debug,
{
    let (mut bare_samples, mut stack_samples) = rt.block_on(async {
        let mut bare_samples = Vec::with_capacity(n);
        let mut stack_samples = Vec::with_capacity(n);
        for round in 0..2 * n {
            let plain = request(None);
            let started = Instant::now();
            send(bare, plain).await;
            let bare_time = started.elapsed();

            let protected = request(key());
            let started = Instant::now();
            let status = send(stack, protected).await;
            let stack_time = started.elapsed();
            assert_eq!(
                status,
                StatusCode::OK,
                "the stack must let the request through"
            );
            if round >= n {
                bare_samples.push(bare_time);
                stack_samples.push(stack_time);
            }
        }
        (bare_samples, stack_samples)
    });
    bare_samples.sort_unstable();
    stack_samples.sort_unstable();
    let added = |q: f64| micros(at(&stack_samples, q)) - micros(at(&bare_samples, q));
    println!(
        "stack_overhead/{label}: added p50 {:.2} µs, p99 {:.2} µs (stack p50 {:.2} / p99 {:.2} µs, \
         bare p50 {:.2} / p99 {:.2} µs, n={n}; target < 20 µs)",
        added(0.50),
        added(0.99),
        micros(at(&stack_samples, 0.50)),
        micros(at(&stack_samples, 0.99)),
        micros(at(&bare_samples, 0.50)),
        micros(at(&bare_samples, 0.99)),
    );
}

fn stack_overhead(c: &mut Criterion) {
    // One thread: the figures are per-request CPU cost, not scheduler hand-offs.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let full_run = std::env::args().any(|arg| arg == "--bench");

    let context = context();
    let validator = move |_token: &str| {
        let context = context.clone();
        async move { Ok::<_, TokenError>(context) }
    };
    let agents = |_org: Uuid, _agent: &str| async { Ok::<_, AgentError>(()) };
    let bare = service_fn(provider);
    // Built inside the runtime: the layers' timeouts need its timer.
    let stack = rt.block_on(async {
        ServiceBuilder::new()
            .layer(RequestIdLayer::new())
            .layer(ErrorEnvelopeLayer::new())
            .layer(BodyLimitLayer::new(MAX_BODY_BYTES))
            .layer(PatAuthLayer::new(validator))
            .layer(AgentCheckLayer::new(agents))
            // Never trips: the bench measures the decision, not the refusal.
            .layer(OrgRateLimitLayer::new(
                MemoryRateLimitStore::new(),
                u32::MAX,
            ))
            // A short TTL lets the store prune the bench's millions of one-off keys.
            .layer(IdempotencyLayer::new(MemoryIdempotencyStore::new()).ttl(Duration::from_secs(2)))
            .service(service_fn(provider))
    });

    let mut group = c.benchmark_group("stack_overhead");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    group.bench_function("bare", |b| {
        b.to_async(&rt).iter_batched(
            || request(None),
            |request| send(&bare, request),
            BatchSize::SmallInput,
        );
    });
    group.bench_function("stack/no_key", |b| {
        b.to_async(&rt).iter_batched(
            || request(None),
            |request| send(&stack, request),
            BatchSize::SmallInput,
        );
    });
    group.bench_function("stack/fresh_key", |b| {
        b.to_async(&rt).iter_batched(
            || request(fresh_key()),
            |request| send(&stack, request),
            BatchSize::SmallInput,
        );
    });
    group.finish();

    // Per-request percentiles of the difference: criterion reports means only.
    let n = if full_run { SAMPLES } else { 50 };
    report(&rt, "no_key", &bare, &stack, || None, n);
    report(&rt, "fresh_key", &bare, &stack, fresh_key, n);
}

criterion_group!(benches, stack_overhead);
criterion_main!(benches);
