//! The HTTP side every remote provider shares: one pooled hyper client, the deadline rules,
//! and the reading of an answer into a [`ProviderReply`] or a [`ProviderError`].
//!
//! One pooled hyper client per provider, over rustls (webpki roots) or plain HTTP (for a
//! provider on loopback), with TCP_NODELAY. The provider's timeout bounds the response head
//! and the whole body of a JSON answer; for a stream it bounds the head and then each gap
//! between chunks, so a long answer that keeps flowing is never cut.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{ACCEPT, CONTENT_TYPE, USER_AGENT};
use http::{HeaderMap, HeaderValue, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use svc_tower::trace_context::{TRACEPARENT, TraceParent};
use tokio::time::Instant;

use super::{CallInfo, EventStream, ProviderError, ProviderReply};
use super::{retry_after_seconds, sanitized_detail};
use crate::config::Secret;

/// The largest JSON answer read from a provider.
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;
/// The largest error body read from a provider (only its message is kept).
pub const MAX_ERROR_BYTES: usize = 64 * 1024;
/// Connection setup never waits longer than this, whatever the call deadline.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

const GATEWAY_USER_AGENT: &str = concat!("svc-gateway/", env!("CARGO_PKG_VERSION"));

/// A header value that carries a key: kept out of hpack tables and out of any header debug
/// output. `None` when the key cannot travel in a header.
pub(crate) fn secret_header(value: &str) -> Option<HeaderValue> {
    let mut value = HeaderValue::from_str(value).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// rustls refused its own defaults.
#[derive(Debug, thiserror::Error)]
#[error("provider TLS setup failed")]
pub struct TlsError(#[source] rustls::Error);

/// A pooled client and the deadline of one call.
#[derive(Clone)]
pub(crate) struct HttpUpstream {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    timeout: Duration,
    /// Redacted from any error detail passed to a client.
    api_key: Option<Secret>,
}

impl std::fmt::Debug for HttpUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpUpstream")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// One pooled client over rustls (webpki roots) or plain HTTP, with TCP_NODELAY.
pub(crate) fn pooled_client(
    connect_timeout: Duration,
) -> Result<Client<HttpsConnector<HttpConnector>, Full<Bytes>>, TlsError> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect_timeout));
    http.set_keepalive(Some(Duration::from_secs(60)));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
        .map_err(TlsError)?
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .build(https))
}

impl HttpUpstream {
    pub(crate) fn new(
        timeout: Duration,
        api_key: Option<Secret>,
    ) -> Result<HttpUpstream, TlsError> {
        let client = pooled_client(timeout.min(CONNECT_TIMEOUT))?;
        Ok(HttpUpstream {
            client,
            timeout,
            api_key,
        })
    }

    /// A POST to `uri` with the gateway's own headers: JSON in, JSON or SSE out, our user
    /// agent, the request id and a `traceparent` in the request's trace.
    pub(crate) fn post(uri: &Uri, stream: bool, call: &CallInfo) -> http::request::Builder {
        let accept = if stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        let mut builder = Request::post(uri.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, accept)
            .header(USER_AGENT, GATEWAY_USER_AGENT);
        if let Some(id) = call.request_id.as_deref() {
            builder = builder.header("x-request-id", id);
        }
        let parent = call
            .trace_parent
            .or_else(|| call.trace_id.map(TraceParent::child_of));
        if let Some(parent) = parent {
            builder = builder.header(&TRACEPARENT, parent.header_value());
        }
        builder
    }

    /// Sends `upstream` and reads the answer: a stream when `stream` and the provider
    /// streams, else a whole JSON body; a failure from the provider table otherwise.
    pub(crate) async fn send(
        &self,
        upstream: Request<Full<Bytes>>,
        stream: bool,
    ) -> Result<ProviderReply, ProviderError> {
        let deadline = Instant::now() + self.timeout;
        let response = match tokio::time::timeout_at(deadline, self.client.request(upstream)).await
        {
            Err(_) => return Err(ProviderError::Timeout),
            Ok(Err(error)) => {
                tracing::warn!(error = %error, "provider request failed");
                return Err(ProviderError::Unavailable {
                    reason: ProviderError::UNREACHABLE,
                });
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            if stream && is_event_stream(response.headers()) {
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
                    reason: ProviderError::MID_BODY,
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
