//! Providers: who answers a validated request.
//!
//! A [`Provider`] turns an [`ApiRequest`] (chat completions, embeddings or responses) into a [`ProviderReply`] (a whole JSON body, or a
//! stream of server-sent events) or a [`ProviderError`] from the provider table. The
//! [`Registry`] holds the active provider and the models registered with it; a model outside
//! the registry is 501 PROVIDER_NOT_CONFIGURED before any provider is called.
//!
//! Two providers ship: [`mock::MockProvider`], deterministic and in process, and
//! [`live::LiveProvider`], any OpenAI-compatible API under a base URL.

mod error;
pub mod live;
pub mod mock;

use std::collections::BTreeSet;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::Stream;
use futures_util::future::BoxFuture;
use http::StatusCode;
use svc_tower::request_id::TraceId;
use svc_tower::trace_context::TraceParent;

pub use error::{
    DEFAULT_RETRY_AFTER_SECS, MAX_DETAIL_CHARS, ProviderError, retry_after_seconds,
    sanitized_detail,
};

use crate::config::{LlmMode, ProviderConfig};
use crate::request::ApiRequest;

/// Raw server-sent event bytes, in the order the provider produced them.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<Bytes, ProviderError>> + Send>>;

/// A provider's successful answer.
pub enum ProviderReply {
    /// A complete OpenAI-shaped JSON body and the provider's (2xx) status.
    Json {
        /// The provider's status.
        status: StatusCode,
        /// The body, already checked to be JSON.
        body: Bytes,
    },
    /// `text/event-stream` frames, passed through as they arrive.
    Stream {
        /// The provider's (2xx) status.
        status: StatusCode,
        /// The frames; an `Err` ends the stream after the frames before it.
        events: EventStream,
    },
}

impl std::fmt::Debug for ProviderReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProviderReply::Json { status, body } => f
                .debug_struct("Json")
                .field("status", status)
                .field("bytes", &body.len())
                .finish(),
            ProviderReply::Stream { status, .. } => f
                .debug_struct("Stream")
                .field("status", status)
                .finish_non_exhaustive(),
        }
    }
}

/// Facts about the call a provider may pass on (never the client's credentials).
#[derive(Debug, Clone, Default)]
pub struct CallInfo {
    /// The gateway's request id, sent upstream as `X-Request-ID` for correlation.
    pub request_id: Option<String>,
    /// The request's trace (the client's `X-Trace-ID`), sent upstream as W3C `traceparent`.
    pub trace_id: Option<TraceId>,
    /// The gateway's exported request span, when trace export is on: sent upstream as the
    /// `traceparent` (its span id and sampling decision) in place of a fresh child of
    /// `trace_id`.
    pub trace_parent: Option<TraceParent>,
}

/// Something that answers the provider-backed routes.
pub trait Provider: Send + Sync + 'static {
    /// A short name for logs: `mock`, `live`.
    fn name(&self) -> &'static str;

    /// Answers one validated request.
    fn complete<'a>(
        &'a self,
        request: &'a ApiRequest,
        call: &'a CallInfo,
    ) -> BoxFuture<'a, Result<ProviderReply, ProviderError>>;
}

/// The active provider and the models registered with it.
#[derive(Clone)]
pub struct Registry {
    provider: Arc<dyn Provider>,
    /// Empty means every model is forwarded (live mode without `SVC_PROVIDER_MODELS`).
    models: Arc<BTreeSet<String>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("provider", &self.provider.name())
            .field("models", &self.models)
            .finish()
    }
}

impl Registry {
    /// A registry over `provider`; an empty `models` list forwards every model.
    pub fn new(provider: Arc<dyn Provider>, models: impl IntoIterator<Item = String>) -> Registry {
        Registry {
            provider,
            models: Arc::new(models.into_iter().collect()),
        }
    }

    /// The registry the configuration asks for.
    pub fn from_config(config: &ProviderConfig) -> Result<Registry, live::BuildError> {
        let provider: Arc<dyn Provider> = match config.mode {
            LlmMode::Mock => Arc::new(mock::MockProvider::new()),
            LlmMode::Live => Arc::new(live::LiveProvider::from_config(config)?),
        };
        Ok(Registry::new(provider, config.models.iter().cloned()))
    }

    /// The active provider's name.
    pub fn provider_name(&self) -> &'static str {
        self.provider.name()
    }

    /// The registered model names, sorted; empty when every model is forwarded.
    pub fn models(&self) -> impl Iterator<Item = &str> {
        self.models.iter().map(String::as_str)
    }

    /// True when `model` may be sent to the active provider.
    pub fn is_registered(&self, model: &str) -> bool {
        self.models.is_empty() || self.models.contains(model)
    }

    /// Answers `request` with the active provider, or 501 for an unregistered model.
    pub async fn complete(
        &self,
        request: &ApiRequest,
        call: &CallInfo,
    ) -> Result<ProviderReply, ProviderError> {
        if !self.is_registered(&request.model) {
            return Err(ProviderError::NotConfigured);
        }
        self.provider.complete(request, call).await
    }
}
