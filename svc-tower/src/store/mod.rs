//! What the stateful layers' backends share: the error and future types every store returns,
//! the fail-open bookkeeping, and (feature `redis`) the pooled Redis connection.
//!
//! The [`RateLimitStore`](crate::rate_limit::RateLimitStore) and
//! [`IdempotencyStore`](crate::idempotency::IdempotencyStore) traits return a [`StoreFuture`]:
//! one boxed future per request is noise next to a network round trip, and it keeps both traits
//! object-safe, so a gateway can pick its backend at start-up behind an `Arc<dyn ..>`.

#[cfg(feature = "redis")]
mod dial;
#[cfg(feature = "redis")]
mod pool;
#[cfg(feature = "redis")]
mod single;

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::metrics::ProxyMetrics;

#[cfg(feature = "redis")]
pub use pool::{RedisPool, RedisPoolBuilder};

/// The future a store operation returns.
pub type StoreFuture<T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'static>>;

/// A backend failure. The layers fail open on it; its message never holds a key, a body or a
/// credential.
#[derive(Debug)]
pub struct StoreError {
    context: &'static str,
    source: Option<Box<dyn StdError + Send + Sync>>,
}

impl StoreError {
    /// A failure described by `context` alone.
    pub fn new(context: &'static str) -> StoreError {
        StoreError {
            context,
            source: None,
        }
    }

    /// A failure of `context` caused by `source`.
    pub fn with_source(
        context: &'static str,
        source: impl Into<Box<dyn StdError + Send + Sync>>,
    ) -> StoreError {
        StoreError {
            context,
            source: Some(source.into()),
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Some(source) => write!(f, "{}: {source}", self.context),
            None => f.write_str(self.context),
        }
    }
}

impl StdError for StoreError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn StdError + 'static))
    }
}

/// Why a store operation was failed open: the `kind` label of `store_failures_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureKind {
    Error,
    Timeout,
}

impl FailureKind {
    fn label(self) -> &'static str {
        match self {
            FailureKind::Error => "error",
            FailureKind::Timeout => "timeout",
        }
    }
}

/// At most one warning per interval and store: when Redis is down every request fails, and a
/// log line per request would bury everything else (and cost more than the request).
pub(crate) struct WarnThrottle {
    store: &'static str,
    next_ms: AtomicU64,
    suppressed: AtomicU64,
}

const WARN_INTERVAL: Duration = Duration::from_secs(5);

fn process_millis() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

impl WarnThrottle {
    pub(crate) const fn new(store: &'static str) -> WarnThrottle {
        WarnThrottle {
            store,
            next_ms: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Counts the failure in `metrics` and logs it unless a warning went out recently.
    pub(crate) fn fail_open(
        &self,
        metrics: Option<&ProxyMetrics>,
        kind: FailureKind,
        error: Option<&StoreError>,
    ) {
        if let Some(metrics) = metrics {
            metrics.store_failure(self.store, kind.label());
        }
        let now = process_millis();
        let next = self.next_ms.load(Ordering::Relaxed);
        let interval = u64::try_from(WARN_INTERVAL.as_millis()).unwrap_or(u64::MAX);
        if now < next
            || self
                .next_ms
                .compare_exchange(
                    next,
                    now.saturating_add(interval),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_err()
        {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let suppressed = self.suppressed.swap(0, Ordering::Relaxed);
        match error {
            Some(error) => tracing::warn!(
                store = self.store,
                kind = kind.label(),
                suppressed,
                error = %error,
                "store unavailable; failing open"
            ),
            None => tracing::warn!(
                store = self.store,
                kind = kind.label(),
                suppressed,
                "store unavailable; failing open"
            ),
        }
    }
}

/// The Redis key of one org's state: `{prefix}svc:{<org_id>}:<suffix>`. The braces make the org
/// a hash tag, so every key of one org lives in one Redis Cluster slot.
#[cfg(feature = "redis")]
pub(crate) fn org_key(prefix: &str, org_id: &uuid::Uuid, suffix: &str) -> String {
    // Built by hand rather than with `format!`: one of these per limiter call.
    let mut buffer = uuid::Uuid::encode_buffer();
    let org = org_id.hyphenated().encode_lower(&mut buffer);
    let parts = [prefix, "svc:{", org, "}:", suffix];
    let mut key = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for part in parts {
        key.push_str(part);
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "redis")]
    #[test]
    fn keys_put_the_org_in_a_hash_tag() {
        let org = uuid::Uuid::nil();
        assert_eq!(
            org_key("p:", &org, "req"),
            "p:svc:{00000000-0000-0000-0000-000000000000}:req"
        );
    }

    #[test]
    fn failures_are_counted_even_when_the_log_is_throttled() {
        static THROTTLE: WarnThrottle = WarnThrottle::new("rate_limit");
        let metrics = ProxyMetrics::new();
        for _ in 0..3 {
            THROTTLE.fail_open(Some(&metrics), FailureKind::Timeout, None);
        }
        let counted = metrics
            .store_failures_total
            .get_or_create(&crate::metrics::StoreFailureLabels {
                store: "rate_limit",
                kind: "timeout",
            })
            .get();
        assert_eq!(counted, 3);
        assert_eq!(THROTTLE.suppressed.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn error_display_names_the_context_and_cause() {
        let err = StoreError::with_source("redis script", std::io::Error::other("refused"));
        assert_eq!(err.to_string(), "redis script: refused");
        assert!(err.source().is_some());
    }
}
