//! The PatAuth layer and service.

use std::fmt;
use std::mem;
use std::task::{Context, Poll};
use std::time::Instant;

use http::{Request, Response};
use tower::{Layer, Service};

use super::future::ResponseFuture;
use super::validator::{TokenError, TokenValidator, bearer_token};
use crate::body::ResponseBody;
use crate::context::OrgContext;
use crate::error::{ApiError, ErrorCode};
use crate::metrics::{ProxyMetrics, ResultLabel};

/// `Retry-After` on 503 `SERVICE_DEGRADED`: an outage of the auth service is usually short.
const DEGRADED_RETRY_AFTER_SECS: u64 = 1;

/// Applies [`PatAuth`]; see the [module docs](super).
#[derive(Clone)]
pub struct PatAuthLayer<V> {
    validator: V,
    metrics: Option<ProxyMetrics>,
}

impl<V: TokenValidator> PatAuthLayer<V> {
    /// Authenticates requests with `validator`.
    pub fn new(validator: V) -> PatAuthLayer<V> {
        PatAuthLayer {
            validator,
            metrics: None,
        }
    }

    /// Records each validation in `svc_proxy_auth_validate_duration_seconds{result}`, with
    /// `result` one of `ok`, `invalid`, `unavailable`, `timeout`, `error`.
    pub fn metrics(mut self, metrics: ProxyMetrics) -> PatAuthLayer<V> {
        self.metrics = Some(metrics);
        self
    }
}

impl<V> fmt::Debug for PatAuthLayer<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PatAuthLayer")
            .field("metrics", &self.metrics.is_some())
            .finish_non_exhaustive()
    }
}

impl<S, V: Clone> Layer<S> for PatAuthLayer<V> {
    type Service = PatAuth<S, V>;

    fn layer(&self, inner: S) -> PatAuth<S, V> {
        PatAuth {
            inner,
            validator: self.validator.clone(),
            metrics: self.metrics.clone(),
        }
    }
}

/// Validates the bearer PAT and inserts the [`OrgContext`]; see the [module docs](super).
#[derive(Clone)]
pub struct PatAuth<S, V> {
    inner: S,
    validator: V,
    metrics: Option<ProxyMetrics>,
}

impl<S, V: TokenValidator> PatAuth<S, V> {
    /// A [`PatAuthLayer`] over `validator`.
    pub fn layer(validator: V) -> PatAuthLayer<V> {
        PatAuthLayer::new(validator)
    }
}

impl<S: fmt::Debug, V> fmt::Debug for PatAuth<S, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PatAuth")
            .field("inner", &self.inner)
            .field("metrics", &self.metrics.is_some())
            .finish_non_exhaustive()
    }
}

impl<S, V, ReqBody, ResBody> Service<Request<ReqBody>> for PatAuth<S, V>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    V: TokenValidator,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<OrgContext, ReqBody, S, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let token = match bearer_token(req.headers()) {
            Ok(token) => token.to_owned(),
            Err(code) => return ResponseFuture::reject(ApiError::new(code)),
        };
        let validator = self.validator.clone();
        let metrics = self.metrics.clone();
        let check = Box::pin(async move {
            let started = Instant::now();
            let outcome = validator.validate(&token).await;
            drop(token);
            let result = match &outcome {
                Ok(_) => "ok",
                Err(err) => err.label(),
            };
            if let Some(metrics) = metrics {
                metrics
                    .auth_validate_duration
                    .get_or_create(&ResultLabel { result })
                    .observe(started.elapsed().as_secs_f64());
            }
            outcome.map_err(rejection)
        });
        // The clone may not be ready; the instance poll_ready readied goes with this request.
        let clone = self.inner.clone();
        let inner = mem::replace(&mut self.inner, clone);
        ResponseFuture::check(check, req, inner, insert_context)
    }
}

fn insert_context<B>(req: &mut Request<B>, context: OrgContext) {
    req.extensions_mut().insert(context);
}

/// Fails closed: anything but a definite "invalid" is a 503 the caller may retry.
fn rejection(err: TokenError) -> ApiError {
    match err {
        TokenError::Invalid => ApiError::new(ErrorCode::InvalidToken),
        TokenError::Unavailable | TokenError::Timeout | TokenError::Internal => {
            tracing::warn!(
                result = err.label(),
                "token validation failed; answered 503"
            );
            ApiError::new(ErrorCode::ServiceDegraded).with_retry_after(DEGRADED_RETRY_AFTER_SECS)
        }
    }
}
