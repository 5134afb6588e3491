//! The live provider: any OpenAI-compatible API, `POST {base}/chat/completions`,
//! `{base}/embeddings` and `{base}/responses`. A `/v1/messages` request is translated to a chat
//! completion and its answer, JSON or stream, back to Anthropic's shape (module `messages`). A
//! Messages `count_tokens` call is answered from the gateway's estimate, without a call.
//!
//! The upstream request is built from scratch: the client's body as received (see
//! [`ApiRequest::upstream_body`] for the one field the gateway may add), our own headers
//! and the provider key as `Authorization: Bearer`. Nothing else of the client's request
//! travels, so the client's `Authorization` and `Idempotency-Key` can never leak upstream.
//! `X-Request-ID` and a W3C `traceparent` in the request's trace go along, so the provider's
//! records correlate with the client's `X-Request-ID` and `X-Trace-ID`. With trace export on,
//! the `traceparent` names the gateway's request span and its sampling decision; without, it
//! is a fresh sampled parent id per call. The HTTP side is [`super::transport`]'s.

use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::header::AUTHORIZATION;
use http::{HeaderValue, Request, Uri};
use http_body_util::Full;

pub(crate) mod messages;

use super::translate;
use super::transport::{HttpUpstream, TlsError, secret_header};
use super::{CallInfo, Provider, ProviderError, ProviderReply};
use crate::config::{ProviderConfig, Secret};
use crate::request::{ApiRequest, Endpoint};

pub use super::transport::{CONNECT_TIMEOUT, MAX_ERROR_BYTES, MAX_RESPONSE_BYTES};

/// Why a provider could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The base URL does not form a valid endpoint.
    #[error("SVC_PROVIDER_BASE_URL: not a valid base URL")]
    BaseUrl,
    /// The key cannot travel in a header.
    #[error("SVC_PROVIDER_API_KEY: not a valid header value")]
    ApiKey,
    /// rustls refused its own defaults.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// A provider of `SVC_PROVIDERS_FILE` could not be built.
    #[error("SVC_PROVIDERS_FILE: provider {provider:?}: {source}")]
    Entry {
        /// The provider's name.
        provider: String,
        /// What went wrong.
        #[source]
        source: Box<BuildError>,
    },
}

impl BuildError {
    pub(crate) fn entry(provider: &str, source: BuildError) -> BuildError {
        BuildError::Entry {
            provider: provider.to_owned(),
            source: Box::new(source),
        }
    }
}

/// An OpenAI-compatible provider over a pooled hyper client. Its debug output holds no key:
/// key headers are marked sensitive.
#[derive(Clone, Debug)]
pub struct LiveProvider {
    http: HttpUpstream,
    /// One URI per OpenAI endpoint: chat completions, embeddings, responses.
    endpoints: [Uri; 3],
    authorization: Option<HeaderValue>,
}

impl LiveProvider {
    /// Builds the provider from the live configuration.
    pub fn from_config(config: &ProviderConfig) -> Result<LiveProvider, BuildError> {
        let base = config.base_url.as_deref().ok_or(BuildError::BaseUrl)?;
        LiveProvider::new(base, config.api_key.clone(), config.timeout)
    }

    /// A provider calling `{base_url}/chat/completions` (and the other endpoints) with
    /// `api_key`, within `timeout`.
    pub fn new(
        base_url: &str,
        api_key: Option<Secret>,
        timeout: Duration,
    ) -> Result<LiveProvider, BuildError> {
        let base = base_url.trim_end_matches('/');
        let [Ok(chat), Ok(embeddings), Ok(responses)] = [
            Endpoint::ChatCompletions,
            Endpoint::Embeddings,
            Endpoint::Responses,
        ]
        .map(|endpoint| format!("{base}{}", endpoint.upstream_path()).parse::<Uri>()) else {
            return Err(BuildError::BaseUrl);
        };
        let endpoints = [chat, embeddings, responses];
        let authorization = match &api_key {
            Some(key) => {
                Some(secret_header(&format!("Bearer {}", key.expose())).ok_or(BuildError::ApiKey)?)
            }
            None => None,
        };
        Ok(LiveProvider {
            http: HttpUpstream::new(timeout, api_key)?,
            endpoints,
            authorization,
        })
    }

    fn upstream_request(
        &self,
        request: &ApiRequest,
        call: &CallInfo,
    ) -> Option<Request<Full<Bytes>>> {
        let endpoint = match request.endpoint {
            Endpoint::ChatCompletions => &self.endpoints[0],
            Endpoint::Embeddings => &self.endpoints[1],
            Endpoint::Responses => &self.endpoints[2],
            Endpoint::Messages | Endpoint::CountTokens => return None,
        };
        self.post(endpoint, request.upstream_body(), request.stream, call)
    }

    fn post(
        &self,
        endpoint: &Uri,
        body: Bytes,
        stream: bool,
        call: &CallInfo,
    ) -> Option<Request<Full<Bytes>>> {
        let mut builder = HttpUpstream::post(endpoint, stream, call);
        if let Some(authorization) = &self.authorization {
            builder = builder.header(AUTHORIZATION, authorization.clone());
        }
        builder.body(Full::new(body)).ok()
    }

    async fn send(
        &self,
        upstream: Option<Request<Full<Bytes>>>,
        stream: bool,
    ) -> Result<ProviderReply, ProviderError> {
        let upstream = upstream.ok_or(ProviderError::Unavailable {
            reason: "could not build the provider request",
        })?;
        self.http.send(upstream, stream).await
    }

    async fn call(
        &self,
        request: &ApiRequest,
        call: &CallInfo,
    ) -> Result<ProviderReply, ProviderError> {
        match request.endpoint {
            Endpoint::Messages => return self.messages(request, call).await,
            // No OpenAI-compatible API counts a Messages request: the estimate answers.
            Endpoint::CountTokens => return Ok(super::estimated_count(request)),
            _ => {}
        }
        let upstream = self.upstream_request(request, call);
        self.send(upstream, request.stream).await
    }

    /// A Messages request by translation to a chat completion, both ways.
    async fn messages(
        &self,
        request: &ApiRequest,
        call: &CallInfo,
    ) -> Result<ProviderReply, ProviderError> {
        let body = Bytes::from(messages::request::body(request)?.to_string());
        let upstream = self.post(&self.endpoints[0], body, request.stream, call);
        let reply = self.send(upstream, request.stream).await?;
        translate::reply(reply, messages::answer::message, messages::stream::events)
    }
}

impl Provider for LiveProvider {
    fn name(&self) -> &'static str {
        "live"
    }

    fn complete<'a>(
        &'a self,
        request: &'a ApiRequest,
        call: &'a CallInfo,
    ) -> BoxFuture<'a, Result<ProviderReply, ProviderError>> {
        Box::pin(self.call(request, call))
    }
}

#[cfg(test)]
mod tests {
    use svc_tower::request_id::TraceId;
    use svc_tower::trace_context::{TRACEPARENT, TraceParent};

    use super::*;

    fn traceparent(call: &CallInfo) -> Option<String> {
        let provider = LiveProvider::new("http://127.0.0.1:9", None, Duration::from_secs(1))
            .expect("a loopback base URL");
        let request = ApiRequest {
            endpoint: Endpoint::ChatCompletions,
            model: "m".into(),
            stream: false,
            message_count: 0,
            include_usage: false,
            max_tokens: None,
            temperature: None,
            json: Default::default(),
            raw: Bytes::new(),
        };
        let upstream = provider
            .upstream_request(&request, call)
            .expect("a request");
        upstream
            .headers()
            .get(&TRACEPARENT)
            .map(|v| v.to_str().unwrap().to_owned())
    }

    #[test]
    fn debug_output_holds_no_key() {
        let key = "sk-debug-0123456789";
        let provider = LiveProvider::new(
            "http://127.0.0.1:9",
            Some(Secret::new(key)),
            Duration::from_secs(1),
        )
        .unwrap();
        let printed = format!("{provider:?}");
        assert!(printed.contains("127.0.0.1:9"), "{printed}");
        assert!(!printed.contains(key), "{printed}");
        let anthropic = crate::provider::anthropic::AnthropicProvider::new(
            "http://127.0.0.1:9/v1",
            Some(Secret::new(key)),
            Duration::from_secs(1),
        )
        .unwrap();
        assert!(!format!("{anthropic:?}").contains(key));
    }

    #[test]
    fn the_request_span_is_the_providers_parent_with_its_decision() {
        let trace = TraceId::random();
        let span = TraceParent::new(trace, 0x00f067aa0ba902b7, false).unwrap();
        let call = CallInfo {
            request_id: None,
            trace_id: Some(trace),
            trace_parent: Some(span),
            anthropic_beta: None,
            org_id: None,
        };
        assert_eq!(
            traceparent(&call),
            Some(format!("00-{trace}-00f067aa0ba902b7-00"))
        );
    }

    #[test]
    fn without_a_span_the_provider_gets_a_sampled_child_of_the_trace() {
        let trace = TraceId::random();
        let call = CallInfo {
            request_id: None,
            trace_id: Some(trace),
            trace_parent: None,
            anthropic_beta: None,
            org_id: None,
        };
        let sent = traceparent(&call).expect("a traceparent");
        assert_eq!(TraceId::from_traceparent(sent.as_bytes()), Some(trace));
        assert!(sent.ends_with("-01"), "{sent}");
        assert_eq!(traceparent(&CallInfo::default()), None);
    }
}
