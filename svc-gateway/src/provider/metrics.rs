//! Provider metrics, labelled by the provider's name from the registry: a bounded set the
//! operator writes. Never a model, an org or a key.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::ProviderError;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProviderLabel {
    provider: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    provider: String,
    outcome: &'static str,
}

fn latency_histogram() -> Histogram {
    Histogram::new(svc_core::LATENCY_BUCKETS)
}

/// The provider metric handles; clones share the series.
#[derive(Debug, Clone)]
pub struct ProviderMetrics {
    requests: Family<OutcomeLabel, Counter>,
    latency: Family<ProviderLabel, Histogram, fn() -> Histogram>,
    fallbacks: Family<ProviderLabel, Counter>,
    skips: Family<ProviderLabel, Counter>,
    open_breakers: Family<ProviderLabel, Gauge>,
}

impl Default for ProviderMetrics {
    fn default() -> ProviderMetrics {
        ProviderMetrics {
            requests: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            fallbacks: Family::default(),
            skips: Family::default(),
            open_breakers: Family::default(),
        }
    }
}

/// The `outcome` label of one call.
fn outcome(result: Result<(), &ProviderError>) -> &'static str {
    match result {
        Ok(()) => "ok",
        Err(ProviderError::Rejected { .. }) => "rejected",
        Err(ProviderError::RateLimited { .. }) => "rate_limited",
        Err(ProviderError::Timeout) => "timeout",
        Err(ProviderError::Unavailable { .. }) => "unavailable",
        Err(ProviderError::NotConfigured) => "not_configured",
        Err(ProviderError::Untranslatable(_)) => "untranslatable",
    }
}

impl ProviderMetrics {
    /// Registers every series in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "svc_provider_requests",
            "Calls to each provider, by outcome",
            self.requests.clone(),
        );
        registry.register(
            "svc_provider_request_duration_seconds",
            "Time to each provider's response head (or its failure)",
            self.latency.clone(),
        );
        registry.register(
            "svc_provider_fallbacks",
            "Calls moved to a model's next target after this provider failed",
            self.fallbacks.clone(),
        );
        registry.register(
            "svc_provider_breaker_skips",
            "Calls that skipped this provider's target because its breaker was open",
            self.skips.clone(),
        );
        registry.register(
            "svc_provider_breakers_open",
            "This provider's targets whose circuit breaker is open in this process",
            self.open_breakers.clone(),
        );
    }

    pub(crate) fn call(&self, provider: &str, result: Result<(), &ProviderError>, took: Duration) {
        let label = ProviderLabel {
            provider: provider.to_owned(),
        };
        self.latency
            .get_or_create(&label)
            .observe(took.as_secs_f64());
        self.requests
            .get_or_create(&OutcomeLabel {
                provider: label.provider,
                outcome: outcome(result),
            })
            .inc();
    }

    pub(crate) fn fallback(&self, provider: &str) {
        self.fallbacks.get_or_create(&label(provider)).inc();
    }

    pub(crate) fn skip(&self, provider: &str) {
        self.skips.get_or_create(&label(provider)).inc();
    }

    pub(crate) fn breaker(&self, provider: &str, change: super::breaker::Change) {
        use super::breaker::Change;
        let gauge = self.open_breakers.get_or_create(&label(provider));
        match change {
            Change::Opened => gauge.inc(),
            Change::Closed => gauge.dec(),
            Change::None => 0,
        };
    }
}

fn label(provider: &str) -> ProviderLabel {
    ProviderLabel {
        provider: provider.to_owned(),
    }
}
