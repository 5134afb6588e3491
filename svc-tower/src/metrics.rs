//! Metric handles for the layers, built on prometheus-client.
//!
//! [`ProxyMetrics`] is cheap to clone (every handle is an `Arc` inside). Build one, register it
//! in your own [`Registry`], and hand clones to the layers that record into it. Labels stay
//! bounded: a result word, a store name, a failure kind; never an org, an agent, a token or a
//! path.
//!
//! ```
//! use prometheus_client::registry::Registry;
//! use svc_tower::metrics::ProxyMetrics;
//!
//! let metrics = ProxyMetrics::new();
//! let mut registry = Registry::default();
//! metrics.register(&mut registry);
//!
//! let mut text = String::new();
//! prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
//! assert!(text.contains("svc_proxy_rate_limited_total 0"));
//! ```

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// A histogram with the latency buckets every svc service uses (1 ms to 5 s).
pub fn latency_histogram() -> Histogram {
    Histogram::new(svc_core::LATENCY_BUCKETS)
}

/// A `result` label: `ok`, `invalid`, `error`, `timeout`, ... For a service's own metrics
/// beside these.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// A word from a small fixed set.
    pub result: &'static str,
}

/// A `store` and `op` label for backend failures that were failed open.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct StoreFailureLabels {
    /// `rate_limit` or `idempotency`.
    pub(crate) store: &'static str,
    /// `error` or `timeout`.
    pub(crate) kind: &'static str,
}

/// Every metric the layers record:
///
/// | metric | what |
/// |---|---|
/// | `svc_proxy_rate_limited_total` | requests refused with 429 by the rate limit |
/// | `svc_proxy_auth_validate_duration_seconds{result}` | token validations by outcome |
/// | `svc_proxy_store_failures_total{store, kind}` | store errors and timeouts failed open |
#[derive(Debug, Clone)]
pub struct ProxyMetrics {
    pub(crate) rate_limited_total: Counter,
    pub(crate) auth_validate_duration: Family<ResultLabel, Histogram>,
    pub(crate) store_failures_total: Family<StoreFailureLabels, Counter>,
}

impl Default for ProxyMetrics {
    fn default() -> Self {
        ProxyMetrics::new()
    }
}

impl ProxyMetrics {
    /// Fresh handles, not yet registered anywhere.
    pub fn new() -> ProxyMetrics {
        ProxyMetrics {
            rate_limited_total: Counter::default(),
            auth_validate_duration: Family::new_with_constructor(latency_histogram),
            store_failures_total: Family::default(),
        }
    }

    /// Registers every handle in `registry` under its `svc_proxy_*` name.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "svc_proxy_rate_limited",
            "Requests refused by the per-org rate limit",
            self.rate_limited_total.clone(),
        );
        registry.register(
            "svc_proxy_auth_validate_duration_seconds",
            "ValidateToken duration as seen by the proxy, by result",
            self.auth_validate_duration.clone(),
        );
        registry.register(
            "svc_proxy_store_failures",
            "Rate-limit and idempotency store failures that were failed open",
            self.store_failures_total.clone(),
        );
    }

    /// Counts a request refused by a rate limit.
    pub(crate) fn rate_limited(&self) {
        self.rate_limited_total.inc();
    }

    /// Records one token validation and its `result` word.
    pub(crate) fn auth_validated(&self, result: &'static str, took: Duration) {
        self.auth_validate_duration
            .get_or_create(&ResultLabel { result })
            .observe(took.as_secs_f64());
    }

    /// Counts a store failure that was failed open.
    pub(crate) fn store_failure(&self, store: &'static str, kind: &'static str) {
        self.store_failures_total
            .get_or_create(&StoreFailureLabels { store, kind })
            .inc();
    }
}
