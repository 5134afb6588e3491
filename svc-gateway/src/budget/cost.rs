//! The cost of one call, from its report and its model's price.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry as Prometheus;

use crate::provider::Registry;
use crate::usage::Report;

/// The tokens one call is charged for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallUsage {
    /// Prompt (input) tokens, cached ones included.
    pub prompt: u64,
    /// Of those, the ones the provider served from its cache.
    pub cached: u64,
    /// Completion (output) tokens.
    pub completion: u64,
}

impl CallUsage {
    /// What a call's report charges: the provider's usage; for a stream that ended before
    /// reporting it, `prompt_estimate` plus a quarter of the event bytes sent (as the
    /// tokens-per-minute settlement charges it); nothing when no provider answered.
    pub fn of(report: &Report, prompt_estimate: impl FnOnce() -> u64) -> CallUsage {
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        match report {
            Report {
                usage: Some(usage),
                cached_tokens,
                ..
            } => CallUsage {
                prompt: count(usage.prompt_tokens),
                cached: count(*cached_tokens),
                completion: count(usage.completion_tokens),
            },
            Report {
                streamed_bytes: Some(bytes),
                ..
            } => CallUsage {
                prompt: prompt_estimate(),
                cached: 0,
                completion: bytes.div_ceil(4),
            },
            _ => CallUsage::default(),
        }
    }
}

/// Prices calls against the registry; clones share the unpriced-call counter.
#[derive(Clone, Debug)]
pub struct CostMeter {
    registry: Registry,
    unpriced: Counter,
}

impl CostMeter {
    /// A meter pricing models as `registry` does.
    pub fn new(registry: Registry) -> CostMeter {
        CostMeter {
            registry,
            unpriced: Counter::default(),
        }
    }

    /// The same meter (its counter shared) pricing as `registry` does.
    pub fn with_registry(&self, registry: Registry) -> CostMeter {
        CostMeter {
            registry,
            unpriced: self.unpriced.clone(),
        }
    }

    /// Registers `svc_proxy_unpriced_calls_total` in `prometheus`.
    pub fn register(&self, prometheus: &mut Prometheus) {
        prometheus.register(
            "svc_proxy_unpriced_calls",
            "Calls a provider answered for a model without a price (they cost 0)",
            self.unpriced.clone(),
        );
    }

    /// The calls counted as unpriced so far.
    pub fn unpriced_total(&self) -> u64 {
        self.unpriced.get()
    }

    /// The cost in micro-dollars of a call to `model` that used `usage`; 0 for a model
    /// without a price.
    pub fn cost(&self, model: &str, usage: CallUsage) -> i64 {
        self.registry.price(model).map_or(0, |price| {
            price.cost(usage.prompt, usage.cached, usage.completion)
        })
    }

    /// Counts a call a provider answered (`report` names one) for `model` when it has no
    /// price: every such call, whether or not a ledger records it.
    pub fn observe(&self, model: &str, report: &Report) {
        if !report.provider.is_empty() && self.registry.price(model).is_none() {
            self.unpriced.inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::budget::{MOCK_PRICE, Price};
    use crate::config::providers::{
        ModelEntry, ProviderEntry, ProviderKind, RegistryFile, TargetEntry,
    };
    use crate::config::{DEFAULT_PROVIDER_TIMEOUT, LlmMode, ProviderConfig};
    use crate::provider::mock::MockProvider;
    use crate::session::Usage;

    fn config(file: Option<RegistryFile>) -> ProviderConfig {
        ProviderConfig {
            mode: LlmMode::Mock,
            base_url: None,
            api_key: None,
            timeout: DEFAULT_PROVIDER_TIMEOUT,
            models: vec!["svc-mock-1".to_owned()],
            file,
        }
    }

    fn model(name: &str, prefix: bool, price: Option<Price>) -> ModelEntry {
        ModelEntry {
            name: name.to_owned(),
            prefix,
            targets: vec![TargetEntry {
                provider: 0,
                model: None,
            }],
            price,
        }
    }

    #[test]
    fn a_prefix_price_covers_every_model_it_matches() {
        let cheap = Price::from_dollars(1.0, 1.0, None).unwrap();
        let dear = Price::from_dollars(10.0, 10.0, None).unwrap();
        let file = RegistryFile {
            providers: vec![ProviderEntry {
                name: "local".to_owned(),
                kind: ProviderKind::Mock,
                base_url: None,
                api_key: None,
                timeout: DEFAULT_PROVIDER_TIMEOUT,
                breaker: Default::default(),
            }],
            models: vec![
                model("claude-", true, Some(cheap)),
                model("claude-opus-", true, Some(dear)),
                model("claude-haiku", false, None),
                model("exact", false, Some(dear)),
                model("free-", true, None),
            ],
            mcp_servers: Vec::new(),
        };
        let registry = Registry::from_config(&config(Some(file))).unwrap();
        assert_eq!(registry.price("claude-sonnet"), Some(cheap));
        assert_eq!(
            registry.price("claude-opus-4"),
            Some(dear),
            "the longest prefix"
        );
        assert_eq!(
            registry.price("claude-haiku"),
            Some(cheap),
            "an unpriced exact entry"
        );
        assert_eq!(registry.price("exact"), Some(dear));
        assert_eq!(registry.price("free-x"), None);
        assert_eq!(registry.price("unknown"), None);
    }

    #[test]
    fn the_mock_has_a_fixed_price_and_unpriced_calls_are_counted() {
        let mock = Registry::from_config(&config(None)).unwrap();
        assert_eq!(mock.price("svc-mock-1"), Some(MOCK_PRICE));
        let meter = CostMeter::new(mock);
        let usage = CallUsage {
            prompt: 1_000,
            cached: 0,
            completion: 500,
        };
        assert_eq!(meter.cost("svc-mock-1", usage), 2_000);
        let answered = Report {
            provider: "mock".to_owned(),
            ..Report::default()
        };
        meter.observe("svc-mock-1", &answered);
        assert_eq!(meter.unpriced_total(), 0);

        let unpriced = meter.with_registry(Registry::new(Arc::new(MockProvider::new()), []));
        assert_eq!(unpriced.cost("svc-mock-1", usage), 0);
        unpriced.observe("svc-mock-1", &answered);
        unpriced.observe("svc-mock-1", &Report::default());
        assert_eq!(
            meter.unpriced_total(),
            1,
            "one counter, answered calls only"
        );
    }

    #[test]
    fn a_stream_cut_short_is_charged_for_what_was_sent() {
        let reported = Report {
            usage: Some(Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
                total_tokens: 15,
            }),
            cached_tokens: 4,
            streamed_bytes: Some(4_000),
            ..Report::default()
        };
        let usage = CallUsage::of(&reported, || unreachable!("usage was reported"));
        assert_eq!((usage.prompt, usage.cached, usage.completion), (10, 4, 5));
        let cut = Report {
            streamed_bytes: Some(401),
            ..Report::default()
        };
        let usage = CallUsage::of(&cut, || 30);
        assert_eq!((usage.prompt, usage.completion), (30, 101));
        assert_eq!(
            CallUsage::of(&Report::default(), || 30),
            CallUsage::default()
        );
    }
}
