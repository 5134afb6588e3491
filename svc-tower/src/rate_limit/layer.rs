use std::fmt;
use std::future::Future;
use std::mem;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue, Request, Response};
use pin_project_lite::pin_project;
use tokio::time::Timeout;
use tower::{Layer, Service};

use super::early::{Ask, Counted, Early, EarlyRateLimitLayer, SeenTokens, Shared};
use super::later::{CountLater, Deferral, Refusals};
use super::store::{Decision, RateLimitStore};
use crate::body::ResponseBody;
use crate::context::OrgContext;
use crate::error::{ApiError, ErrorCode};
use crate::metrics::ProxyMetrics;
use crate::store::{FailureKind, StoreError, StoreFuture, WarnThrottle};

/// How long a decision may take before the layer fails open.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_millis(25);

/// `X-RateLimit-Limit`: the org's requests per minute.
pub(crate) static X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// `X-RateLimit-Remaining`: requests the org may still send right now.
pub(crate) static X_RATELIMIT_REMAINING: HeaderName =
    HeaderName::from_static("x-ratelimit-remaining");
/// `X-RateLimit-Reset`: seconds until the org's allowance is whole again.
pub(crate) static X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
/// `x-ratelimit-limit-requests`: [`X_RATELIMIT_LIMIT`] under the name OpenAI's API uses, which
/// the official SDKs and agent frameworks read to pace themselves.
pub(crate) static X_RATELIMIT_LIMIT_REQUESTS: HeaderName =
    HeaderName::from_static("x-ratelimit-limit-requests");
/// `x-ratelimit-remaining-requests`: [`X_RATELIMIT_REMAINING`] under OpenAI's name.
pub(crate) static X_RATELIMIT_REMAINING_REQUESTS: HeaderName =
    HeaderName::from_static("x-ratelimit-remaining-requests");
/// `x-ratelimit-reset-requests`: the reset as OpenAI writes it, a duration like `1s` or `6m0s`.
pub(crate) static X_RATELIMIT_RESET_REQUESTS: HeaderName =
    HeaderName::from_static("x-ratelimit-reset-requests");

static WARN: WarnThrottle = WarnThrottle::new("rate_limit");

/// Applies [`OrgRateLimit`]: a per-org requests-per-minute limit.
#[derive(Clone)]
pub struct OrgRateLimitLayer<S> {
    store: S,
    config: Arc<Config>,
}

#[derive(Clone)]
struct Config {
    limit: u32,
    timeout: Duration,
    metrics: Option<ProxyMetrics>,
    seen: Arc<SeenTokens>,
    deferral: Option<Deferral>,
}

impl<S: fmt::Debug> fmt::Debug for OrgRateLimitLayer<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OrgRateLimitLayer")
            .field("store", &self.store)
            .field("limit", &self.config.limit)
            .field("timeout", &self.config.timeout)
            .field("metrics", &self.config.metrics.is_some())
            .finish()
    }
}

impl<S> OrgRateLimitLayer<S> {
    /// Limits every org to `requests_per_minute` (a limit of 0 is treated as 1), counted in
    /// `store`.
    pub fn new(store: S, requests_per_minute: u32) -> OrgRateLimitLayer<S> {
        OrgRateLimitLayer {
            store,
            config: Arc::new(Config {
                limit: requests_per_minute.max(1),
                timeout: DEFAULT_TIMEOUT,
                metrics: None,
                seen: Arc::default(),
                deferral: None,
            }),
        }
    }

    /// The layer that starts this one's decision at the same moment as authentication, for
    /// a token authenticated before; it goes in front of `PatAuth`. See
    /// [`EarlyRateLimit`](super::EarlyRateLimit).
    pub fn early(&self) -> EarlyRateLimitLayer
    where
        S: RateLimitStore + Clone,
    {
        EarlyRateLimitLayer::new(Shared {
            store: Arc::new(self.store.clone()),
            limit: self.config.limit,
            seen: self.config.seen.clone(),
        })
    }

    /// The budget of one decision (default 25 ms); past it the request proceeds unlimited.
    pub fn timeout(mut self, timeout: Duration) -> OrgRateLimitLayer<S> {
        self.config_mut().timeout = timeout;
        self
    }

    /// Records 429s in `svc_proxy_rate_limited_total` and failed-open decisions in
    /// `svc_proxy_store_failures_total{store="rate_limit"}`.
    pub fn metrics(mut self, metrics: ProxyMetrics) -> OrgRateLimitLayer<S> {
        self.config_mut().metrics = Some(metrics);
        self
    }

    /// Leaves the count of each request `when` returns true for (given its context and
    /// head) to its handler, which makes it in the same store step as the call's token
    /// reservation (see [`CountLater`]): a call under a token limit or a budget then costs the
    /// store one script, not two. Such a token's next request is not counted early: the
    /// handler would count it again. Until the `Retry-After` of a refusal, the requests of the
    /// same org and token are counted before their bodies are read, as without this.
    pub fn count_later_when<F>(mut self, when: F) -> OrgRateLimitLayer<S>
    where
        S: RateLimitStore + Clone,
        F: Fn(&OrgContext, &HeaderMap) -> bool + Send + Sync + 'static,
    {
        let store: Arc<dyn RateLimitStore> = Arc::new(self.store.clone());
        self.config_mut().deferral = Some(Deferral {
            when: Arc::new(when),
            store,
            refused: Arc::new(Refusals::default()),
        });
        self
    }

    fn config_mut(&mut self) -> &mut Config {
        Arc::make_mut(&mut self.config)
    }
}

impl<S: Clone, I> Layer<I> for OrgRateLimitLayer<S> {
    type Service = OrgRateLimit<S, I>;

    fn layer(&self, inner: I) -> OrgRateLimit<S, I> {
        OrgRateLimit {
            inner,
            store: self.store.clone(),
            config: self.config.clone(),
        }
    }
}

/// Refuses an org's requests over its per-minute limit with 429 `RATE_LIMITED`; adds the
/// `X-RateLimit-*` headers to the responses it lets through.
#[derive(Clone)]
pub struct OrgRateLimit<S, I> {
    inner: I,
    store: S,
    config: Arc<Config>,
}

impl<S: fmt::Debug, I: fmt::Debug> fmt::Debug for OrgRateLimit<S, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OrgRateLimit")
            .field("inner", &self.inner)
            .field("store", &self.store)
            .field("limit", &self.config.limit)
            .field("timeout", &self.config.timeout)
            .finish()
    }
}

impl<S: Clone, I> OrgRateLimit<S, I> {
    /// A layer with `OrgRateLimitLayer::new(store, requests_per_minute)`.
    pub fn layer(store: S, requests_per_minute: u32) -> OrgRateLimitLayer<S> {
        OrgRateLimitLayer::new(store, requests_per_minute)
    }
}

impl<S, I, ReqBody, ResBody> Service<Request<ReqBody>> for OrgRateLimit<S, I>
where
    S: RateLimitStore,
    I: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = I::Error;
    type Future = ResponseFuture<I, ReqBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), I::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> ResponseFuture<I, ReqBody> {
        let Some(context) = request.extensions().get::<OrgContext>() else {
            return ResponseFuture {
                state: State::Forward {
                    future: self.inner.call(request),
                    decision: None,
                },
                config: self.config.clone(),
            };
        };
        // The clone may not be ready; the service we were polled ready on goes to the future.
        let clone = self.inner.clone();
        let mut inner = mem::replace(&mut self.inner, clone);
        let ask = Ask::of(context);
        let deferral = (self.config.deferral.as_ref()).filter(|deferral| {
            (deferral.when)(context, request.headers()) && !deferral.refused.holds(&ask)
        });
        // The decision EarlyRateLimit started for this token's org, else one left to the
        // handler, else one started now.
        let early = (request.extensions().get::<Early>())
            .and_then(|early| early.take(ask, deferral.is_some()));
        let decision = match (early, deferral) {
            (Some(decision), _) => decision,
            (None, Some(deferral)) => {
                let later = CountLater::new(ask, self.config.limit, deferral, self.config.timeout);
                request.extensions_mut().insert(later.clone());
                return ResponseFuture {
                    state: State::Later {
                        future: inner.call(request),
                        later,
                        recount: None,
                        response: None,
                    },
                    config: self.config.clone(),
                };
            }
            (None, None) => ask.count(&self.store, self.config.limit),
        };
        let check = tokio::time::timeout(self.config.timeout, decision);
        ResponseFuture {
            state: State::Checking {
                check,
                ask,
                inner: Some(inner),
                request: Some(request),
            },
            config: self.config.clone(),
        }
    }
}

pin_project! {
    /// Response future of [`OrgRateLimit`].
    pub struct ResponseFuture<I, ReqBody>
    where
        I: Service<Request<ReqBody>>,
    {
        #[pin]
        state: State<I, ReqBody>,
        config: Arc<Config>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<I, ReqBody>
    where
        I: Service<Request<ReqBody>>,
    {
        Checking {
            #[pin]
            check: Timeout<StoreFuture<Counted>>,
            ask: Ask,
            inner: Option<I>,
            request: Option<Request<ReqBody>>,
        },
        Forward {
            #[pin]
            future: I::Future,
            decision: Option<Decision>,
        },
        // The count left to the handler; made after it when it did not make it.
        Later {
            #[pin]
            future: I::Future,
            later: CountLater,
            recount: Option<Pin<Box<Timeout<StoreFuture<Counted>>>>>,
            response: Option<I::Response>,
        },
    }
}

impl<I, ReqBody, ResBody> Future for ResponseFuture<I, ReqBody>
where
    I: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Output = Result<Response<ResponseBody<ResBody>>, I::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Checking {
                    check,
                    ask,
                    inner,
                    request,
                } => {
                    // Failing open, the request goes through as if unlimited, and says so
                    // in its headers, as the no-op store's answers do.
                    let decision = match ready!(check.poll(cx)) {
                        Ok(Ok(counted)) => counted.decision(),
                        Ok(Err(error)) => {
                            fail_open(this.config, FailureKind::Error, Some(&error));
                            Decision::unmetered(this.config.limit)
                        }
                        Err(_elapsed) => {
                            fail_open(this.config, FailureKind::Timeout, None);
                            Decision::unmetered(this.config.limit)
                        }
                    };
                    if !decision.allowed {
                        note_refusal(this.config, *ask, &decision);
                        return Poll::Ready(Ok(rejection(&decision)));
                    }
                    let (Some(mut inner), Some(request)) = (inner.take(), request.take()) else {
                        unreachable!("the request is forwarded once")
                    };
                    let future = inner.call(request);
                    this.state.set(State::Forward {
                        future,
                        decision: Some(decision),
                    });
                }
                StateProj::Forward { future, decision } => {
                    let mut response = ready!(future.poll(cx))?;
                    if let Some(decision) = decision {
                        set_headers(response.headers_mut(), decision);
                    }
                    return Poll::Ready(Ok(response.map(ResponseBody::inner)));
                }
                StateProj::Later {
                    future,
                    later,
                    recount,
                    response,
                } => {
                    if response.is_none() {
                        let answered = ready!(future.poll(cx))?;
                        if let Some(decision) = later.decision() {
                            return Poll::Ready(Ok(after_handler(
                                this.config,
                                later,
                                answered,
                                decision,
                            )));
                        }
                        // Answered without counting (a body refused, say): counted now, and
                        // over the limit answered 429 instead, as SPEC's order has it.
                        let (ask, limit) = later.ask();
                        let count = ask.count(&**later.store(), limit);
                        *recount = Some(Box::pin(tokio::time::timeout(this.config.timeout, count)));
                        *response = Some(answered);
                    }
                    let Some(counting) = recount.as_mut() else {
                        unreachable!("a recount starts with the response kept")
                    };
                    let decision = match ready!(counting.as_mut().poll(cx)) {
                        Ok(Ok(counted)) => Some(counted.decision()),
                        Ok(Err(error)) => {
                            fail_open(this.config, FailureKind::Error, Some(&error));
                            None
                        }
                        Err(_elapsed) => {
                            fail_open(this.config, FailureKind::Timeout, None);
                            None
                        }
                    };
                    later.counted(decision);
                    let Some(answered) = response.take() else {
                        unreachable!("the response is kept until the recount ends")
                    };
                    return Poll::Ready(Ok(after_handler(this.config, later, answered, decision)));
                }
            }
        }
    }
}

/// The handler's answer with the headers of the decision its request was counted with
/// (`None`: failed open), or 429 when it was refused.
fn after_handler<B>(
    config: &Config,
    later: &CountLater,
    mut response: Response<B>,
    decision: Option<Decision>,
) -> Response<ResponseBody<B>> {
    let decision = decision.unwrap_or_else(|| Decision::unmetered(config.limit));
    if !decision.allowed {
        note_refusal(config, later.ask().0, &decision);
        return rejection(&decision);
    }
    set_headers(response.headers_mut(), &decision);
    response.map(ResponseBody::inner)
}

/// Counts a 429 and, where counts are left to handlers, remembers it until its retry time.
fn note_refusal(config: &Config, ask: Ask, decision: &Decision) {
    if let Some(metrics) = &config.metrics {
        metrics.rate_limited();
    }
    if let Some(deferral) = &config.deferral {
        deferral.refused.note(ask, decision);
    }
}

fn fail_open(config: &Config, kind: FailureKind, error: Option<&StoreError>) {
    WARN.fail_open(config.metrics.as_ref(), kind, error);
}

fn set_headers(headers: &mut HeaderMap, decision: &Decision) {
    let limit = HeaderValue::from(decision.limit);
    let remaining = HeaderValue::from(decision.remaining);
    headers.insert(X_RATELIMIT_LIMIT.clone(), limit.clone());
    headers.insert(X_RATELIMIT_REMAINING.clone(), remaining.clone());
    headers.insert(
        X_RATELIMIT_RESET.clone(),
        HeaderValue::from(decision.reset_after_secs),
    );
    headers.insert(X_RATELIMIT_LIMIT_REQUESTS.clone(), limit);
    headers.insert(X_RATELIMIT_REMAINING_REQUESTS.clone(), remaining);
    if let Ok(reset) = HeaderValue::try_from(openai_duration(decision.reset_after_secs)) {
        headers.insert(X_RATELIMIT_RESET_REQUESTS.clone(), reset);
    }
}

/// Seconds as OpenAI's rate-limit headers write them: `0s`, `45s`, `6m0s`, `1h2m3s`.
pub(crate) fn openai_duration(secs: u64) -> String {
    let (hours, minutes, seconds) = (secs / 3600, secs % 3600 / 60, secs % 60);
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, _) => format!("{minutes}m{seconds}s"),
        _ => format!("{hours}h{minutes}m{seconds}s"),
    }
}

fn rejection<B>(decision: &Decision) -> Response<ResponseBody<B>> {
    let mut headers = HeaderMap::new();
    set_headers(&mut headers, decision);
    let mut error =
        ApiError::new(ErrorCode::RateLimited).with_retry_after(decision.retry_after_secs);
    for (name, value) in headers {
        if let Some(name) = name {
            error = error.with_header(name, value);
        }
    }
    error.into_response_with(ResponseBody::empty())
}
