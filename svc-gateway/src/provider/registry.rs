//! The model registry: which providers serve which models, in what order.
//!
//! A model names its targets, each a provider and optionally the model name that provider
//! knows it by. A request goes to its model's first target whose breaker admits it; a target
//! that cannot be reached, times out before its head, throttles (429) or fails (5xx) hands the
//! request to the next one. Once a target's answer has begun (a JSON body read whole, or a
//! stream's head) the chain is over: nothing after that falls back. A target whose protocol
//! cannot carry the request (a field its translation refuses) hands it on too, without a
//! call. The last target's failure is the one the client sees.
//!
//! A model is looked up by its exact name, then by the longest `prefix*` it starts with; no
//! match is 501 PROVIDER_NOT_CONFIGURED before any provider is called.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use super::breaker::Breaker;
use super::live::{BuildError, LiveProvider};
use super::metrics::ProviderMetrics;
use super::mock::MockProvider;
use super::{CallInfo, Provider, ProviderError, ProviderReply, anthropic};
use crate::budget::{MOCK_PRICE, Price};
use crate::config::providers::{
    BreakerSettings, ModelEntry, ProviderEntry, ProviderKind, RegistryFile, TargetEntry,
};
use crate::config::{DEFAULT_PROVIDER_TIMEOUT, LlmMode, ProviderConfig};
use crate::request::ApiRequest;

/// The breaker of a single-provider registry: with nothing to fall back to, it never opens.
const SINGLE_PROVIDER_BREAKER: BreakerSettings = BreakerSettings {
    failures: u32::MAX,
    cooldown: Duration::from_secs(1),
};

struct Upstream {
    /// The operator's name for it: the metric label and log field.
    name: String,
    provider: Arc<dyn Provider>,
    timeout: Duration,
}

struct Target {
    provider: usize,
    model: Option<String>,
    breaker: Breaker,
}

struct Route {
    name: String,
    prefix: bool,
    targets: Vec<Target>,
    price: Option<Price>,
}

struct Inner {
    upstreams: Vec<Upstream>,
    routes: Vec<Route>,
    metrics: ProviderMetrics,
}

/// The providers and the models routed to them; clones share breakers and metrics.
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self
            .inner
            .upstreams
            .iter()
            .map(|u| u.name.as_str())
            .collect();
        f.debug_struct("Registry")
            .field("providers", &names)
            .field("models", &self.models().collect::<Vec<_>>())
            .finish()
    }
}

impl Registry {
    /// A one-provider registry over `provider`; an empty `models` list forwards every model.
    pub fn new(provider: Arc<dyn Provider>, models: impl IntoIterator<Item = String>) -> Registry {
        let upstream = Upstream {
            name: provider.name().to_owned(),
            provider,
            timeout: DEFAULT_PROVIDER_TIMEOUT,
        };
        Registry::single(upstream, models.into_iter().collect(), None)
    }

    fn single(upstream: Upstream, models: Vec<String>, price: Option<Price>) -> Registry {
        let entries: Vec<ModelEntry> = if models.is_empty() {
            vec![ModelEntry {
                name: String::new(),
                prefix: true,
                targets: vec![TargetEntry {
                    provider: 0,
                    model: None,
                }],
                price,
            }]
        } else {
            models
                .into_iter()
                .map(|name| ModelEntry {
                    name,
                    prefix: false,
                    targets: vec![TargetEntry {
                        provider: 0,
                        model: None,
                    }],
                    price,
                })
                .collect()
        };
        Registry::build(vec![(upstream, SINGLE_PROVIDER_BREAKER)], entries)
    }

    fn build(upstreams: Vec<(Upstream, BreakerSettings)>, models: Vec<ModelEntry>) -> Registry {
        let routes = models
            .into_iter()
            .map(|entry| Route {
                name: entry.name,
                prefix: entry.prefix,
                targets: entry
                    .targets
                    .into_iter()
                    .map(|t| Target {
                        breaker: Breaker::new(upstreams[t.provider].1),
                        provider: t.provider,
                        model: t.model,
                    })
                    .collect(),
                price: entry.price,
            })
            .collect();
        Registry {
            inner: Arc::new(Inner {
                upstreams: upstreams.into_iter().map(|(u, _)| u).collect(),
                routes,
                metrics: ProviderMetrics::default(),
            }),
        }
    }

    /// The registry the configuration asks for: `SVC_PROVIDERS_FILE`, or the one provider
    /// of the single-provider variables.
    pub fn from_config(config: &ProviderConfig) -> Result<Registry, BuildError> {
        if let Some(file) = &config.file {
            return Registry::from_file(file);
        }
        // The mock's models have a fixed price, so budgets can be tried in dev mode.
        let (name, provider, price): (&str, Arc<dyn Provider>, _) = match config.mode {
            LlmMode::Mock => ("mock", Arc::new(MockProvider::new()), Some(MOCK_PRICE)),
            LlmMode::Live => ("live", Arc::new(LiveProvider::from_config(config)?), None),
        };
        let upstream = Upstream {
            name: name.to_owned(),
            provider,
            timeout: config.timeout,
        };
        Ok(Registry::single(upstream, config.models.clone(), price))
    }

    fn from_file(file: &RegistryFile) -> Result<Registry, BuildError> {
        let upstreams = file
            .providers
            .iter()
            .map(|entry| Ok((upstream(entry)?, entry.breaker)))
            .collect::<Result<Vec<_>, BuildError>>()?;
        Ok(Registry::build(upstreams, file.models.clone()))
    }

    /// The provider metrics, to register with the gateway's Prometheus registry.
    pub fn metrics(&self) -> &ProviderMetrics {
        &self.inner.metrics
    }

    /// The concrete model names (not the `prefix*` patterns), sorted.
    pub fn models(&self) -> impl Iterator<Item = &str> {
        let mut names: Vec<&str> = self
            .inner
            .routes
            .iter()
            .filter(|r| !r.prefix)
            .map(|r| r.name.as_str())
            .collect();
        names.sort_unstable();
        names.into_iter()
    }

    /// The name of the provider that first serves `model`, when one does.
    pub fn owner(&self, model: &str) -> Option<&str> {
        let target = self.route(model)?.targets.first()?;
        Some(&self.inner.upstreams[target.provider].name)
    }

    /// True when some provider serves `model`.
    pub fn is_registered(&self, model: &str) -> bool {
        self.route(model).is_some()
    }

    /// The longest a whole chain may take: its targets' timeouts summed, for the slowest
    /// model. An idempotency claim must outlive it.
    pub fn chain_timeout(&self) -> Duration {
        self.inner
            .routes
            .iter()
            .map(|route| {
                route
                    .targets
                    .iter()
                    .map(|t| self.inner.upstreams[t.provider].timeout)
                    .sum()
            })
            .max()
            .unwrap_or(DEFAULT_PROVIDER_TIMEOUT)
    }

    /// The price of `model`: its own entry's, else that of the longest priced `prefix*` it
    /// starts with; `None` when nothing prices it.
    pub fn price(&self, model: &str) -> Option<Price> {
        let routes = &self.inner.routes;
        let exact = routes.iter().find(|r| !r.prefix && r.name == model);
        exact.and_then(|r| r.price).or_else(|| {
            routes
                .iter()
                .filter(|r| r.prefix && r.price.is_some() && model.starts_with(&r.name))
                .max_by_key(|r| r.name.len())
                .and_then(|r| r.price)
        })
    }

    fn route(&self, model: &str) -> Option<&Route> {
        let routes = &self.inner.routes;
        routes
            .iter()
            .find(|r| !r.prefix && r.name == model)
            .or_else(|| {
                routes
                    .iter()
                    .filter(|r| r.prefix && model.starts_with(&r.name))
                    .max_by_key(|r| r.name.len())
            })
    }

    /// Answers `request` with its model's targets in order (see the [module docs](self)),
    /// with the name of the provider that answered.
    pub async fn complete(
        &self,
        request: &ApiRequest,
        call: &CallInfo,
    ) -> Result<(ProviderReply, &str), ProviderError> {
        let route = self
            .route(&request.model)
            .ok_or(ProviderError::NotConfigured)?;
        let metrics = &self.inner.metrics;
        let mut last = None;
        for (i, target) in route.targets.iter().enumerate() {
            let upstream = &self.inner.upstreams[target.provider];
            let Some(admission) = target.breaker.admit(call.org_id) else {
                metrics.skip(&upstream.name);
                continue;
            };
            let renamed = match &target.model {
                Some(model) if *model != request.model => Some(request.with_model(model)),
                _ => None,
            };
            let started = Instant::now();
            // Every log line of the call names the provider.
            let span = tracing::info_span!("provider", provider = %upstream.name);
            let result = upstream
                .provider
                .complete(renamed.as_ref().unwrap_or(request), call)
                .instrument(span)
                .await;
            metrics.call(
                &upstream.name,
                result.as_ref().map(|_| ()),
                started.elapsed(),
            );
            let error = match result {
                Ok(reply) => {
                    metrics.breaker(&upstream.name, admission.success());
                    return Ok((reply, &upstream.name));
                }
                // This provider does not serve the route (a Messages request to an
                // OpenAI-compatible API): the next target may; the breaker learns nothing.
                Err(ProviderError::NotConfigured) => {
                    last.get_or_insert(ProviderError::NotConfigured);
                    continue;
                }
                // This target's protocol cannot carry the request; one of another kind may.
                // The breaker learns nothing either: no call was made.
                Err(error @ ProviderError::Untranslatable(_)) => {
                    if last
                        .as_ref()
                        .is_none_or(|l| *l == ProviderError::NotConfigured)
                    {
                        last = Some(error);
                    }
                    continue;
                }
                Err(error) => error,
            };
            if !error.falls_back() {
                // A provider that refused the call for the client's or the operator's reasons
                // is up: its breaker counts an answer.
                metrics.breaker(&upstream.name, admission.success());
                return Err(error);
            }
            metrics.breaker(&upstream.name, admission.failure());
            if i + 1 < route.targets.len() {
                metrics.fallback(&upstream.name);
                tracing::warn!(
                    provider = %upstream.name,
                    error = %error,
                    "provider failed before answering; trying the model's next target"
                );
            }
            last = Some(error);
        }
        Err(last.unwrap_or(ProviderError::Unavailable {
            reason: "every target of the model is skipped by its circuit breaker",
        }))
    }
}

fn upstream(entry: &ProviderEntry) -> Result<Upstream, BuildError> {
    let base = entry.base_url.as_deref().unwrap_or_default();
    let provider: Arc<dyn Provider> = match entry.kind {
        ProviderKind::Mock => Arc::new(MockProvider::new()),
        ProviderKind::OpenAi => Arc::new(
            LiveProvider::new(base, entry.api_key.clone(), entry.timeout)
                .map_err(|e| BuildError::entry(&entry.name, e))?,
        ),
        ProviderKind::Anthropic => Arc::new(
            anthropic::AnthropicProvider::new(base, entry.api_key.clone(), entry.timeout)
                .map_err(|e| BuildError::entry(&entry.name, e))?,
        ),
    };
    Ok(Upstream {
        name: entry.name.clone(),
        provider,
        timeout: entry.timeout,
    })
}
