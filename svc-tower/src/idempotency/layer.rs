use std::fmt;
use std::mem;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Full};
use tower::{BoxError, Layer, Service};
use uuid::Uuid;

use super::config::{
    Config, DEFAULT_PENDING_TTL, DEFAULT_TIMEOUT, DEFAULT_TTL, IDEMPOTENCY_KEY, MAX_KEY_CHARS,
};
use super::future::{ResponseFuture, Scope};
use super::store::IdempotencyStore;
use crate::context::OrgContext;
use crate::envelope::EnvelopeRenderer;
use crate::error::{ApiError, ErrorCode, FieldError, FieldErrorCode};
use crate::metrics::ProxyMetrics;

/// Applies [`Idempotency`]: replays completed requests that carry an `Idempotency-Key`.
#[derive(Clone)]
pub struct IdempotencyLayer<S> {
    store: S,
    config: Arc<Config>,
}

impl<S: fmt::Debug> fmt::Debug for IdempotencyLayer<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdempotencyLayer")
            .field("store", &self.store)
            .field("config", &self.config)
            .finish()
    }
}

impl<S> IdempotencyLayer<S> {
    /// Deduplicates requests through `store`, with the default TTLs and timeout.
    pub fn new(store: S) -> IdempotencyLayer<S> {
        IdempotencyLayer {
            store,
            config: Arc::new(Config {
                ttl: DEFAULT_TTL,
                pending_ttl: DEFAULT_PENDING_TTL,
                timeout: DEFAULT_TIMEOUT,
                metrics: None,
                route: None,
                refuse: None,
                release: None,
                broken_body: ErrorCode::InternalError,
            }),
        }
    }

    /// How long a committed response is replayed (default 24 h).
    pub fn ttl(mut self, ttl: Duration) -> IdempotencyLayer<S> {
        Arc::make_mut(&mut self.config).ttl = ttl;
        self
    }

    /// How long a claim lives without a commit (default 120 s). Keep it above the inner
    /// service's own timeout, or a slow request loses its claim and runs twice.
    pub fn pending_ttl(mut self, pending_ttl: Duration) -> IdempotencyLayer<S> {
        Arc::make_mut(&mut self.config).pending_ttl = pending_ttl;
        self
    }

    /// The budget of each store operation (default 50 ms); past it the request proceeds
    /// without deduplication.
    pub fn timeout(mut self, timeout: Duration) -> IdempotencyLayer<S> {
        Arc::make_mut(&mut self.config).timeout = timeout;
        self
    }

    /// Counts failed-open store operations in
    /// `svc_proxy_store_failures_total{store="idempotency"}`.
    pub fn metrics(mut self, metrics: ProxyMetrics) -> IdempotencyLayer<S> {
        Arc::make_mut(&mut self.config).metrics = Some(metrics);
        self
    }

    /// The route that enters the fingerprint, from the request head (default: the path).
    /// A gateway with alias paths maps them onto the canonical route here, so the same
    /// request through either path replays.
    pub fn route_fn<F>(mut self, route: F) -> IdempotencyLayer<S>
    where
        F: Fn(&Parts) -> String + Send + Sync + 'static,
    {
        Arc::make_mut(&mut self.config).route = Some(Arc::new(route));
        self
    }

    /// Refuses some keyed requests before they claim anything, from the request head and body
    /// (an API that cannot replay a streamed answer refuses `"stream": true` here). Called only
    /// for requests that carry a key.
    pub fn refuse_fn<F>(mut self, refuse: F) -> IdempotencyLayer<S>
    where
        F: Fn(&Parts, &[u8]) -> Option<ApiError> + Send + Sync + 'static,
    {
        Arc::make_mut(&mut self.config).refuse = Some(Arc::new(refuse));
        self
    }

    /// Which inner statuses are transient: they free the key for a retry instead of being
    /// stored (default: 429 and every 5xx).
    pub fn release_fn<F>(mut self, release: F) -> IdempotencyLayer<S>
    where
        F: Fn(StatusCode) -> bool + Send + Sync + 'static,
    {
        Arc::make_mut(&mut self.config).release = Some(Arc::new(release));
        self
    }

    /// The error answered when the inner response body breaks off before its end (default
    /// `INTERNAL_ERROR`; a gateway says which upstream failed). Nothing is stored and the key
    /// is freed.
    pub fn broken_body_error(mut self, code: ErrorCode) -> IdempotencyLayer<S> {
        Arc::make_mut(&mut self.config).broken_body = code;
        self
    }
}

impl<S: Clone, I> Layer<I> for IdempotencyLayer<S> {
    type Service = Idempotency<S, I>;

    fn layer(&self, inner: I) -> Idempotency<S, I> {
        Idempotency {
            inner,
            store: self.store.clone(),
            config: self.config.clone(),
        }
    }
}

/// Deduplicates requests by `Idempotency-Key`, per org; see the [module docs](super).
#[derive(Clone)]
pub struct Idempotency<S, I> {
    inner: I,
    store: S,
    config: Arc<Config>,
}

impl<S: fmt::Debug, I: fmt::Debug> fmt::Debug for Idempotency<S, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Idempotency")
            .field("inner", &self.inner)
            .field("store", &self.store)
            .field("config", &self.config)
            .finish()
    }
}

impl<S: Clone, I> Idempotency<S, I> {
    /// A layer with `IdempotencyLayer::new(store)`.
    pub fn layer(store: S) -> IdempotencyLayer<S> {
        IdempotencyLayer::new(store)
    }
}

impl<S, I, ReqBody, ResBody> Service<Request<ReqBody>> for Idempotency<S, I>
where
    S: IdempotencyStore + Clone,
    I: Service<Request<Full<Bytes>>, Response = Response<ResBody>> + Clone,
    ReqBody: Body,
    ReqBody::Error: Into<BoxError>,
    ResBody: Body<Data = Bytes>,
    ResBody::Error: Into<BoxError>,
{
    type Response = Response<crate::body::ResponseBody<ResBody>>;
    type Error = I::Error;
    type Future = ResponseFuture<S, I, ReqBody, ResBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), I::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let (mut parts, body) = request.into_parts();
        let scope = match scope(&parts) {
            Ok(scope) => scope,
            Err(error) => {
                return ResponseFuture::reject(
                    ApiError::new(ErrorCode::ValidationError).with_field_error(error),
                    self.store.clone(),
                    self.config.clone(),
                );
            }
        };
        // The key is this layer's business: the inner service (a provider) never sees it.
        parts.headers.remove(&IDEMPOTENCY_KEY);
        let scope = scope.map(|(org_id, key)| Scope {
            org_id,
            key,
            route: self.config.route(&parts),
            renderer: parts.extensions.get::<EnvelopeRenderer>().cloned(),
        });
        // The clone may not be ready; the service we were polled ready on goes to the future.
        let clone = self.inner.clone();
        let inner = mem::replace(&mut self.inner, clone);
        ResponseFuture::new(
            body.collect(),
            parts,
            inner,
            scope,
            self.store.clone(),
            self.config.clone(),
        )
    }
}

/// The org and key of a request that asks for deduplication; `None` to pass it through.
fn scope(parts: &Parts) -> Result<Option<(Uuid, Arc<str>)>, FieldError> {
    let Some(org) = parts.extensions.get::<OrgContext>() else {
        return Ok(None);
    };
    Ok(key(&parts.headers)?.map(|key| (org.org_id, Arc::from(key))))
}

/// The request's `Idempotency-Key`, when it sends one: text of 1 to 256
/// characters. Anything else is the field error a 400 `VALIDATION_ERROR` carries. A service
/// that validates requests before this layer (as the svc gateway does) calls it too, so both
/// apply the same rule.
pub fn key(headers: &http::HeaderMap) -> Result<Option<&str>, FieldError> {
    let Some(value) = headers.get(&IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    let refused = |code, message| Err(FieldError::new("Idempotency-Key", code, message));
    match std::str::from_utf8(value.as_bytes()) {
        Err(_) => refused(
            FieldErrorCode::InvalidFormat,
            "Idempotency-Key must be text.",
        ),
        Ok("") => refused(
            FieldErrorCode::InvalidFormat,
            "Idempotency-Key must not be empty.",
        ),
        Ok(key) if key.chars().count() > MAX_KEY_CHARS => refused(
            FieldErrorCode::TooLong,
            "Idempotency-Key must be at most 256 characters.",
        ),
        Ok(key) => Ok(Some(key)),
    }
}
