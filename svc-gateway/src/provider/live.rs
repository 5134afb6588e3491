//! The live provider: any OpenAI-compatible API, `POST {base}/chat/completions`,
//! `{base}/embeddings` and `{base}/responses`.
//!
//! The upstream request is built from scratch: the client's body as received (see
//! [`ApiRequest::upstream_body`] for the one field the gateway may add), our own headers
//! and the provider key as `Authorization: Bearer`. Nothing else of the client's request
//! travels, so the client's `Authorization` and `Idempotency-Key` can never leak upstream.
//! `X-Request-ID` and a W3C `traceparent` in the request's trace go along, so the provider's
//! records correlate with the client's `X-Request-ID` and `X-Trace-ID`. With trace export on,
//! the `traceparent` names the gateway's request span and its sampling decision; without, it
//! is a fresh sampled parent id per call.
//!
//! One pooled hyper client serves every call, over rustls (webpki roots) or plain HTTP (for a
//! provider on loopback), with TCP_NODELAY. `SVC_PROVIDER_TIMEOUT` bounds the response head
//! and the whole body of a JSON answer; for a stream it bounds the head and then each gap
//! between chunks, so a long answer that keeps flowing is never cut.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::future::BoxFuture;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use http::{HeaderMap, HeaderValue, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use svc_tower::trace_context::{TRACEPARENT, TraceParent};
use tokio::time::Instant;

use super::{CallInfo, EventStream, Provider, ProviderError, ProviderReply};
use super::{retry_after_seconds, sanitized_detail};
use crate::config::{ProviderConfig, Secret};
use crate::request::{ApiRequest, Endpoint};

/// The largest JSON answer read from a provider.
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;
/// The largest error body read from a provider (only its message is kept).
pub const MAX_ERROR_BYTES: usize = 64 * 1024;
/// Connection setup never waits longer than this, whatever the call deadline.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

const GATEWAY_USER_AGENT: &str = concat!("svc-gateway/", env!("CARGO_PKG_VERSION"));

/// Why the live provider could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The base URL does not form a valid endpoint.
    #[error("SVC_PROVIDER_BASE_URL: not a valid base URL")]
    BaseUrl,
    /// The key cannot travel in a header.
    #[error("SVC_PROVIDER_API_KEY: not a valid header value")]
    ApiKey,
    /// rustls refused its own defaults.
    #[error("provider TLS setup failed")]
    Tls(#[source] rustls::Error),
}

/// An OpenAI-compatible provider over a pooled hyper client.
#[derive(Clone)]
pub struct LiveProvider {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// One URI per [`Endpoint`], in [`Endpoint::ALL`] order.
    endpoints: [Uri; 3],
    authorization: Option<HeaderValue>,
    api_key: Option<Secret>,
    timeout: Duration,
}

impl std::fmt::Debug for LiveProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveProvider")
            .field("endpoints", &self.endpoints)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
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
        let [Ok(chat), Ok(embeddings), Ok(responses)] = Endpoint::ALL
            .map(|endpoint| format!("{base}{}", endpoint.upstream_path()).parse::<Uri>())
        else {
            return Err(BuildError::BaseUrl);
        };
        let endpoints = [chat, embeddings, responses];
        let authorization = match &api_key {
            Some(key) => {
                let mut value = HeaderValue::from_str(&format!("Bearer {}", key.expose()))
                    .map_err(|_| BuildError::ApiKey)?;
                // Keeps the key out of hpack tables and out of any header debug output.
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(timeout.min(CONNECT_TIMEOUT)));
        http.set_keepalive(Some(Duration::from_secs(60)));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .map_err(BuildError::Tls)?
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .build(https);
        Ok(LiveProvider {
            client,
            endpoints,
            authorization,
            api_key,
            timeout,
        })
    }

    fn upstream_request(
        &self,
        request: &ApiRequest,
        call: &CallInfo,
    ) -> Option<Request<Full<Bytes>>> {
        let accept = if request.stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        let endpoint = self.endpoints.get(request.endpoint.index())?;
        let mut builder = Request::post(endpoint.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, accept)
            .header(USER_AGENT, GATEWAY_USER_AGENT);
        if let Some(authorization) = &self.authorization {
            builder = builder.header(AUTHORIZATION, authorization.clone());
        }
        if let Some(id) = call.request_id.as_deref() {
            builder = builder.header("x-request-id", id);
        }
        let parent = call
            .trace_parent
            .or_else(|| call.trace_id.map(TraceParent::child_of));
        if let Some(parent) = parent {
            builder = builder.header(&TRACEPARENT, parent.header_value());
        }
        builder.body(Full::new(request.upstream_body())).ok()
    }

    async fn call(
        &self,
        request: &ApiRequest,
        call: &CallInfo,
    ) -> Result<ProviderReply, ProviderError> {
        let deadline = Instant::now() + self.timeout;
        let upstream = self
            .upstream_request(request, call)
            .ok_or(ProviderError::Unavailable {
                reason: "could not build the provider request",
            })?;
        let response = match tokio::time::timeout_at(deadline, self.client.request(upstream)).await
        {
            Err(_) => return Err(ProviderError::Timeout),
            Ok(Err(error)) => {
                tracing::warn!(error = %error, "provider request failed");
                return Err(ProviderError::Unavailable {
                    reason: "provider unreachable",
                });
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            if request.stream && is_event_stream(response.headers()) {
                return Ok(ProviderReply::Stream {
                    status,
                    events: events(response.into_body(), self.timeout),
                });
            }
            let body = read_body(response.into_body(), MAX_RESPONSE_BYTES, deadline).await?;
            if serde_json::from_slice::<serde::de::IgnoredAny>(&body).is_err() {
                return Err(ProviderError::Unavailable {
                    reason: "provider answered with a body that is not JSON",
                });
            }
            return Ok(ProviderReply::Json { status, body });
        }
        let retry_after = retry_after_seconds(response.headers());
        let detail = if matches!(status.as_u16(), 400 | 409 | 413 | 422) {
            read_body(response.into_body(), MAX_ERROR_BYTES, deadline)
                .await
                .ok()
                .and_then(|body| sanitized_detail(&body, self.api_key.as_ref().map(Secret::expose)))
        } else {
            None
        };
        let error = ProviderError::from_status(status, retry_after, detail);
        tracing::warn!(status = status.as_u16(), error = %error, "provider answered with an error");
        Err(error)
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

fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        })
}

/// Reads a whole body, refusing more than `limit` bytes or a body still arriving at `deadline`.
async fn read_body(
    mut body: Incoming,
    limit: usize,
    deadline: Instant,
) -> Result<Bytes, ProviderError> {
    let mut buf = BytesMut::new();
    loop {
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(ProviderError::Timeout),
            Ok(None) => return Ok(buf.freeze()),
            Ok(Some(Err(_))) => {
                return Err(ProviderError::Unavailable {
                    reason: "provider connection failed mid-body",
                });
            }
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    if buf.len() + data.len() > limit {
                        return Err(ProviderError::Unavailable {
                            reason: "provider answer too large",
                        });
                    }
                    buf.extend_from_slice(&data);
                }
            }
        }
    }
}

/// The upstream body as a stream of frames, each yielded as it arrives. Dropping the stream
/// drops the body, which closes the upstream connection: a client that goes away cancels the
/// provider call.
fn events(body: Incoming, idle: Duration) -> EventStream {
    Box::pin(futures_util::stream::unfold(
        Some(body),
        move |state| async move {
            let mut body = state?;
            loop {
                match tokio::time::timeout(idle, body.frame()).await {
                    Err(_) => return Some((Err(ProviderError::Timeout), None)),
                    Ok(None) => return None,
                    Ok(Some(Err(_))) => {
                        let err = ProviderError::Unavailable {
                            reason: "provider stream failed",
                        };
                        return Some((Err(err), None));
                    }
                    Ok(Some(Ok(frame))) => match frame.into_data() {
                        Ok(data) if !data.is_empty() => return Some((Ok(data), Some(body))),
                        _ => continue,
                    },
                }
            }
        },
    ))
}

#[cfg(test)]
mod tests {
    use svc_tower::request_id::TraceId;

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
    fn the_request_span_is_the_providers_parent_with_its_decision() {
        let trace = TraceId::random();
        let span = TraceParent::new(trace, 0x00f067aa0ba902b7, false).unwrap();
        let call = CallInfo {
            request_id: None,
            trace_id: Some(trace),
            trace_parent: Some(span),
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
        };
        let sent = traceparent(&call).expect("a traceparent");
        assert_eq!(TraceId::from_traceparent(sent.as_bytes()), Some(trace));
        assert!(sent.ends_with("-01"), "{sent}");
        assert_eq!(traceparent(&CallInfo::default()), None);
    }
}
