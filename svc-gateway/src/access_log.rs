//! The access log: one line per request at INFO, refusals included.
//!
//! Each line carries the method, the route (the matched template, never the raw path;
//! `unmatched` for a path no route serves), the status, the envelope's `code` when the answer
//! is an error envelope, the duration, the request id, and where known the org, agent and
//! token id, the model, the provider and its status. It never carries a token, a secret or
//! message content. `SVC_ACCESS_LOG=false` turns it off.
//!
//! # Where it goes
//!
//! In the router's own stack, right inside the error envelope: every answer passes through it,
//! the auth, rate-limit and body-limit layers' refusals and the 404 fallback included, and a
//! rejection's [`ApiError`] (its code) is still in the response extensions. What only deeper
//! code knows comes back the same way, as small typed facts in the response extensions:
//!
//! - [`Identity`], right inside token authentication and again right inside the agent check,
//!   copies the request's [`OrgContext`] (org, token id, and the agent once checked) onto its
//!   answer, so a refusal after authentication names its org;
//! - the provider-backed handler adds a [`CallFacts`] (model, stream, message count);
//! - the provider call adds an [`UpstreamFacts`] (the provider that answered and its status).
//!
//! A stream that breaks after its head went out keeps its status; its line also names the
//! code the stream ended with (`stream_error`). That one is learned after the answer left this
//! layer, so it comes back through a [`StreamOutcome`] this layer puts in the request
//! extensions: written once by the stream's body, read when the line is written.
//!
//! The line is written when the answer's body ends (or is dropped, the client gone), so a
//! stream's duration is the whole stream's. A request whose answer never came back (the
//! client left first) is logged with status 499; one that panicked, with 500 and
//! `INTERNAL_ERROR`, as the envelope answers it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};
use std::time::Instant;

use axum::extract::MatchedPath;
use bytes::Buf;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use svc_tower::context::OrgContext;
use svc_tower::error::{ApiError, ErrorCode};
use svc_tower::request_id::RequestId;
use tower::{Layer, Service};

use crate::carry::{Carried, Carry};
use crate::http_metrics::bounded_method;
use crate::request::ApiRequest;

/// The route logged for a path no route serves.
pub const UNMATCHED: &str = "unmatched";
/// The status logged for a request whose answer never came back: the client left first.
pub const CLIENT_CLOSED: u16 = 499;

/// What the provider-backed handler learned of a call: in its answer's extensions.
#[derive(Debug, Clone)]
pub struct CallFacts {
    /// The requested model.
    pub model: String,
    /// Whether the answer streams.
    pub stream: bool,
    /// Messages, input items or inputs in the request.
    pub message_count: usize,
}

impl CallFacts {
    /// The facts of a validated request.
    pub fn of(request: &ApiRequest) -> CallFacts {
        CallFacts {
            model: request.model.clone(),
            stream: request.stream,
            message_count: request.message_count,
        }
    }
}

/// What the provider call learned: in the extensions of an answer a provider gave.
#[derive(Debug, Clone)]
pub struct UpstreamFacts {
    /// The provider (target) that answered.
    pub provider: Arc<str>,
    /// Its status.
    pub status: u16,
}

/// Where a streamed answer tells the access log the code it failed with, if it did: in the
/// request extensions, put there by [`AccessLog`] and written once by the stream's body.
#[derive(Debug, Clone, Default)]
pub struct StreamOutcome(Arc<OnceLock<String>>);

impl StreamOutcome {
    /// The stream ended with `code`; only the first failure is kept.
    pub fn failed(&self, code: &str) {
        let _ = self.0.set(code.to_owned());
    }

    /// The code the stream ended with, if it failed.
    fn code(&self) -> Option<&str> {
        self.0.get().map(String::as_str)
    }
}

/// Applies [`Identity`]: copies the request's [`OrgContext`] onto its answer. It sits right
/// inside token authentication (so a refusal of the agent names the org) and right inside the
/// agent check (which adds the agent to the context).
#[derive(Debug, Clone, Copy, Default)]
pub struct IdentityLayer;

impl<S> Layer<S> for IdentityLayer {
    type Service = Carry<S, IdentityLayer>;

    fn layer(&self, inner: S) -> Carry<S, IdentityLayer> {
        Carry::new(inner, *self)
    }
}

/// Copies the request's [`OrgContext`] onto its answer, for the access log.
pub type Identity<S> = Carry<S, IdentityLayer>;

impl Carried for IdentityLayer {
    type Value = Option<OrgContext>;

    fn take<B>(&self, request: &mut Request<B>) -> Option<OrgContext> {
        request.extensions().get::<OrgContext>().cloned()
    }

    fn give<B>(org: Option<OrgContext>, response: &mut Response<B>) {
        // An Identity further in saw more (the agent AgentCheck verified): it stays.
        if let Some(org) = org
            && response.extensions().get::<OrgContext>().is_none()
        {
            response.extensions_mut().insert(org);
        }
    }
}

/// Applies [`AccessLog`]; see the [module docs](self).
#[derive(Debug, Clone, Copy)]
pub struct AccessLogLayer {
    enabled: bool,
}

impl AccessLogLayer {
    /// Logs every request when `enabled`, none otherwise.
    pub fn new(enabled: bool) -> AccessLogLayer {
        AccessLogLayer { enabled }
    }
}

impl<S> Layer<S> for AccessLogLayer {
    type Service = AccessLog<S>;

    fn layer(&self, inner: S) -> AccessLog<S> {
        AccessLog {
            inner,
            enabled: self.enabled,
        }
    }
}

/// Writes one line per request; see the [module docs](self).
#[derive(Debug, Clone)]
pub struct AccessLog<S> {
    inner: S,
    enabled: bool,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for AccessLog<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<AccessBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> Self::Future {
        let line = self.enabled.then(|| {
            let line = Line::start(&request);
            request.extensions_mut().insert(line.stream.clone());
            line
        });
        ResponseFuture {
            inner: self.inner.call(request),
            line,
        }
    }
}

pin_project! {
    /// The answer of [`AccessLog`]: the inner answer, its body carrying the line.
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        line: Option<Line>,
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<AccessBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let guard = OnPanic(this.line);
        let response = ready!(this.inner.poll(cx))?;
        let mut line = guard.0.take();
        if let Some(line) = &mut line {
            line.answered(&response);
        }
        Poll::Ready(Ok(response.map(|inner| AccessBody { inner, line })))
    }
}

/// Marks the line of a request whose handler panics while polled: the envelope outside
/// answers 500.
struct OnPanic<'a>(&'a mut Option<Line>);

impl Drop for OnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Some(line) = self.0.as_mut()
        {
            line.answer = Some(Answer::panicked());
        }
    }
}

pin_project! {
    /// The answer's body, unchanged; the line is written when it ends or is dropped.
    pub struct AccessBody<B> {
        #[pin]
        inner: B,
        line: Option<Line>,
    }
}

impl<B> Body for AccessBody<B>
where
    B: Body,
    B::Data: Buf,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.project();
        let frame = ready!(this.inner.poll_frame(cx));
        if frame.is_none() {
            // The end: written now rather than when the connection lets the body go.
            this.line.take();
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// One request's line, written when dropped.
struct Line {
    method: &'static str,
    route: String,
    request_id: Option<RequestId>,
    started: Instant,
    answer: Option<Answer>,
    stream: StreamOutcome,
}

/// What the answer told.
#[derive(Default)]
struct Answer {
    status: u16,
    code: Option<String>,
    org: Option<OrgContext>,
    call: Option<CallFacts>,
    upstream: Option<UpstreamFacts>,
}

impl Answer {
    /// What the envelope answers a panic with.
    fn panicked() -> Answer {
        Answer {
            status: 500,
            code: Some(ErrorCode::InternalError.as_str().to_owned()),
            ..Answer::default()
        }
    }
}

impl Line {
    fn start<B>(request: &Request<B>) -> Line {
        let extensions = request.extensions();
        Line {
            method: bounded_method(request.method()),
            route: extensions
                .get::<MatchedPath>()
                .map_or(UNMATCHED, MatchedPath::as_str)
                .to_owned(),
            request_id: extensions.get::<RequestId>().copied(),
            started: Instant::now(),
            answer: None,
            stream: StreamOutcome::default(),
        }
    }

    fn answered<B>(&mut self, response: &Response<B>) {
        let extensions = response.extensions();
        self.answer = Some(Answer {
            status: response.status().as_u16(),
            code: extensions
                .get::<ApiError>()
                .map(|error| error.code().as_str().to_owned()),
            org: extensions.get::<OrgContext>().cloned(),
            call: extensions.get::<CallFacts>().cloned(),
            upstream: extensions.get::<UpstreamFacts>().cloned(),
        });
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        let answer = self
            .answer
            .take()
            .unwrap_or_else(|| match std::thread::panicking() {
                // A panic in the handler's `call`, unwinding through here.
                true => Answer::panicked(),
                false => Answer {
                    status: CLIENT_CLOSED,
                    ..Answer::default()
                },
            });
        let org = answer.org.as_ref();
        let call = answer.call.as_ref();
        let upstream = answer.upstream.as_ref();
        tracing::info!(
            method = self.method,
            route = %self.route,
            status = answer.status,
            code = answer.code.as_deref(),
            stream_error = self.stream.code(),
            duration_ms = self.started.elapsed().as_secs_f64() * 1000.0,
            request_id = self.request_id.map(tracing::field::display),
            org_id = org.map(|o| tracing::field::display(o.org_id)),
            agent_id = org.and_then(|o| o.agent_id).map(tracing::field::display),
            token_id = org.map(|o| tracing::field::display(o.token_id)),
            model = call.map(|c| c.model.as_str()),
            stream = call.map(|c| c.stream),
            message_count = call.map(|c| c.message_count),
            provider = upstream.map(|u| &*u.provider),
            upstream_status = upstream.map(|u| u.status),
            "access"
        );
    }
}
