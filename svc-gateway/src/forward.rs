//! The provider call: a validated [`Call`] in, the provider's answer out.
//!
//! What it answers (a JSON body with the provider's status, an SSE stream, or an [`ApiError`]
//! rejection from the provider table, which the ErrorEnvelope layer further out renders from
//! the extensions) is an
//! [`Answer`]: its body knows the call's usage, read from the JSON at once or from the stream
//! as it passes, so whoever wraps the body learns the usage where the body ends.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderValue, Response, header};
use http_body::{Frame, SizeHint};
use svc_runtime::shutdown::Drain;

use crate::access_log::UpstreamFacts;
use crate::call::Call;
use crate::http_metrics::ProviderWait;
use crate::provider::{ProviderReply, Registry};
use crate::sse::SseBody;
use crate::usage::{self, Report};

/// The provider's answer to one call.
pub type Answer = Response<AnswerBody>;

/// Calls the provider registry.
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

    /// Makes `call`: the first target of its model that answers.
    pub async fn answer(&self, call: &Call) -> Answer {
        let api = &call.api;
        let waited = std::time::Instant::now();
        let reply = self.registry.complete(api, &call.info).await;
        let wait = ProviderWait(waited.elapsed());
        let mut response = match reply {
            Ok((ProviderReply::Json { status, body }, provider)) => {
                let report = match usage::from_json_with_cached(&body) {
                    Some((usage, cached_tokens)) => Report {
                        usage: Some(usage),
                        cached_tokens,
                        ..Report::answered_by(provider)
                    },
                    None => Report::answered_by(provider),
                };
                let mut response = Response::new(AnswerBody::Whole {
                    body: Some(body),
                    report,
                });
                *response.status_mut() = status;
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                response
            }
            Ok((ProviderReply::Stream { status, events }, provider)) => {
                let events = crate::deadline::until_deadline(events, &self.drain);
                // A failure is told in the protocol of the route called, whichever provider
                // answers it.
                SseBody::new(events, call.request_id.to_string(), self.docs_base.clone())
                    .endpoint(api.endpoint)
                    .outcome(call.outcome.clone())
                    .strip_usage_chunk(api.asks_usage_for_client())
                    .into_response(status)
                    .map(|sse| AnswerBody::Stream {
                        sse,
                        provider: Arc::from(provider),
                    })
            }
            Err(error) => error
                .to_api_error()
                .into_response_with(Body::empty())
                .map(|_| AnswerBody::Refused),
        };
        response.extensions_mut().insert(wait);
        if let Some(provider) = response.body().provider() {
            let status = response.status().as_u16();
            response
                .extensions_mut()
                .insert(UpstreamFacts { provider, status });
        }
        response
    }
}

/// The body of an [`Answer`], which knows the call's usage.
#[derive(Debug)]
pub enum AnswerBody {
    /// A JSON answer, whole, and its usage.
    Whole {
        /// The body, until it is sent.
        body: Option<Bytes>,
        /// The usage it reported, and its provider.
        report: Report,
    },
    /// An event stream, whose usage is read as it passes.
    Stream {
        /// The stream.
        sse: SseBody,
        /// The provider that answered.
        provider: Arc<str>,
    },
    /// No provider answered: the error the ErrorEnvelope layer renders.
    Refused,
}

impl AnswerBody {
    /// The provider that answered, if one did.
    pub fn provider(&self) -> Option<Arc<str>> {
        match self {
            AnswerBody::Whole { report, .. } => Some(Arc::from(report.provider.as_str())),
            AnswerBody::Stream { provider, .. } => Some(provider.clone()),
            AnswerBody::Refused => None,
        }
    }

    /// The call's usage so far: all of it once the body has ended.
    pub fn report(&self) -> Report {
        match self {
            AnswerBody::Whole { report, .. } => report.clone(),
            AnswerBody::Stream { sse, provider } => Report {
                provider: provider.to_string(),
                ..sse.report()
            },
            AnswerBody::Refused => Report::default(),
        }
    }
}

impl http_body::Body for AnswerBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            AnswerBody::Whole { body, .. } => Poll::Ready(body.take().map(|b| Ok(Frame::data(b)))),
            AnswerBody::Stream { sse, .. } => Pin::new(sse).poll_frame(cx),
            AnswerBody::Refused => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            AnswerBody::Whole { body, .. } => body.is_none(),
            AnswerBody::Stream { sse, .. } => sse.is_end_stream(),
            AnswerBody::Refused => true,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            AnswerBody::Whole { body, .. } => {
                SizeHint::with_exact(body.as_ref().map_or(0, |b| b.len() as u64))
            }
            AnswerBody::Stream { sse, .. } => sse.size_hint(),
            AnswerBody::Refused => SizeHint::with_exact(0),
        }
    }
}
