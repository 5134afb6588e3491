//! The Anthropic provider: `POST {base}/messages` (base `https://api.anthropic.com/v1` by
//! default), with the provider's key as `x-api-key` and `anthropic-version: 2023-06-01`.
//!
//! A `/v1/messages` request travels as the client sent it (the model renamed when its target
//! says so), and the answer, JSON or SSE, comes back unchanged; so does a
//! `/v1/messages/count_tokens` request, to `{base}/messages/count_tokens`. A chat completion routed here
//! is translated to a Messages request and its answer back to OpenAI's shape, streamed or not,
//! and so is a Responses API request (module `responses`).
//! As for every provider, the upstream request is built from scratch: the client's own
//! `x-api-key`, `Authorization` and `Idempotency-Key` never travel. Its `anthropic-beta`
//! does, as the features it opts into are part of what it asks for.

use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::{HeaderValue, Uri};
use http_body_util::Full;

use super::live::BuildError;
mod request;
mod response;
mod responses;
mod stream;
mod structured;

use super::translate;
use super::transport::{HttpUpstream, secret_header};
use super::{CallInfo, Provider, ProviderError, ProviderReply};
use crate::config::Secret;
use crate::request::{ApiRequest, Endpoint};

pub use request::DEFAULT_MAX_TOKENS;
/// The translations on their own, for the fuzz targets and their property twins.
#[cfg(feature = "fuzzing")]
pub(crate) use {
    request::body as request_body, response::completion, responses::Echo as ResponsesEcho,
    responses::answer::response as responses_answer,
    responses::request::body as responses_request_body,
    responses::stream::events as responses_events, stream::chunks,
};

/// The Messages API version the gateway speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Anthropic's Messages API over a pooled hyper client.
#[derive(Clone, Debug)]
pub struct AnthropicProvider {
    http: HttpUpstream,
    messages: Uri,
    count_tokens: Uri,
    api_key: Option<HeaderValue>,
}

impl AnthropicProvider {
    /// A provider calling `{base_url}/messages` with `api_key`, within `timeout`.
    pub fn new(
        base_url: &str,
        api_key: Option<Secret>,
        timeout: Duration,
    ) -> Result<AnthropicProvider, BuildError> {
        let base = base_url.trim_end_matches('/');
        let [Ok(messages), Ok(count_tokens)] = [Endpoint::Messages, Endpoint::CountTokens]
            .map(|endpoint| format!("{base}{}", endpoint.upstream_path()).parse::<Uri>())
        else {
            return Err(BuildError::BaseUrl);
        };
        let api_key_header = match &api_key {
            Some(key) => Some(secret_header(key.expose()).ok_or(BuildError::ApiKey)?),
            None => None,
        };
        Ok(AnthropicProvider {
            http: HttpUpstream::new(timeout, api_key)?,
            messages,
            count_tokens,
            api_key: api_key_header,
        })
    }

    /// Sends a Messages body to `uri`.
    async fn send(
        &self,
        uri: &Uri,
        body: Bytes,
        stream: bool,
        call: &CallInfo,
    ) -> Result<ProviderReply, ProviderError> {
        let mut builder =
            HttpUpstream::post(uri, stream, call).header("anthropic-version", ANTHROPIC_VERSION);
        if let Some(key) = &self.api_key {
            builder = builder.header("x-api-key", key.clone());
        }
        if let Some(beta) = &call.anthropic_beta {
            builder = builder.header("anthropic-beta", beta.clone());
        }
        let upstream = builder
            .body(Full::new(body))
            .map_err(|_| ProviderError::Unavailable {
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
            Endpoint::Messages => {
                self.send(&self.messages, request.raw.clone(), request.stream, call)
                    .await
            }
            Endpoint::CountTokens => {
                self.send(&self.count_tokens, request.raw.clone(), false, call)
                    .await
            }
            Endpoint::ChatCompletions => self.chat(request, call).await,
            Endpoint::Responses => self.responses(request, call).await,
            // No Messages counterpart.
            Endpoint::Embeddings => Err(ProviderError::NotConfigured),
        }
    }

    /// A chat completion by translation, both ways.
    async fn chat(
        &self,
        request: &ApiRequest,
        call: &CallInfo,
    ) -> Result<ProviderReply, ProviderError> {
        let translated = request::body(request)?;
        let created = chrono::Utc::now().timestamp();
        let output = translated.output_tool;
        let body = Bytes::from(translated.body.to_string());
        let reply = self
            .send(&self.messages, body, request.stream, call)
            .await?;
        translate::reply(
            reply,
            |message| response::completion(message, created, output.as_deref()),
            |events| stream::chunks(events, created, output.clone()),
        )
    }

    /// A Responses API request by translation, both ways.
    async fn responses(
        &self,
        request: &ApiRequest,
        call: &CallInfo,
    ) -> Result<ProviderReply, ProviderError> {
        let translated = responses::request::body(request)?;
        let created = chrono::Utc::now().timestamp();
        let echo = responses::Echo::of(request, created, translated.output_tool);
        let body = Bytes::from(translated.body.to_string());
        let reply = self
            .send(&self.messages, body, request.stream, call)
            .await?;
        translate::reply(
            reply,
            |message| responses::answer::response(message, &echo),
            |events| responses::stream::events(events, echo.clone()),
        )
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &'static str {
        "anthropic"
    }

    fn complete<'a>(
        &'a self,
        request: &'a ApiRequest,
        call: &'a CallInfo,
    ) -> BoxFuture<'a, Result<ProviderReply, ProviderError>> {
        Box::pin(self.call(request, call))
    }
}
