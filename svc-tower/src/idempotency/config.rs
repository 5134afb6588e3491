//! The layer's settings and the constants of the protocol: what the layer is given, read by
//! the layer, its future and the responses it builds.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use http::{HeaderName, Response, StatusCode, header};

use crate::error::{ApiError, ErrorCode};
use crate::metrics::ProxyMetrics;

/// `Idempotency-Key`: the client's key for one logical request.
pub static IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
/// `Idempotent-Replayed: true` marks a response served from the store.
pub(crate) static IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");
/// The response headers stored with a committed response and replayed with it.
pub(crate) const STORED_HEADERS: [HeaderName; 2] = [header::CONTENT_TYPE, header::CONTENT_ENCODING];

/// The longest accepted `Idempotency-Key`, in characters.
pub(crate) const MAX_KEY_CHARS: usize = 256;
/// How long a committed response is replayed.
pub(crate) const DEFAULT_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// How long a claim holds a key without a commit: longer than the provider timeout (60 s by
/// default), bounded so a crashed replica never wedges a key.
pub(crate) const DEFAULT_PENDING_TTL: Duration = Duration::from_secs(120);
/// The budget of one store operation before the layer fails open.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);

pub(crate) type RouteFn = Arc<dyn Fn(&Parts) -> String + Send + Sync>;
pub(crate) type RefuseFn = Arc<dyn Fn(&Parts, &[u8]) -> Option<ApiError> + Send + Sync>;
pub(crate) type ReleaseFn = Arc<dyn Fn(StatusCode) -> bool + Send + Sync>;

#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) ttl: Duration,
    pub(crate) pending_ttl: Duration,
    pub(crate) timeout: Duration,
    pub(crate) metrics: Option<ProxyMetrics>,
    pub(crate) route: Option<RouteFn>,
    pub(crate) refuse: Option<RefuseFn>,
    pub(crate) release: Option<ReleaseFn>,
    /// Answered when the inner response body breaks off (nothing is stored).
    pub(crate) broken_body: ErrorCode,
}

impl Config {
    pub(crate) fn route(&self, parts: &Parts) -> String {
        match &self.route {
            Some(route) => route(parts),
            None => parts.uri.path().to_owned(),
        }
    }

    /// The caller's refusal of a keyed request, if any.
    pub(crate) fn refuse(&self, parts: &Parts, body: &[u8]) -> Option<ApiError> {
        self.refuse.as_ref().and_then(|refuse| refuse(parts, body))
    }

    /// Whether a response status frees the key instead of being stored.
    pub(crate) fn releases(&self, status: StatusCode) -> bool {
        match &self.release {
            Some(release) => release(status),
            None => transient(status),
        }
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("ttl", &self.ttl)
            .field("pending_ttl", &self.pending_ttl)
            .field("timeout", &self.timeout)
            .field("metrics", &self.metrics.is_some())
            .field("route_fn", &self.route.is_some())
            .field("refuse_fn", &self.refuse.is_some())
            .field("release_fn", &self.release.is_some())
            .field("broken_body", &self.broken_body)
            .finish()
    }
}

/// The default transient failure (429, 5xx): never stored, so the same key can retry.
pub(crate) fn transient(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
}

/// Whether a response is stored for replay as it is. Transient failures are not; nor are
/// rejections still waiting for the error envelope (they carry an [`ApiError`] and a
/// placeholder body) when no renderer was found to write their bytes first.
pub(crate) fn storable<B>(config: &Config, response: &Response<B>) -> bool {
    !config.releases(response.status()) && response.extensions().get::<ApiError>().is_none()
}
