//! Gives every request a request id and a trace id, and every response `X-Request-ID`,
//! `X-Trace-ID` and `X-Response-Time`.
//!
//! ```
//! use std::convert::Infallible;
//! use http::{Request, Response};
//! use svc_tower::request_id::{RequestId, RequestIdLayer};
//! use tower::{Layer, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let svc = RequestIdLayer::new().layer(service_fn(|req: Request<()>| async move {
//!     // Handlers (and the error envelope) read the id from the extensions.
//!     let id = req.extensions().get::<RequestId>().copied().unwrap();
//!     Ok::<_, Infallible>(Response::new(id.to_string()))
//! }));
//! let request = Request::builder()
//!     .header("x-request-id", "0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b")
//!     .header("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
//!     .body(())
//!     .unwrap();
//! let response = svc.oneshot(request).await.unwrap();
//! assert_eq!(response.headers()["x-request-id"], "0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b");
//! assert_eq!(response.body(), "0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b");
//! assert_eq!(response.headers()["x-trace-id"], "4bf92f3577b34da6a3ce929d0e0e4736");
//! assert!(response.headers()["x-response-time"].to_str().unwrap().parse::<u64>().is_ok());
//! # }
//! ```
//!
//! # The ids
//!
//! An inbound request id is kept when it is a UUID (in its hyphenated form, any version but
//! nil); anything else is replaced by a fresh UUID v7, so a caller cannot inject arbitrary text
//! into logs and envelopes. The id is echoed lower-case. The trace id is the 32-hex trace id of
//! a valid W3C `traceparent` header, else a fresh random one.
//!
//! `X-Response-Time` is the time from this layer receiving the request to the inner service
//! producing response headers, in whole milliseconds (`"0"`, `"12"`): a plain integer parses
//! everywhere a duration in milliseconds is expected. For a streamed body it measures time to
//! first byte, not the stream.
//!
//! # Where it goes
//!
//! Outermost. Every layer inside it, [`ErrorEnvelope`](crate::envelope::ErrorEnvelope) first,
//! can then read [`RequestId`] and [`TraceId`] from the request extensions, and every response,
//! errors included, leaves with the three headers.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use http::{HeaderMap, HeaderName, HeaderValue, Request, Response};
use pin_project_lite::pin_project;
use tower::{Layer, Service};
use uuid::Uuid;

use svc_core::trace::TRACEPARENT;
pub use svc_core::trace::TraceId;

/// `X-Request-ID`, the default request id header.
pub(crate) static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// `X-Trace-ID`, the default trace id header.
pub(crate) static X_TRACE_ID: HeaderName = HeaderName::from_static("x-trace-id");
/// `X-Response-Time`, in milliseconds.
pub(crate) static X_RESPONSE_TIME: HeaderName = HeaderName::from_static("x-response-time");

/// The id of one request, in the request extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestId(Uuid);

impl RequestId {
    /// A fresh UUID v7 id: time-ordered, so ids sort by arrival in logs and indexes. Drawn
    /// from a per-thread generator ([`svc_core::id`]), not a `getrandom` call per request.
    pub fn new_v7() -> RequestId {
        RequestId(svc_core::id::uuid_v7())
    }

    /// Accepts a header value when it is a hyphenated, non-nil UUID.
    pub fn parse(value: &[u8]) -> Option<RequestId> {
        if value.len() != 36 {
            return None;
        }
        let uuid = Uuid::try_parse_ascii(value).ok()?;
        (!uuid.is_nil()).then_some(RequestId(uuid))
    }

    /// The id as a UUID.
    pub fn uuid(self) -> Uuid {
        self.0
    }

    /// The id as a header value (hyphenated, lower-case).
    pub fn header_value(self) -> HeaderValue {
        let mut buf = Uuid::encode_buffer();
        let text = self.0.hyphenated().encode_lower(&mut buf);
        // A hyphenated UUID is visible ASCII.
        HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static(""))
    }
}

impl From<Uuid> for RequestId {
    fn from(uuid: Uuid) -> RequestId {
        RequestId(uuid)
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.hyphenated(), f)
    }
}

/// Applies [`RequestIdService`]; see the [module docs](self).
#[derive(Debug, Clone)]
pub struct RequestIdLayer {
    request_id_header: HeaderName,
    trace_id_header: HeaderName,
}

impl RequestIdLayer {
    /// The layer with the default header names, `X-Request-ID` and `X-Trace-ID`.
    pub fn new() -> RequestIdLayer {
        RequestIdLayer {
            request_id_header: X_REQUEST_ID.clone(),
            trace_id_header: X_TRACE_ID.clone(),
        }
    }

    /// Renames the request id header, read on the request and written on the response.
    pub fn request_id_header(mut self, name: HeaderName) -> RequestIdLayer {
        self.request_id_header = name;
        self
    }

    /// Renames the trace id response header.
    pub fn trace_id_header(mut self, name: HeaderName) -> RequestIdLayer {
        self.trace_id_header = name;
        self
    }
}

impl Default for RequestIdLayer {
    fn default() -> RequestIdLayer {
        RequestIdLayer::new()
    }
}

impl<S> Layer<S> for RequestIdLayer {
    type Service = RequestIdService<S>;

    fn layer(&self, inner: S) -> RequestIdService<S> {
        RequestIdService {
            inner,
            layer: self.clone(),
        }
    }
}

/// Assigns the ids and sets the response headers; see the [module docs](self).
#[derive(Debug, Clone)]
pub struct RequestIdService<S> {
    inner: S,
    layer: RequestIdLayer,
}

impl<S> RequestIdService<S> {
    /// A [`RequestIdLayer`] with the default header names.
    pub fn layer() -> RequestIdLayer {
        RequestIdLayer::new()
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RequestIdService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<ReqBody>) -> Self::Future {
        let started = Instant::now();
        let headers = req.headers();
        let request_id = single(headers, &self.layer.request_id_header)
            .and_then(|v| RequestId::parse(v.as_bytes()))
            .unwrap_or_else(RequestId::new_v7);
        let trace_id = single(headers, &TRACEPARENT)
            .and_then(|v| TraceId::from_traceparent(v.as_bytes()))
            .unwrap_or_else(TraceId::random);
        let request_id_value = request_id.header_value();
        // Whatever the caller sent, handlers forwarding the header see the id we answer with.
        req.headers_mut().insert(
            self.layer.request_id_header.clone(),
            request_id_value.clone(),
        );
        req.extensions_mut().insert(request_id);
        req.extensions_mut().insert(trace_id);
        ResponseFuture {
            inner: self.inner.call(req),
            started,
            request_id: (self.layer.request_id_header.clone(), request_id_value),
            trace_id: (self.layer.trace_id_header.clone(), trace_id.header_value()),
        }
    }
}

/// The one value of a header; a repeated header counts as absent.
fn single<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a HeaderValue> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    values.next().is_none().then_some(first)
}

pin_project! {
    /// Response future of [`RequestIdService`].
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        started: Instant,
        request_id: (HeaderName, HeaderValue),
        trace_id: (HeaderName, HeaderValue),
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut response = match this.inner.poll(cx) {
            Poll::Ready(Ok(response)) => response,
            other => return other,
        };
        let elapsed_ms = u64::try_from(this.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let headers = response.headers_mut();
        let (name, value) = this.request_id;
        headers.insert(name.clone(), value.clone());
        let (name, value) = this.trace_id;
        headers.insert(name.clone(), value.clone());
        headers.insert(X_RESPONSE_TIME.clone(), HeaderValue::from(elapsed_ms));
        Poll::Ready(Ok(response))
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use http::StatusCode;
    use tower::{ServiceExt, service_fn};

    use super::*;

    /// Echoes the ids it saw in the extensions and the request id header.
    async fn echo(req: Request<()>) -> Result<Response<String>, Infallible> {
        let id = req.extensions().get::<RequestId>().copied();
        let trace = req.extensions().get::<TraceId>().copied();
        let header = req.headers().get("x-request-id").cloned();
        let body = format!("{id:?}|{trace:?}|{header:?}");
        Ok(Response::new(body))
    }

    async fn send(layer: RequestIdLayer, req: Request<()>) -> Response<String> {
        layer.layer(service_fn(echo)).oneshot(req).await.unwrap()
    }

    fn header<'a>(response: &'a Response<String>, name: &str) -> &'a str {
        response.headers()[name].to_str().unwrap()
    }

    #[tokio::test]
    async fn mints_a_v7_id_when_none_is_sent() {
        let response = send(RequestIdLayer::new(), Request::new(())).await;
        let id = Uuid::parse_str(header(&response, "x-request-id")).unwrap();
        assert_eq!(id.get_version_num(), 7);
        assert!(response.body().contains(&format!("{id:?}")));
    }

    #[tokio::test]
    async fn keeps_an_inbound_uuid_and_echoes_it_lower_case() {
        let inbound = "6F9619FF-8B86-D011-B42D-00C04FC964FF";
        let req = Request::builder()
            .header("x-request-id", inbound)
            .body(())
            .unwrap();
        let response = send(RequestIdLayer::new(), req).await;
        assert_eq!(
            header(&response, "x-request-id"),
            inbound.to_ascii_lowercase()
        );
    }

    #[tokio::test]
    async fn replaces_an_inbound_id_that_is_not_a_uuid() {
        for bad in [
            "hello",
            "00000000-0000-0000-0000-000000000000",
            "6f9619ff8b86d011b42d00c04fc964ff",
        ] {
            let req = Request::builder()
                .header("x-request-id", bad)
                .body(())
                .unwrap();
            let response = send(RequestIdLayer::new(), req).await;
            let id = header(&response, "x-request-id");
            assert_ne!(id, bad);
            assert_eq!(Uuid::parse_str(id).unwrap().get_version_num(), 7);
            // The inner service sees the replacement, never the caller's text.
            assert!(!response.body().contains(bad), "{bad}");
        }
    }

    #[tokio::test]
    async fn takes_the_trace_id_from_traceparent() {
        let req = Request::builder()
            .header(
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            )
            .body(())
            .unwrap();
        let response = send(RequestIdLayer::new(), req).await;
        assert_eq!(
            header(&response, "x-trace-id"),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
    }

    #[test]
    fn rejects_invalid_traceparents() {
        let invalid = [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "garbage",
        ];
        for value in invalid {
            assert_eq!(TraceId::from_traceparent(value.as_bytes()), None, "{value}");
        }
        let future_version = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra";
        assert!(TraceId::from_traceparent(future_version.as_bytes()).is_some());
    }

    #[tokio::test]
    async fn mints_a_trace_id_without_a_valid_traceparent() {
        let req = Request::builder()
            .header("traceparent", "nonsense")
            .body(())
            .unwrap();
        let response = send(RequestIdLayer::new(), req).await;
        let trace = header(&response, "x-trace-id");
        assert_eq!(trace.len(), 32);
        assert!(trace.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(trace, "0".repeat(32));
    }

    #[tokio::test]
    async fn sets_all_three_headers_on_error_responses() {
        let svc = RequestIdLayer::new().layer(service_fn(|_: Request<()>| async {
            let mut response = Response::new(String::new());
            *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            response
                .headers_mut()
                .insert("x-request-id", HeaderValue::from_static("spoofed"));
            Ok::<_, Infallible>(response)
        }));
        let response = svc.oneshot(Request::new(())).await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(Uuid::parse_str(header(&response, "x-request-id")).is_ok());
        assert_eq!(header(&response, "x-trace-id").len(), 32);
        let ms: u64 = header(&response, "x-response-time")
            .parse()
            .expect("whole milliseconds");
        assert!(ms < 60_000);
    }

    #[tokio::test]
    async fn header_names_are_configurable() {
        let layer = RequestIdLayer::new()
            .request_id_header(HeaderName::from_static("x-correlation-id"))
            .trace_id_header(HeaderName::from_static("x-b3-traceid"));
        let inbound = "0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b";
        let req = Request::builder()
            .header("x-correlation-id", inbound)
            .body(())
            .unwrap();
        let response = send(layer, req).await;
        assert_eq!(header(&response, "x-correlation-id"), inbound);
        assert_eq!(header(&response, "x-b3-traceid").len(), 32);
        assert!(response.headers().get("x-request-id").is_none());
        assert!(response.headers().get("x-trace-id").is_none());
    }

    #[tokio::test]
    async fn a_repeated_request_id_header_is_replaced() {
        let id = "0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b";
        let req = Request::builder()
            .header("x-request-id", id)
            .header("x-request-id", id)
            .body(())
            .unwrap();
        let response = send(RequestIdLayer::new(), req).await;
        assert_ne!(header(&response, "x-request-id"), id);
    }
}
