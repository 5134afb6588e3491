//! The innermost service: a validated request in, the provider's answer out.
//!
//! It sits under the Idempotency layer, so what it answers is what a replay repeats: a JSON
//! body with the provider's status, an SSE stream, or an [`ApiError`] rejection from the
//! provider table (rendered by the ErrorEnvelope layer further out).

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use futures_util::future::BoxFuture;
use http::{HeaderValue, Request, Response, header};
use svc_runtime::shutdown::Drain;
use svc_tower::error::{ApiError, ErrorCode};
use svc_tower::request_id::{RequestId, TraceId};
use svc_tower::trace_context::TraceParent;
use tower::Service;

use crate::access_log::{StreamOutcome, UpstreamFacts};
use crate::http_metrics::ProviderWait;
use crate::provider::{CallInfo, ProviderReply, Registry};
use crate::request::ApiRequest;
use crate::sse::SseBody;
use crate::usage::{self, Report, UsageReporter};

/// Calls the provider registry with the [`ApiRequest`] the handler put in the request
/// extensions (as an `Arc<ApiRequest>`), and reports the call's usage through the
/// [`UsageReporter`] beside it, once the answer is complete.
#[derive(Clone, Debug)]
pub struct Forward {
    registry: Registry,
    docs_base: Option<Arc<str>>,
    drain: Drain,
}

impl Forward {
    /// Forwards to `registry`; stream errors carry `docs_url` under `docs_base`.
    pub fn new(registry: Registry, docs_base: Option<String>) -> Forward {
        Forward {
            registry,
            docs_base: docs_base.map(Arc::from),
            drain: Drain::new(),
        }
    }

    /// Ends the streams still open when `drain` reaches its deadline.
    pub fn drain(mut self, drain: Drain) -> Forward {
        self.drain = drain;
        self
    }
}

impl<B> Service<Request<B>> for Forward {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let chat = request.extensions().get::<Arc<ApiRequest>>().cloned();
        let reporter = request.extensions().get::<UsageReporter>().cloned();
        let request_id = request
            .extensions()
            .get::<RequestId>()
            .copied()
            .unwrap_or_else(RequestId::new_v7);
        let trace_id = request.extensions().get::<TraceId>().copied();
        // The request span's id and sampling decision, when trace export put them there.
        let trace_parent = request.extensions().get::<TraceParent>().copied();
        let anthropic_beta = request.headers().get("anthropic-beta").cloned();
        let outcome = request.extensions().get::<StreamOutcome>().cloned();
        let org_id = request
            .extensions()
            .get::<svc_tower::context::OrgContext>()
            .map(|org| org.org_id);
        let registry = self.registry.clone();
        let docs_base = self.docs_base.clone();
        let drain = self.drain.clone();
        Box::pin(async move {
            let Some(chat) = chat else {
                tracing::error!("forward service called without a validated request");
                return Ok(
                    ApiError::new(ErrorCode::InternalError).into_response_with(Body::empty())
                );
            };
            let call = CallInfo {
                request_id: Some(request_id.to_string()),
                trace_id,
                trace_parent,
                anthropic_beta,
                org_id,
            };
            let waited = std::time::Instant::now();
            let reply = registry.complete(&chat, &call).await;
            let wait = ProviderWait(waited.elapsed());
            let (reply, reporter, provider) = match reply {
                Ok((reply, provider)) => (
                    Ok(reply),
                    reporter.map(|r| r.for_provider(provider)),
                    Some(Arc::<str>::from(provider)),
                ),
                Err(error) => (Err(error), reporter, None),
            };
            let mut response = match reply {
                Ok(ProviderReply::Json { status, body }) => {
                    if let Some(reporter) = &reporter {
                        let (usage, cached_tokens) = match usage::from_json_with_cached(&body) {
                            Some((usage, cached)) => (Some(usage), cached),
                            None => (None, 0),
                        };
                        reporter.report(Report {
                            usage,
                            cached_tokens,
                            ..Report::default()
                        });
                    }
                    let mut response = Response::new(Body::from(body));
                    *response.status_mut() = status;
                    response.headers_mut().insert(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    );
                    response
                }
                Ok(ProviderReply::Stream { status, events }) => {
                    let events = crate::deadline::until_deadline(events, &drain);
                    // A failure is told in the protocol of the route called, whichever provider
                    // answers it.
                    SseBody::new(events, request_id.to_string(), docs_base)
                        .endpoint(chat.endpoint)
                        .outcome(outcome)
                        .report_usage(reporter, chat.asks_usage_for_client())
                        .into_response(status)
                        .map(Body::new)
                }
                Err(error) => {
                    if let Some(reporter) = &reporter {
                        reporter.report(Report::default());
                    }
                    error.to_api_error().into_response_with(Body::empty())
                }
            };
            response.extensions_mut().insert(wait);
            if let Some(provider) = provider {
                let status = response.status().as_u16();
                response
                    .extensions_mut()
                    .insert(UpstreamFacts { provider, status });
            }
            Ok(response)
        })
    }
}
