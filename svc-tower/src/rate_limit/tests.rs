use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use tower::{BoxError, ServiceBuilder, ServiceExt};
use uuid::Uuid;

use super::layer::{
    X_RATELIMIT_LIMIT, X_RATELIMIT_LIMIT_REQUESTS, X_RATELIMIT_REMAINING,
    X_RATELIMIT_REMAINING_REQUESTS, X_RATELIMIT_RESET, X_RATELIMIT_RESET_REQUESTS,
};
use super::*;
use crate::context::{OrgContext, Permissions};
use crate::error::{ApiError, ErrorCode};
use crate::metrics::{ProxyMetrics, StoreFailureLabels};
use crate::store::{StoreError, StoreFuture};

type Inner = tower::util::BoxCloneService<Request<Full<Bytes>>, Response<Full<Bytes>>, BoxError>;

/// An inner service that answers 200 and counts its calls.
fn counting() -> (Inner, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let service = tower::service_fn(move |_req: Request<Full<Bytes>>| {
        counter.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, BoxError>(Response::new(Full::new(Bytes::from_static(b"ok")))) }
    });
    (tower::util::BoxCloneService::new(service), calls)
}

fn request(org_id: Option<Uuid>) -> Request<Full<Bytes>> {
    let mut request = Request::new(Full::default());
    if let Some(org_id) = org_id {
        request.extensions_mut().insert(OrgContext::new(
            org_id,
            Permissions::CHAT_COMPLETIONS,
            Uuid::new_v4(),
        ));
    }
    request
}

fn failures(metrics: &ProxyMetrics, kind: &'static str) -> u64 {
    metrics
        .store_failures_total
        .get_or_create(&StoreFailureLabels {
            store: "rate_limit",
            kind,
        })
        .get()
}

fn header<B>(response: &Response<B>, name: &http::HeaderName) -> Option<String> {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

#[tokio::test]
async fn adds_rate_limit_headers_to_allowed_responses() {
    let (inner, calls) = counting();
    let service = ServiceBuilder::new()
        .layer(OrgRateLimitLayer::new(MemoryRateLimitStore::new(), 10))
        .service(inner);
    let response = service
        .oneshot(request(Some(Uuid::new_v4())))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(header(&response, &X_RATELIMIT_LIMIT).as_deref(), Some("10"));
    assert_eq!(
        header(&response, &X_RATELIMIT_REMAINING).as_deref(),
        Some("9")
    );
    assert_eq!(header(&response, &X_RATELIMIT_RESET).as_deref(), Some("6"));
    // The same figures under OpenAI's names, which the SDKs read.
    assert_eq!(
        header(&response, &X_RATELIMIT_LIMIT_REQUESTS).as_deref(),
        Some("10")
    );
    assert_eq!(
        header(&response, &X_RATELIMIT_REMAINING_REQUESTS).as_deref(),
        Some("9")
    );
    assert_eq!(
        header(&response, &X_RATELIMIT_RESET_REQUESTS).as_deref(),
        Some("6s")
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn refuses_over_the_limit_with_429_retry_after_and_headers() {
    let (inner, calls) = counting();
    let metrics = ProxyMetrics::new();
    let service = ServiceBuilder::new()
        .layer(OrgRateLimitLayer::new(MemoryRateLimitStore::new(), 2).metrics(metrics.clone()))
        .service(inner);
    let org = Uuid::new_v4();
    for _ in 0..2 {
        let ok = service.clone().oneshot(request(Some(org))).await.unwrap();
        assert_eq!(ok.status(), StatusCode::OK);
    }
    let refused = service.oneshot(request(Some(org))).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        header(&refused, &header::RETRY_AFTER).as_deref(),
        Some("30")
    );
    assert_eq!(header(&refused, &X_RATELIMIT_LIMIT).as_deref(), Some("2"));
    assert_eq!(
        header(&refused, &X_RATELIMIT_REMAINING).as_deref(),
        Some("0")
    );
    assert_eq!(header(&refused, &X_RATELIMIT_RESET).as_deref(), Some("60"));
    assert_eq!(
        header(&refused, &X_RATELIMIT_RESET_REQUESTS).as_deref(),
        Some("1m0s")
    );
    let error = refused.extensions().get::<ApiError>().unwrap();
    assert_eq!(error.code(), &ErrorCode::RateLimited);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(metrics.rate_limited_total.get(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_limit_refills_after_retry_after() {
    let (inner, _) = counting();
    let service = ServiceBuilder::new()
        .layer(OrgRateLimitLayer::new(MemoryRateLimitStore::new(), 1))
        .service(inner);
    let org = Uuid::new_v4();
    assert_eq!(
        service
            .clone()
            .oneshot(request(Some(org)))
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
    let refused = service.clone().oneshot(request(Some(org))).await.unwrap();
    let retry_after: u64 = header(&refused, &header::RETRY_AFTER)
        .unwrap()
        .parse()
        .unwrap();
    tokio::time::advance(Duration::from_secs(retry_after)).await;
    assert_eq!(
        service.oneshot(request(Some(org))).await.unwrap().status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn passes_requests_without_org_context_untouched() {
    let (inner, calls) = counting();
    let service = ServiceBuilder::new()
        .layer(OrgRateLimitLayer::new(MemoryRateLimitStore::new(), 1))
        .service(inner);
    for _ in 0..3 {
        let response = service.clone().oneshot(request(None)).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert!(response.headers().get(&X_RATELIMIT_LIMIT).is_none());
    }
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn other_orgs_are_unaffected_by_one_orgs_limit() {
    let (inner, _) = counting();
    let service = ServiceBuilder::new()
        .layer(OrgRateLimitLayer::new(MemoryRateLimitStore::new(), 1))
        .service(inner);
    let noisy = Uuid::new_v4();
    service.clone().oneshot(request(Some(noisy))).await.unwrap();
    let refused = service.clone().oneshot(request(Some(noisy))).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let quiet = service
        .oneshot(request(Some(Uuid::new_v4())))
        .await
        .unwrap();
    assert_eq!(quiet.status(), StatusCode::OK);
}

#[tokio::test]
async fn noop_store_allows_everything() {
    let (inner, calls) = counting();
    let service = ServiceBuilder::new()
        .layer(OrgRateLimitLayer::new(NoopRateLimitStore, 1))
        .service(inner);
    let org = Uuid::new_v4();
    for _ in 0..5 {
        let response = service.clone().oneshot(request(Some(org))).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 5);
}

/// A store that never answers.
#[derive(Debug, Clone)]
struct Hanging;

impl RateLimitStore for Hanging {
    fn check(&self, _org_id: Uuid, _limit: u32) -> StoreFuture<Decision> {
        Box::pin(std::future::pending())
    }
}

/// A store that always fails.
#[derive(Debug, Clone)]
struct Failing;

impl RateLimitStore for Failing {
    fn check(&self, _org_id: Uuid, _limit: u32) -> StoreFuture<Decision> {
        Box::pin(std::future::ready(Err(StoreError::new("down"))))
    }
}

#[tokio::test(start_paused = true)]
async fn a_slow_store_fails_open_after_the_timeout() {
    let (inner, calls) = counting();
    let metrics = ProxyMetrics::new();
    let service = ServiceBuilder::new()
        .layer(
            OrgRateLimitLayer::new(Hanging, 1)
                .timeout(Duration::from_millis(25))
                .metrics(metrics.clone()),
        )
        .service(inner);
    let started = tokio::time::Instant::now();
    let response = service
        .oneshot(request(Some(Uuid::new_v4())))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(started.elapsed(), Duration::from_millis(25));
    // Unmetered: the whole limit remains.
    assert_eq!(header(&response, &X_RATELIMIT_LIMIT).as_deref(), Some("1"));
    assert_eq!(
        header(&response, &X_RATELIMIT_REMAINING).as_deref(),
        Some("1")
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(failures(&metrics, "timeout"), 1);
}

#[tokio::test]
async fn a_failing_store_fails_open_and_is_counted() {
    let (inner, calls) = counting();
    let metrics = ProxyMetrics::new();
    let service = ServiceBuilder::new()
        .layer(OrgRateLimitLayer::new(Failing, 1).metrics(metrics.clone()))
        .service(inner);
    let org = Uuid::new_v4();
    for _ in 0..3 {
        let response = service.clone().oneshot(request(Some(org))).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(failures(&metrics, "error"), 3);
    assert_eq!(metrics.rate_limited_total.get(), 0);
}

#[tokio::test]
async fn inner_errors_pass_through() {
    let failing = tower::service_fn(|_req: Request<Full<Bytes>>| async {
        Err::<Response<Full<Bytes>>, _>(std::io::Error::other("inner"))
    });
    let service = ServiceBuilder::new()
        .layer(OrgRateLimitLayer::new(MemoryRateLimitStore::new(), 5))
        .service(failing);
    let error = service
        .oneshot(request(Some(Uuid::new_v4())))
        .await
        .unwrap_err();
    assert_eq!(error.to_string(), "inner");
}

#[tokio::test]
async fn works_as_an_infallible_axum_style_service() {
    // axum requires `Error = Infallible`: rejections must be responses, not errors.
    let service = ServiceBuilder::new()
        .layer(OrgRateLimitLayer::new(MemoryRateLimitStore::new(), 1))
        .service_fn(|_req: Request<String>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        });
    let org = Uuid::new_v4();
    let mut statuses = Vec::new();
    for _ in 0..2 {
        let mut req = Request::new(String::new());
        req.extensions_mut()
            .insert(OrgContext::new(org, Permissions::NONE, Uuid::new_v4()));
        let response: Result<Response<_>, Infallible> = service.clone().oneshot(req).await;
        statuses.push(
            response
                .map(|r| r.status())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        );
    }
    assert_eq!(statuses, [StatusCode::OK, StatusCode::TOO_MANY_REQUESTS]);
}

#[tokio::test]
async fn limits_an_axum_router() {
    use axum::routing::get;
    use axum::{Extension, Router};

    let org = request(Some(Uuid::new_v4()))
        .extensions()
        .get::<OrgContext>()
        .cloned()
        .unwrap();
    let app = Router::new()
        .route("/v1/orgs/{org_id}/auth-probe", get(|| async { "ok" }))
        .layer(OrgRateLimitLayer::new(MemoryRateLimitStore::new(), 1))
        .layer(Extension(org));
    let probe = || {
        Request::get("/v1/orgs/x/auth-probe")
            .body(axum::body::Body::empty())
            .unwrap()
    };
    let ok = app.clone().oneshot(probe()).await.unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    assert_eq!(ok.headers()[&X_RATELIMIT_REMAINING], "0");
    let refused = app.oneshot(probe()).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().contains_key(header::RETRY_AFTER));
}

#[cfg(feature = "redis")]
mod redis_backed {
    use std::time::Instant;

    use tower::Service;

    use super::*;
    use crate::store::RedisPool;

    fn redis_store(prefix: &str) -> RedisRateLimitStore {
        let pool = RedisPool::new(&svc_testkit::redis_url()).unwrap();
        RedisRateLimitStore::new(pool, prefix)
    }

    /// Two replicas: two pools, two stacks, one Redis.
    #[tokio::test]
    async fn two_replicas_enforce_one_orgs_limit_jointly() {
        const LIMIT: u32 = 10;
        let prefix = svc_testkit::redis_prefix();
        let (inner_a, calls_a) = counting();
        let (inner_b, calls_b) = counting();
        let replica_a = ServiceBuilder::new()
            .layer(
                OrgRateLimitLayer::new(redis_store(&prefix), LIMIT).timeout(Duration::from_secs(2)),
            )
            .service(inner_a);
        let replica_b = ServiceBuilder::new()
            .layer(
                OrgRateLimitLayer::new(redis_store(&prefix), LIMIT).timeout(Duration::from_secs(2)),
            )
            .service(inner_b);
        let org = Uuid::new_v4();
        let mut tasks = Vec::new();
        for i in 0..LIMIT + 10 {
            let replica = if i % 2 == 0 {
                replica_a.clone()
            } else {
                replica_b.clone()
            };
            tasks.push(tokio::spawn(replica.oneshot(request(Some(org)))));
        }
        let mut passed = 0;
        let mut refused = 0;
        for task in tasks {
            match task.await.unwrap().unwrap().status() {
                StatusCode::OK => passed += 1,
                StatusCode::TOO_MANY_REQUESTS => refused += 1,
                other => panic!("unexpected status {other}"),
            }
        }
        assert_eq!(passed, LIMIT);
        assert_eq!(refused, 10);
        assert_eq!(
            calls_a.load(Ordering::SeqCst) + calls_b.load(Ordering::SeqCst),
            LIMIT as usize
        );
    }

    #[tokio::test]
    async fn redis_backed_limit_refuses_and_spares_other_orgs() {
        let (inner, _) = counting();
        let service = ServiceBuilder::new()
            .layer(
                OrgRateLimitLayer::new(redis_store(&svc_testkit::redis_prefix()), 3)
                    .timeout(Duration::from_secs(2)),
            )
            .service(inner);
        let org = Uuid::new_v4();
        let mut remaining = Vec::new();
        for _ in 0..3 {
            let response = service.clone().oneshot(request(Some(org))).await.unwrap();
            remaining.push(header(&response, &X_RATELIMIT_REMAINING).unwrap());
        }
        assert_eq!(remaining, ["2", "1", "0"]);
        let refused = service.clone().oneshot(request(Some(org))).await.unwrap();
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(
            header(&refused, &header::RETRY_AFTER).as_deref(),
            Some("20")
        );
        let other = service
            .oneshot(request(Some(Uuid::new_v4())))
            .await
            .unwrap();
        assert_eq!(other.status(), StatusCode::OK);
    }

    #[tokio::test]
    async fn unreachable_redis_fails_open_within_the_timeout() {
        let timeout = Duration::from_millis(25);
        let url = format!("redis://127.0.0.1:{}", svc_testkit::free_port());
        let store = RedisRateLimitStore::new(RedisPool::new(&url).unwrap(), "unused:");
        let metrics = ProxyMetrics::new();
        let (inner, calls) = counting();
        let service = ServiceBuilder::new()
            .layer(
                OrgRateLimitLayer::new(store, 1)
                    .timeout(timeout)
                    .metrics(metrics.clone()),
            )
            .service(inner);
        let org = Uuid::new_v4();
        for _ in 0..3 {
            let started = Instant::now();
            let response = service.clone().oneshot(request(Some(org))).await.unwrap();
            let elapsed = started.elapsed();
            assert_eq!(response.status(), StatusCode::OK);
            // A bound, not a benchmark: the timeout plus a generous scheduling margin.
            assert!(
                elapsed < timeout + Duration::from_millis(250),
                "took {elapsed:?}"
            );
        }
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(
            failures(&metrics, "error") + failures(&metrics, "timeout"),
            3
        );
    }

    #[tokio::test]
    async fn recovers_when_redis_comes_back() {
        // redis://[user:password@]host:port[/db]: route host:port through the proxy.
        let url = svc_testkit::redis_url();
        let (scheme, rest) = url.split_once("://").unwrap();
        let (userinfo, rest) = rest.rsplit_once('@').map_or(("", rest), |(u, r)| (u, r));
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let target = tokio::net::lookup_host(authority)
            .await
            .unwrap()
            .next()
            .unwrap();
        let proxy = svc_testkit::FaultProxy::start(target).await;
        let at = if userinfo.is_empty() { "" } else { "@" };
        let proxied = format!("{scheme}://{userinfo}{at}{}/{path}", proxy.addr());
        let pool = RedisPool::new(&proxied).unwrap();
        let store = RedisRateLimitStore::new(pool, svc_testkit::redis_prefix());
        let (inner, _) = counting();
        let service = ServiceBuilder::new()
            .layer(OrgRateLimitLayer::new(store, 1000).timeout(Duration::from_millis(500)))
            .service(inner);
        let org = Uuid::new_v4();
        // Failing open reports the whole limit remaining; a counted request reports less.
        let decided = || {
            let service = service.clone();
            async move {
                let response = service.oneshot(request(Some(org))).await.unwrap();
                header(&response, &X_RATELIMIT_REMAINING).as_deref() != Some("1000")
            }
        };
        assert!(decided().await);
        proxy.cut();
        let failed_open =
            svc_testkit::eventually(Duration::from_secs(5), || async { !decided().await });
        assert!(failed_open.await);
        proxy.restore();
        assert!(svc_testkit::eventually(Duration::from_secs(10), decided).await);
    }

    #[tokio::test]
    async fn the_service_is_ready_for_many_concurrent_callers() {
        let (inner, calls) = counting();
        let mut service = ServiceBuilder::new()
            .layer(
                OrgRateLimitLayer::new(redis_store(&svc_testkit::redis_prefix()), 1000)
                    .timeout(Duration::from_secs(2)),
            )
            .service(inner);
        let org = Uuid::new_v4();
        let mut futures = Vec::new();
        for _ in 0..20 {
            std::future::poll_fn(|cx| service.poll_ready(cx))
                .await
                .unwrap();
            futures.push(service.call(request(Some(org))));
        }
        for future in futures {
            assert_eq!(future.await.unwrap().status(), StatusCode::OK);
        }
        assert_eq!(calls.load(Ordering::SeqCst), 20);
    }
}

#[test]
fn durations_are_written_as_openai_writes_them() {
    use super::layer::openai_duration;
    assert_eq!(openai_duration(0), "0s");
    assert_eq!(openai_duration(45), "45s");
    assert_eq!(openai_duration(360), "6m0s");
    assert_eq!(openai_duration(3723), "1h2m3s");
}

#[tokio::test]
async fn a_tokens_own_lower_limit_binds_first_and_its_numbers_are_in_the_headers() {
    let (inner, calls) = counting();
    let service = ServiceBuilder::new()
        .layer(OrgRateLimitLayer::new(MemoryRateLimitStore::new(), 10))
        .service(inner);
    let org_id = Uuid::new_v4();
    let limited = |token_id: Uuid| {
        let mut request = request(Some(org_id));
        if let Some(context) = request.extensions_mut().get_mut::<OrgContext>() {
            context.token_id = token_id;
            context.limits.requests_per_minute = Some(2);
        }
        request
    };
    let token = Uuid::new_v4();
    for remaining in ["1", "0"] {
        let response = service.clone().oneshot(limited(token)).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(header(&response, &X_RATELIMIT_LIMIT).as_deref(), Some("2"));
        assert_eq!(
            header(&response, &X_RATELIMIT_REMAINING_REQUESTS).as_deref(),
            Some(remaining)
        );
    }
    let refused = service.clone().oneshot(limited(token)).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&refused, &X_RATELIMIT_LIMIT).as_deref(), Some("2"));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    // Another token of the org still has the org's allowance, less what the first spent.
    let other = service
        .clone()
        .oneshot(request(Some(org_id)))
        .await
        .unwrap();
    assert_eq!(other.status(), StatusCode::OK);
    assert_eq!(header(&other, &X_RATELIMIT_LIMIT).as_deref(), Some("10"));
    assert_eq!(header(&other, &X_RATELIMIT_REMAINING).as_deref(), Some("6"));
}

/// A memory store that counts the checks and refunds it is asked for.
#[derive(Debug, Clone, Default)]
struct Counting {
    store: MemoryRateLimitStore,
    checks: Arc<AtomicUsize>,
    refunds: Arc<AtomicUsize>,
}

impl RateLimitStore for Counting {
    fn check(&self, org_id: Uuid, limit: u32) -> StoreFuture<Decision> {
        self.checks.fetch_add(1, Ordering::SeqCst);
        self.store.check(org_id, limit)
    }

    fn refunds(&self) -> bool {
        true
    }

    fn refund(&self, org_id: Uuid, limit: u32) -> StoreFuture<()> {
        self.refunds.fetch_add(1, Ordering::SeqCst);
        self.store.refund(org_id, limit)
    }
}

type Limited = tower::util::BoxCloneService<
    Request<Full<Bytes>>,
    Response<crate::body::ResponseBody<Full<Bytes>>>,
    BoxError,
>;

/// EarlyRateLimit in front of a stand-in for PatAuth (a token is good while `tokens` maps it
/// to its org; anything else is 401) and a permission check (`deny` is 403), then the limiter.
fn early_stack(store: Counting, limit: u32, tokens: Tokens) -> Limited {
    let rate_limit = OrgRateLimitLayer::new(store, limit);
    let early = rate_limit.early();
    let (inner, _) = counting();
    let limited = ServiceBuilder::new().layer(rate_limit).service(inner);
    let auth = tower::service_fn(move |mut request: Request<Full<Bytes>>| {
        let limited = limited.clone();
        let token = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
            .unwrap_or_default();
        let org = tokens.lock().unwrap().get(&token).copied();
        async move {
            let refuse = |status| {
                let mut response = Response::new(crate::body::ResponseBody::empty());
                *response.status_mut() = status;
                Ok(response)
            };
            let Some(org) = org else {
                return refuse(StatusCode::UNAUTHORIZED);
            };
            if request.headers().contains_key("deny") {
                return refuse(StatusCode::FORBIDDEN);
            }
            let context = OrgContext::new(org, Permissions::CHAT_COMPLETIONS, Uuid::new_v4());
            request.extensions_mut().insert(context);
            limited.oneshot(request).await
        }
    });
    tower::util::BoxCloneService::new(ServiceBuilder::new().layer(early).service(auth))
}

type Tokens = Arc<std::sync::Mutex<std::collections::HashMap<String, Uuid>>>;

/// The stand-in auth service's good tokens, each of `org`.
fn tokens(org: Uuid, names: &[&str]) -> Tokens {
    let good = names.iter().map(|name| ((*name).to_owned(), org));
    Arc::new(std::sync::Mutex::new(good.collect()))
}

fn with_token(token: &str) -> Request<Full<Bytes>> {
    Request::builder()
        .header(header::AUTHORIZATION, token)
        .body(Full::default())
        .unwrap()
}

#[tokio::test]
async fn an_early_decision_counts_each_request_once() {
    let store = Counting::default();
    let org = Uuid::new_v4();
    let service = early_stack(store.clone(), 3, tokens(org, &["Bearer a"]));
    let mut remaining = Vec::new();
    for _ in 0..4 {
        let response = service
            .clone()
            .oneshot(with_token("Bearer a"))
            .await
            .unwrap();
        remaining.push((response.status(), header(&response, &X_RATELIMIT_REMAINING)));
    }
    let some = |n: &str| Some(n.to_owned());
    assert_eq!(
        remaining,
        [
            (StatusCode::OK, some("2")),
            (StatusCode::OK, some("1")),
            (StatusCode::OK, some("0")),
            (StatusCode::TOO_MANY_REQUESTS, some("0")),
        ]
    );
    // The first request's token was unknown: its limiter asked. The rest were asked early,
    // and the limiter took those answers instead of asking again.
    assert_eq!(store.checks.load(Ordering::SeqCst), 4);
    assert_eq!(store.refunds.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_flood_of_a_revoked_token_spends_none_of_its_orgs_limit() {
    let store = Counting::default();
    let org = Uuid::new_v4();
    let tokens = tokens(org, &["Bearer revoked", "Bearer other"]);
    let service = early_stack(store.clone(), 5, tokens.clone());
    let seen = service
        .clone()
        .oneshot(with_token("Bearer revoked"))
        .await
        .unwrap();
    assert_eq!(header(&seen, &X_RATELIMIT_REMAINING).as_deref(), Some("4"));
    tokens.lock().unwrap().remove("Bearer revoked");
    let flood = (0..50).map(|_| service.clone().oneshot(with_token("Bearer revoked")));
    for response in futures_util::future::join_all(flood).await {
        assert_eq!(response.unwrap().status(), StatusCode::UNAUTHORIZED);
    }
    // The requests in flight when the first 401 came back were counted early and given
    // back; the token was then forgotten, so the rest were not counted at all.
    let checked = store.checks.load(Ordering::SeqCst);
    assert_eq!(store.refunds.load(Ordering::SeqCst), checked - 1);
    for _ in 0..20 {
        let refused = service
            .clone()
            .oneshot(with_token("Bearer revoked"))
            .await
            .unwrap();
        assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    }
    assert_eq!(store.checks.load(Ordering::SeqCst), checked);
    let other = service.oneshot(with_token("Bearer other")).await.unwrap();
    assert_eq!(other.status(), StatusCode::OK);
    assert_eq!(header(&other, &X_RATELIMIT_REMAINING).as_deref(), Some("3"));
}

#[tokio::test]
async fn a_request_refused_after_authentication_is_given_back() {
    let store = Counting::default();
    let org = Uuid::new_v4();
    let service = early_stack(store.clone(), 2, tokens(org, &["Bearer a"]));
    let first = service
        .clone()
        .oneshot(with_token("Bearer a"))
        .await
        .unwrap();
    assert_eq!(header(&first, &X_RATELIMIT_REMAINING).as_deref(), Some("1"));
    for _ in 0..5 {
        let mut denied = with_token("Bearer a");
        denied
            .headers_mut()
            .insert("deny", http::HeaderValue::from_static("1"));
        let response = service.clone().oneshot(denied).await.unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
    }
    // The first refusal was counted early and given back; the token was then forgotten, so
    // the other four were not counted at all.
    assert_eq!(store.refunds.load(Ordering::SeqCst), 1);
    assert_eq!(store.checks.load(Ordering::SeqCst), 2);
    let again = service
        .clone()
        .oneshot(with_token("Bearer a"))
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::OK);
    assert_eq!(header(&again, &X_RATELIMIT_REMAINING).as_deref(), Some("0"));
    assert_eq!(store.checks.load(Ordering::SeqCst), 3);
    // Allowed again: one count for the request, taken early or not.
    let refused = service.oneshot(with_token("Bearer a")).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(store.checks.load(Ordering::SeqCst), 4);
    assert_eq!(store.refunds.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_store_that_cannot_give_back_is_never_asked_early() {
    #[derive(Debug, Clone, Default)]
    struct Plain(Arc<AtomicUsize>, MemoryRateLimitStore);
    impl RateLimitStore for Plain {
        fn check(&self, org_id: Uuid, limit: u32) -> StoreFuture<Decision> {
            self.0.fetch_add(1, Ordering::SeqCst);
            self.1.check(org_id, limit)
        }
    }
    let store = Plain::default();
    let rate_limit = OrgRateLimitLayer::new(store.clone(), 10);
    let (inner, _) = counting();
    let service = ServiceBuilder::new()
        .layer(rate_limit.early())
        .layer(rate_limit)
        .service(inner);
    for _ in 0..3 {
        let mut request = with_token("Bearer a");
        request.extensions_mut().insert(OrgContext::new(
            Uuid::new_v4(),
            Permissions::CHAT_COMPLETIONS,
            Uuid::new_v4(),
        ));
        service.clone().oneshot(request).await.unwrap();
    }
    assert_eq!(store.0.load(Ordering::SeqCst), 3);
}

/// A handler left the count: it counts the request itself (alone, here), once; one that does
/// not is counted after it, and over the limit its answer becomes 429. Either way the answer
/// carries the decision's headers. After a refusal the org's requests are counted before the
/// handler until their retry time.
#[tokio::test]
async fn a_count_left_to_the_handler_is_made_once_by_it_or_after_it() {
    let store = MemoryRateLimitStore::new();
    let handled = Arc::new(AtomicUsize::new(0));
    let seen = handled.clone();
    let handler = tower::service_fn(move |request: Request<Full<Bytes>>| {
        let seen = seen.clone();
        async move {
            seen.fetch_add(1, Ordering::SeqCst);
            let later = request.extensions().get::<CountLater>().cloned();
            // The handler counts only requests marked so; the others it answers at once.
            if request.headers().contains_key("x-count") {
                let later = later.expect("a count left to the handler");
                if !later.count().await {
                    return Ok::<_, BoxError>(
                        Response::builder()
                            .status(StatusCode::TOO_MANY_REQUESTS)
                            .body(Full::default())
                            .unwrap(),
                    );
                }
            }
            Ok(Response::new(Full::new(Bytes::from_static(b"ok"))))
        }
    });
    let service = ServiceBuilder::new()
        .layer(OrgRateLimitLayer::new(store, 2).count_later_when(|_, _| true))
        .service(handler);
    let org = Uuid::new_v4();
    let asked = |count: bool| {
        let mut request = request(Some(org));
        if count {
            request
                .headers_mut()
                .insert("x-count", "1".parse().unwrap());
        }
        service.clone().oneshot(request)
    };
    let first = asked(true).await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(header(&first, &X_RATELIMIT_REMAINING).as_deref(), Some("1"));
    let second = asked(false).await.unwrap();
    assert_eq!(second.status(), StatusCode::OK);
    assert_eq!(
        header(&second, &X_RATELIMIT_REMAINING).as_deref(),
        Some("0")
    );
    // Over the limit: the handler ran (it counted nothing), and its answer became 429.
    let third = asked(false).await.unwrap();
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(header(&third, &header::RETRY_AFTER).is_some());
    assert_eq!(handled.load(Ordering::SeqCst), 3);
    // Refused, the org's next requests are counted before the handler until their retry time.
    let fourth = asked(true).await.unwrap();
    assert_eq!(fourth.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&fourth, &X_RATELIMIT_LIMIT).as_deref(), Some("2"));
    assert_eq!(handled.load(Ordering::SeqCst), 3);
    // Another org's request the handler counts and the store refuses: 429 with the limiter's
    // headers, from the handler's count.
    let other = Uuid::new_v4();
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let mut request = request(Some(other));
        request
            .headers_mut()
            .insert("x-count", "1".parse().unwrap());
        let response = service.clone().oneshot(request).await.unwrap();
        statuses.push((response.status(), header(&response, &X_RATELIMIT_REMAINING)));
    }
    assert_eq!(
        statuses,
        [
            (StatusCode::OK, Some("1".to_owned())),
            (StatusCode::OK, Some("0".to_owned())),
            (StatusCode::TOO_MANY_REQUESTS, Some("0".to_owned())),
        ]
    );
    assert_eq!(
        handled.load(Ordering::SeqCst),
        6,
        "each counted by the handler"
    );
}
