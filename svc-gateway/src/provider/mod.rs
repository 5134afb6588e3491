//! Providers: who answers a validated request.
//!
//! A [`Provider`] turns an [`ApiRequest`] (chat completions, embeddings, responses or
//! messages) into a [`ProviderReply`] (a whole JSON body, or a stream of server-sent events)
//! or a [`ProviderError`] from the provider table. The [`Registry`] routes each model to its
//! providers in order, with fallback and a circuit breaker per target; a model outside the
//! registry is 501 PROVIDER_NOT_CONFIGURED before any provider is called.
//!
//! Three kinds ship: [`mock::MockProvider`], deterministic and in process;
//! [`live::LiveProvider`], any OpenAI-compatible API under a base URL, which also serves the
//! Messages API by translation; and [`anthropic::AnthropicProvider`], Anthropic's Messages API,
//! which also serves chat completions and the Responses API by translation.

pub mod anthropic;
mod breaker;
mod error;
pub mod live;
mod metrics;
pub mod mock;
mod registry;
pub mod system_turns;
mod translate;
pub(crate) mod transport;

use std::pin::Pin;

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
pub use metrics::ProviderMetrics;
pub use registry::Registry;

use crate::request::ApiRequest;

/// A `count_tokens` answer, `{"input_tokens": N}`, from the gateway's own upper-bound
/// estimate ([`crate::token_estimate`]): how the mock and OpenAI-compatible targets answer it,
/// having no counter of Anthropic's.
pub(crate) fn estimated_count(request: &ApiRequest) -> ProviderReply {
    let tokens = crate::token_estimate::prompt_tokens(&request.json, request.message_count);
    ProviderReply::Json {
        status: StatusCode::OK,
        body: Bytes::from(serde_json::json!({ "input_tokens": tokens }).to_string()),
    }
}

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
    /// The client's `anthropic-beta` header: the Messages API features it opts into (Claude
    /// Code sends it). Only an anthropic provider passes it on.
    pub anthropic_beta: Option<http::HeaderValue>,
    /// The org the call is made for: a circuit breaker does not let one org's failures shut
    /// the target for the others. Never sent upstream.
    pub org_id: Option<uuid::Uuid>,
}

/// Something that answers the provider-backed routes.
pub trait Provider: Send + Sync + 'static {
    /// A short name for logs: `mock`, `live`, `anthropic`.
    fn name(&self) -> &'static str;

    /// Answers one validated request.
    fn complete<'a>(
        &'a self,
        request: &'a ApiRequest,
        call: &'a CallInfo,
    ) -> BoxFuture<'a, Result<ProviderReply, ProviderError>>;
}
