//! The PatAuth layer: [`AsyncCheck`] with the bearer-token check.

use std::fmt;
use std::time::{Duration, Instant};

use http::Request;
use tower::Layer;
use uuid::Uuid;

use super::failures::{Admit, AuthFailureLimit};
use super::validator::{TokenError, TokenValidator, bearer_token};
use crate::agent::X_SVC_AGENT_ID;
use crate::check::{AsyncCheck, BoxCheck, CheckRequest};
use crate::context::{AgentVerdict, OrgContext};
use crate::error::{ApiError, ErrorCode};
use crate::metrics::ProxyMetrics;
use crate::trace_context;

/// `Retry-After` on 503 `SERVICE_DEGRADED`: an outage of the auth service is usually short.
const DEGRADED_RETRY_AFTER_SECS: u64 = 1;

/// Validates the bearer PAT and inserts the [`OrgContext`]; see the [module docs](super).
pub type PatAuth<S, V> = AsyncCheck<S, PatCheck<V>>;

/// Applies [`PatAuth`]; see the [module docs](super).
#[derive(Clone)]
pub struct PatAuthLayer<V> {
    check: PatCheck<V>,
}

impl<V: TokenValidator> PatAuthLayer<V> {
    /// Authenticates requests with `validator`.
    pub fn new(validator: V) -> PatAuthLayer<V> {
        PatAuthLayer {
            check: PatCheck {
                validator,
                metrics: None,
                failures: None,
                prefetch_agent: false,
                refusal_delay: Duration::ZERO,
            },
        }
    }

    /// Answers 429 `RATE_LIMITED` (with `Retry-After`), without calling the validator, to a
    /// client address over `limit`'s rejected tokens per minute. Clones of the limit share
    /// their counts, so one limit can guard several routes.
    pub fn failure_limit(mut self, limit: AuthFailureLimit) -> PatAuthLayer<V> {
        self.check.failures = Some(limit);
        self
    }

    /// Holds every refusal (401, the failure limit's 429, 503) until `delay` after the request
    /// arrived; a valid token is never held. A client sending bad tokens back to back on one
    /// HTTP/1 connection then gets at most one answer per `delay`, so a closed-loop flood
    /// cannot spin on refusals, each cheap but together worth the machine. A waiting request
    /// costs a timer, not CPU. Zero (the default) answers at once.
    pub fn refusal_delay(mut self, delay: Duration) -> PatAuthLayer<V> {
        self.check.refusal_delay = delay;
        self
    }

    /// Asks the validator about the request's `X-SVC-Agent-ID` in the same call as the token
    /// ([`TokenValidator::validate_with_agent`]) and puts the answer on the request as an
    /// [`AgentVerdict`], which a later AgentCheck decides from without a second round trip.
    /// For stacks with AgentCheck behind PatAuth; without it the lookup would be wasted.
    pub fn prefetch_agent(mut self) -> PatAuthLayer<V> {
        self.check.prefetch_agent = true;
        self
    }

    /// Records each validation in `svc_proxy_auth_validate_duration_seconds{result}`, with
    /// `result` one of `ok`, `invalid`, `unavailable`, `timeout`, `error`.
    pub fn metrics(mut self, metrics: ProxyMetrics) -> PatAuthLayer<V> {
        self.check.metrics = Some(metrics);
        self
    }
}

impl<V> fmt::Debug for PatAuthLayer<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PatAuthLayer")
            .field("check", &self.check)
            .finish()
    }
}

impl<S, V: Clone> Layer<S> for PatAuthLayer<V> {
    type Service = PatAuth<S, V>;

    fn layer(&self, inner: S) -> PatAuth<S, V> {
        AsyncCheck::new(inner, self.check.clone())
    }
}

/// The [`CheckRequest`] of [`PatAuth`]: the bearer token through a [`TokenValidator`].
#[derive(Clone)]
pub struct PatCheck<V> {
    validator: V,
    metrics: Option<ProxyMetrics>,
    failures: Option<AuthFailureLimit>,
    prefetch_agent: bool,
    refusal_delay: Duration,
}

impl<V> fmt::Debug for PatCheck<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PatCheck")
            .field("metrics", &self.metrics.is_some())
            .field("failures", &self.failures)
            .field("prefetch_agent", &self.prefetch_agent)
            .field("refusal_delay", &self.refusal_delay)
            .finish_non_exhaustive()
    }
}

impl<V: TokenValidator, B> CheckRequest<B> for PatCheck<V> {
    type Output = (OrgContext, Option<AgentVerdict>);
    type Future = BoxCheck<Self::Output>;

    fn check(&mut self, req: &Request<B>) -> Result<Self::Future, ApiError> {
        // No clock read when refusals are answered at once.
        let refuse_at = (!self.refusal_delay.is_zero())
            .then(|| tokio::time::Instant::now() + self.refusal_delay);
        // Same shape as `check` itself, which the trait allows for the same reason.
        #[allow(clippy::result_large_err)]
        let held = |refusal: ApiError| -> Result<Self::Future, ApiError> {
            let Some(at) = refuse_at else {
                return Err(refusal);
            };
            Ok(Box::pin(async move {
                tokio::time::sleep_until(at).await;
                Err(refusal)
            }))
        };
        let token = match bearer_token(req.headers()) {
            Ok(token) => token.to_owned(),
            Err(error) => return held(ApiError::new(error)),
        };
        let failures = self.failures.clone().map(|limit| {
            let key = limit.key(req.headers(), req.extensions());
            (limit.admit(key), limit)
        });
        if let Some((Admit::Refuse { retry_after }, _)) = failures {
            return held(ApiError::new(ErrorCode::RateLimited).with_retry_after(retry_after));
        }
        let validator = self.validator.clone();
        let metrics = self.metrics.clone();
        // Only a well-formed agent id is worth asking about; AgentCheck refuses the rest.
        let agent = self
            .prefetch_agent
            .then(|| single_agent_id(req.headers()))
            .flatten();
        // A tracer's TraceParent extension, else the TraceId: GrpcAuthClient sends it.
        let trace = trace_context::of_request(req.extensions());
        Ok(Box::pin(async move {
            let started = Instant::now();
            // Called, not only polled, inside the scope: a closure's synchronous part sees the
            // trace too. GrpcAuthClient sends it with ValidateToken.
            let validate = async { validator.validate_with_agent(&token, agent).await };
            let outcome = trace_context::scope_request(trace, validate).await;
            drop(token);
            if let Some((admit, limit)) = failures {
                // A refusal the client's own traffic earned counts like a rejection.
                let earned = matches!(outcome, Err(TokenError::Invalid | TokenError::Throttled));
                limit.settle(admit, earned);
            }
            if let Some(metrics) = metrics {
                let result = match &outcome {
                    Ok(_) => "ok",
                    Err(err) => err.label(),
                };
                metrics.auth_validated(result, started.elapsed());
            }
            if let (Err(_), Some(at)) = (&outcome, refuse_at) {
                tokio::time::sleep_until(at).await;
            }
            outcome.map_err(rejection)
        }))
    }

    fn apply(req: &mut Request<B>, (context, agent): Self::Output) {
        req.extensions_mut().insert(context);
        if let Some(verdict) = agent {
            req.extensions_mut().insert(verdict);
        }
    }
}

/// The agent id of a single, well-formed `X-SVC-Agent-ID` header.
fn single_agent_id(headers: &http::HeaderMap) -> Option<Uuid> {
    let mut values = headers.get_all(&X_SVC_AGENT_ID).iter();
    match (values.next(), values.next()) {
        (Some(value), None) => Uuid::try_parse(value.to_str().ok()?.trim()).ok(),
        _ => None,
    }
}

/// Fails closed: anything but a definite "invalid" is a 503 the caller may retry.
fn rejection(err: TokenError) -> ApiError {
    match err {
        TokenError::Invalid => ApiError::new(ErrorCode::InvalidToken),
        TokenError::Unavailable
        | TokenError::Timeout
        | TokenError::Internal
        | TokenError::Throttled => {
            tracing::warn!(
                result = err.label(),
                "token validation failed; answered 503"
            );
            ApiError::new(ErrorCode::ServiceDegraded).with_retry_after(DEGRADED_RETRY_AFTER_SECS)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::future::poll_fn;
    use std::pin::{Pin, pin};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::task::{Context, Poll};

    use bytes::Bytes;
    use http::{HeaderValue, Response, StatusCode, header};
    use http_body::{Body, Frame};
    use http_body_util::{BodyExt, Full};
    use prometheus_client::registry::Registry;
    use tower::{ServiceExt, service_fn};
    use uuid::Uuid;

    use super::*;
    use crate::context::Permissions;
    use crate::request_id::TraceId;

    const TOKEN: &str = "svc_pat_0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b_GoodSecret1";

    fn context() -> OrgContext {
        OrgContext::new(
            Uuid::new_v4(),
            Permissions::CHAT_COMPLETIONS,
            Uuid::new_v4(),
        )
    }

    /// Answers with the org of the context, or 500 when there is none.
    async fn echo_org<B>(req: Request<B>) -> Result<Response<Full<Bytes>>, Infallible> {
        Ok(match req.extensions().get::<OrgContext>() {
            Some(context) => Response::new(Full::from(context.org_id.to_string())),
            None => ApiError::new(ErrorCode::InternalError).into_response(),
        })
    }

    fn request(authorization: Option<&str>) -> Request<()> {
        let mut req = Request::new(());
        if let Some(value) = authorization {
            req.headers_mut()
                .insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        }
        req
    }

    fn code<B>(response: &Response<B>) -> Option<&str> {
        response
            .extensions()
            .get::<ApiError>()
            .map(|e| e.code().as_str())
    }

    /// A validator answering `outcome` for every token, counting its calls.
    fn fixed(
        outcome: Result<OrgContext, TokenError>,
    ) -> (impl TokenValidator + use<>, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&calls);
        let validator = move |_: &str| {
            seen.fetch_add(1, Ordering::SeqCst);
            let outcome = outcome.clone();
            async move { outcome }
        };
        (validator, calls)
    }

    #[tokio::test]
    async fn a_request_without_authorization_is_missing_token() {
        let (validator, calls) = fixed(Ok(context()));
        let svc = PatAuthLayer::new(validator).layer(service_fn(echo_org));
        let response = svc.oneshot(request(None)).await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(code(&response), Some("MISSING_TOKEN"));
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_malformed_bearer_is_refused_without_asking_the_validator() {
        let (validator, calls) = fixed(Ok(context()));
        let svc = PatAuthLayer::new(validator).layer(service_fn(echo_org));
        for value in ["Basic abc", "Bearer sk-abc", "Bearer svc_pat_nope"] {
            let response = svc.clone().oneshot(request(Some(value))).await.unwrap();
            assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
            assert_eq!(code(&response), Some("INVALID_TOKEN"), "{value}");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn an_invalid_token_is_invalid_token() {
        let (validator, calls) = fixed(Err(TokenError::Invalid));
        let svc = PatAuthLayer::new(validator).layer(service_fn(echo_org));
        let response = svc
            .oneshot(request(Some(&format!("Bearer {TOKEN}"))))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(code(&response), Some("INVALID_TOKEN"));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn refusals_are_held_until_the_delay_and_a_valid_token_is_not() {
        const DELAY: Duration = Duration::from_millis(100);
        let bearer = format!("Bearer {TOKEN}");
        let cases = [
            (
                Err(TokenError::Invalid),
                Some(bearer.as_str()),
                401,
                "INVALID_TOKEN",
            ),
            (
                Err(TokenError::Timeout),
                Some(bearer.as_str()),
                503,
                "SERVICE_DEGRADED",
            ),
            (Ok(context()), None, 401, "MISSING_TOKEN"),
            (
                Ok(context()),
                Some("Bearer svc_pat_nope"),
                401,
                "INVALID_TOKEN",
            ),
        ];
        for (outcome, authorization, status, expected) in cases {
            let (validator, _) = fixed(outcome);
            let svc = PatAuthLayer::new(validator)
                .refusal_delay(DELAY)
                .layer(service_fn(echo_org));
            let started = tokio::time::Instant::now();
            let response = svc.oneshot(request(authorization)).await.unwrap();
            assert_eq!(response.status(), status);
            assert_eq!(code(&response), Some(expected));
            assert_eq!(started.elapsed(), DELAY, "{expected}");
        }

        let (validator, _) = fixed(Ok(context()));
        let svc = PatAuthLayer::new(validator)
            .refusal_delay(DELAY)
            .layer(service_fn(echo_org));
        let started = tokio::time::Instant::now();
        let response = svc.oneshot(request(Some(&bearer))).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    #[tokio::test]
    async fn backend_failures_fail_closed_with_service_degraded() {
        for err in [
            TokenError::Unavailable,
            TokenError::Timeout,
            TokenError::Internal,
            TokenError::Throttled,
        ] {
            let (validator, _) = fixed(Err(err));
            let svc = PatAuthLayer::new(validator).layer(service_fn(echo_org));
            let response = svc
                .oneshot(request(Some(&format!("Bearer {TOKEN}"))))
                .await
                .unwrap();
            assert_eq!(
                response.status(),
                StatusCode::SERVICE_UNAVAILABLE,
                "{err:?}"
            );
            assert_eq!(code(&response), Some("SERVICE_DEGRADED"));
            assert_eq!(response.headers()[header::RETRY_AFTER], "1");
        }
    }

    #[tokio::test]
    async fn a_valid_token_reaches_the_service_with_its_org() {
        let context = context();
        let (validator, _) = fixed(Ok(context.clone()));
        let svc = PatAuthLayer::new(validator).layer(service_fn(echo_org));
        let response = svc
            .oneshot(request(Some(&format!("Bearer {TOKEN}"))))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, context.org_id.to_string());
    }

    /// Answers the token with `context` and every agent as active, recording what was asked.
    #[derive(Clone)]
    struct WithAgents {
        context: OrgContext,
        asked: Arc<std::sync::Mutex<Vec<Option<Uuid>>>>,
    }

    impl TokenValidator for WithAgents {
        async fn validate(&self, _: &str) -> Result<OrgContext, TokenError> {
            Ok(self.context.clone())
        }

        async fn validate_with_agent(
            &self,
            _: &str,
            agent: Option<Uuid>,
        ) -> Result<(OrgContext, Option<AgentVerdict>), TokenError> {
            self.asked.lock().unwrap().push(agent);
            let verdict = agent.map(|agent_id| AgentVerdict {
                agent_id,
                standing: crate::context::AgentStanding::Active,
                tools: Arc::default(),
            });
            Ok((self.context.clone(), verdict))
        }
    }

    #[tokio::test]
    async fn prefetch_agent_asks_about_a_well_formed_agent_header_with_the_token() {
        let validator = WithAgents {
            context: context(),
            asked: Arc::default(),
        };
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let inner = service_fn(move |req: Request<()>| {
            log.lock()
                .unwrap()
                .push(req.extensions().get::<AgentVerdict>().cloned());
            async { Ok::<_, Infallible>(Response::new(Full::<Bytes>::default())) }
        });
        let agent = Uuid::new_v4();
        let with_agent = |value: &str| {
            let mut req = request(Some(&format!("Bearer {TOKEN}")));
            req.headers_mut()
                .insert(&X_SVC_AGENT_ID, HeaderValue::from_str(value).unwrap());
            req
        };
        let plain = PatAuthLayer::new(validator.clone()).layer(inner.clone());
        plain.oneshot(with_agent(&agent.to_string())).await.unwrap();
        let prefetching = PatAuthLayer::new(validator.clone())
            .prefetch_agent()
            .layer(inner);
        prefetching
            .clone()
            .oneshot(with_agent(&agent.to_string()))
            .await
            .unwrap();
        prefetching.oneshot(with_agent("not-a-uuid")).await.unwrap();
        assert_eq!(
            *validator.asked.lock().unwrap(),
            vec![None, Some(agent), None]
        );
        let seen = seen.lock().unwrap();
        assert_eq!(seen[0], None, "without prefetch_agent nothing is learned");
        assert_eq!(
            seen[1].as_ref().map(|verdict| verdict.agent_id),
            Some(agent)
        );
        assert_eq!(seen[2], None);
    }

    #[tokio::test]
    async fn the_validator_sees_the_token_without_the_scheme() {
        let context = context();
        let validator = move |token: &str| {
            let outcome = match token == TOKEN {
                true => Ok(context.clone()),
                false => Err(TokenError::Invalid),
            };
            async move { outcome }
        };
        let svc = PatAuthLayer::new(validator).layer(service_fn(echo_org));
        let response = svc
            .oneshot(request(Some(&format!("bearer {TOKEN}"))))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }

    /// A body that records whether anyone polled it.
    struct Watched(Arc<AtomicBool>);

    impl Body for Watched {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            self.0.store(true, Ordering::SeqCst);
            Poll::Ready(None)
        }
    }

    #[tokio::test]
    async fn the_body_is_not_polled_before_the_token_is_valid() {
        let context = context();
        let (release, released) = tokio::sync::watch::channel(false);
        let validator = move |_: &str| {
            let mut released = released.clone();
            let context = context.clone();
            async move {
                let _ = released.wait_for(|go| *go).await;
                Ok(context)
            }
        };
        let svc = PatAuthLayer::new(validator).layer(service_fn(|req: Request<Watched>| async {
            let _ = req.into_body().collect().await;
            Ok::<_, Infallible>(Response::new(Full::<Bytes>::default()))
        }));
        let polled = Arc::new(AtomicBool::new(false));
        let mut req = Request::new(Watched(Arc::clone(&polled)));
        req.headers_mut().insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {TOKEN}")).unwrap(),
        );
        let mut future = pin!(svc.oneshot(req));
        let first = poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await;
        assert!(first.is_pending());
        assert!(!polled.load(Ordering::SeqCst));
        release.send(true).unwrap();
        let response = future.await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert!(polled.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn the_validator_runs_in_the_request_trace() {
        let context = context();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let validator = move |_: &str| {
            log.lock().unwrap().push(crate::trace_context::current());
            let context = context.clone();
            async move { Ok(context) }
        };
        let svc = PatAuthLayer::new(validator).layer(service_fn(echo_org));
        let trace = TraceId::random();
        let mut traced = request(Some(&format!("Bearer {TOKEN}")));
        traced.extensions_mut().insert(trace);
        let response = svc.clone().oneshot(traced).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let untraced = request(Some(&format!("Bearer {TOKEN}")));
        svc.oneshot(untraced).await.unwrap();
        assert_eq!(*seen.lock().unwrap(), vec![Some(trace), None]);
    }

    #[tokio::test]
    async fn a_trace_parent_extension_is_what_the_validator_sends() {
        use crate::trace_context::TraceParent;

        let context = context();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let validator = move |_: &str| {
            log.lock()
                .unwrap()
                .push(crate::trace_context::current_parent());
            let context = context.clone();
            async move { Ok(context) }
        };
        let svc = PatAuthLayer::new(validator).layer(service_fn(echo_org));
        let trace = TraceId::random();
        let span = TraceParent::new(trace, 0xfeed, false).unwrap();
        let mut req = request(Some(&format!("Bearer {TOKEN}")));
        req.extensions_mut().insert(trace);
        req.extensions_mut().insert(span);
        let response = svc.oneshot(req).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(*seen.lock().unwrap(), vec![Some(span)]);
    }

    #[tokio::test]
    async fn records_validation_duration_by_result() {
        let metrics = ProxyMetrics::new();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let (ok, _) = fixed(Ok(context()));
        let (invalid, _) = fixed(Err(TokenError::Invalid));
        let (timeout, _) = fixed(Err(TokenError::Timeout));
        let bearer = format!("Bearer {TOKEN}");
        let svc = PatAuthLayer::new(ok)
            .metrics(metrics.clone())
            .layer(service_fn(echo_org));
        svc.oneshot(request(Some(&bearer))).await.unwrap();
        let svc = PatAuthLayer::new(invalid)
            .metrics(metrics.clone())
            .layer(service_fn(echo_org));
        svc.oneshot(request(Some(&bearer))).await.unwrap();
        let svc = PatAuthLayer::new(timeout)
            .metrics(metrics.clone())
            .layer(service_fn(echo_org));
        svc.oneshot(request(Some(&bearer))).await.unwrap();

        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for result in ["ok", "invalid", "timeout"] {
            let line =
                format!("svc_proxy_auth_validate_duration_seconds_count{{result=\"{result}\"}} 1");
            assert!(text.contains(&line), "{line} missing in\n{text}");
        }
        assert!(!text.contains(TOKEN));
    }

    #[tokio::test(start_paused = true)]
    async fn an_address_over_its_failure_limit_gets_429_without_a_validation() {
        let (validator, calls) = fixed(Err(TokenError::Invalid));
        let svc = PatAuthLayer::new(validator)
            .failure_limit(super::super::AuthFailureLimit::per_minute(3))
            .layer(service_fn(echo_org));
        let from = |last: u8| {
            let mut req = request(Some(&format!("Bearer {TOKEN}")));
            req.extensions_mut()
                .insert(std::net::SocketAddr::from(([192, 0, 2, last], 4000)));
            req
        };
        for _ in 0..3 {
            let response = svc.clone().oneshot(from(1)).await.unwrap();
            assert_eq!(code(&response), Some("INVALID_TOKEN"));
        }
        let response = svc.clone().oneshot(from(1)).await.unwrap();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(code(&response), Some("RATE_LIMITED"));
        assert_eq!(response.headers()[header::RETRY_AFTER], "20");
        assert_eq!(
            calls.load(Ordering::SeqCst),
            3,
            "the refused call was validated"
        );
        // Another address still reaches the validator.
        let response = svc.clone().oneshot(from(2)).await.unwrap();
        assert_eq!(code(&response), Some("INVALID_TOKEN"));
        // A malformed bearer is refused before the limit is consulted, and not counted.
        let response = svc.oneshot(request(Some("Bearer nope"))).await.unwrap();
        assert_eq!(code(&response), Some("INVALID_TOKEN"));
    }

    #[tokio::test(start_paused = true)]
    async fn refusals_the_clients_own_traffic_earned_count_toward_its_limit() {
        let limited = |err| {
            let (validator, calls) = fixed(Err(err));
            let svc = PatAuthLayer::new(validator)
                .failure_limit(super::super::AuthFailureLimit::per_minute(2))
                .layer(service_fn(echo_org));
            (svc, calls)
        };
        let from = || {
            let mut req = request(Some(&format!("Bearer {TOKEN}")));
            req.extensions_mut()
                .insert(std::net::SocketAddr::from(([192, 0, 2, 1], 4000)));
            req
        };
        let (svc, calls) = limited(TokenError::Throttled);
        for _ in 0..2 {
            let response = svc.clone().oneshot(from()).await.unwrap();
            assert_eq!(code(&response), Some("SERVICE_DEGRADED"));
        }
        let response = svc.oneshot(from()).await.unwrap();
        assert_eq!(code(&response), Some("RATE_LIMITED"));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        // The auth service's own trouble is not the client's: never counted.
        let (svc, calls) = limited(TokenError::Unavailable);
        for _ in 0..4 {
            let response = svc.clone().oneshot(from()).await.unwrap();
            assert_eq!(code(&response), Some("SERVICE_DEGRADED"));
        }
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }
}
