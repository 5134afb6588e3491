//! Renders every [`ApiError`] rejection as the JSON error envelope, and turns a panic into a
//! 500 `INTERNAL_ERROR` envelope.
//!
//! ```
//! use std::convert::Infallible;
//! use http::{Request, StatusCode};
//! use http_body_util::BodyExt;
//! use svc_tower::envelope::ErrorEnvelopeLayer;
//! use svc_tower::error::{ApiError, ErrorCode};
//! use svc_tower::request_id::RequestIdLayer;
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let svc = ServiceBuilder::new()
//!     .layer(RequestIdLayer::new())
//!     .layer(ErrorEnvelopeLayer::new().docs_base(Some("https://docs.example.com/errors".into())))
//!     .service(service_fn(|_req: Request<()>| async {
//!         // Any layer or handler rejects with an ApiError response; its body is a placeholder.
//!         Ok::<_, Infallible>(ApiError::new(ErrorCode::MissingToken).into_response())
//!     }));
//! let response = svc.oneshot(Request::new(())).await.unwrap();
//! assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
//! let request_id = response.headers()["x-request-id"].to_str().unwrap().to_owned();
//! let body = response.into_body().collect().await.unwrap().to_bytes();
//! let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
//! assert_eq!(json["error"]["code"], "MISSING_TOKEN");
//! assert_eq!(json["error"]["request_id"], request_id);
//! assert_eq!(json["error"]["docs_url"], "https://docs.example.com/errors/missing-token");
//! # }
//! ```
//!
//! # Where it goes
//!
//! Directly inside [`RequestIdLayer`](crate::request_id::RequestIdLayer), outside everything
//! else. Layers and handlers reject by returning
//! [`ApiError::into_response`](crate::error::ApiError::into_response), which sets the status and
//! headers and leaves the error in the response extensions; this layer writes the body, in one
//! place, with the request id the RequestId layer put in the request extensions. Being outside
//! every other layer, it also catches their panics. Without RequestId in front, it mints a UUID
//! v7 for each envelope and sets `X-Request-ID` itself.
//!
//! A panic is logged with the request id only: no header, path or body.
//!
//! The layer also puts an [`EnvelopeRenderer`] into the request extensions, so a layer that
//! must keep a rejection's final bytes (Idempotency stores a provider's 400 for replay) renders
//! exactly what this layer would.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::response::Parts;
use http::{HeaderValue, Request, Response, header};
use pin_project_lite::pin_project;
use tower::{Layer, Service};

use crate::body::ResponseBody;
use crate::error::{ApiError, ErrorCode};
use crate::request_id::{RequestId, X_REQUEST_ID};

/// Applies [`ErrorEnvelope`]; see the [module docs](self).
#[derive(Debug, Clone, Default)]
pub struct ErrorEnvelopeLayer {
    docs_base: Option<Arc<str>>,
}

impl ErrorEnvelopeLayer {
    /// The layer, with no `docs_url` in the envelopes.
    pub fn new() -> ErrorEnvelopeLayer {
        ErrorEnvelopeLayer::default()
    }

    /// With a base, every envelope carries `docs_url` = `<base>/<code-in-kebab-case>`.
    pub fn docs_base(mut self, docs_base: Option<String>) -> ErrorEnvelopeLayer {
        self.docs_base = docs_base.map(Arc::from);
        self
    }
}

impl<S> Layer<S> for ErrorEnvelopeLayer {
    type Service = ErrorEnvelope<S>;

    fn layer(&self, inner: S) -> ErrorEnvelope<S> {
        ErrorEnvelope {
            inner,
            docs_base: self.docs_base.clone(),
        }
    }
}

/// Renders [`ApiError`] rejections and panics as envelopes; see the [module docs](self).
#[derive(Debug, Clone)]
pub struct ErrorEnvelope<S> {
    inner: S,
    docs_base: Option<Arc<str>>,
}

impl<S> ErrorEnvelope<S> {
    /// An [`ErrorEnvelopeLayer`] without a docs base.
    pub fn layer() -> ErrorEnvelopeLayer {
        ErrorEnvelopeLayer::new()
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for ErrorEnvelope<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<ReqBody>) -> Self::Future {
        let render = Render {
            request_id: req.extensions().get::<RequestId>().copied(),
            docs_base: self.docs_base.clone(),
        };
        if let Some(request_id) = render.request_id {
            req.extensions_mut().insert(EnvelopeRenderer {
                request_id,
                docs_base: self.docs_base.clone(),
            });
        }
        let inner = &mut self.inner;
        let state = match catch_unwind(AssertUnwindSafe(|| inner.call(req))) {
            Ok(future) => State::Inner { future },
            Err(_panic) => State::Panicked,
        };
        ResponseFuture { state, render }
    }
}

/// What an envelope needs besides the error.
struct Render {
    request_id: Option<RequestId>,
    docs_base: Option<Arc<str>>,
}

impl Render {
    fn response<B>(&self, response: Response<B>) -> Response<ResponseBody<B>> {
        let Some(error) = response.extensions().get::<ApiError>().cloned() else {
            return response.map(ResponseBody::inner);
        };
        let (parts, _placeholder) = response.into_parts();
        self.envelope(parts, &error)
    }

    fn panicked<B>(&self) -> Response<ResponseBody<B>> {
        match self.request_id {
            Some(id) => tracing::error!(request_id = %id, "request handler panicked; answered 500"),
            None => tracing::error!("request handler panicked; answered 500"),
        }
        let error = ApiError::new(ErrorCode::InternalError);
        let (parts, ()) = error.clone().into_response_with(()).into_parts();
        self.envelope(parts, &error)
    }

    fn envelope<B>(&self, mut parts: Parts, error: &ApiError) -> Response<ResponseBody<B>> {
        let (request_id, minted) = match self.request_id {
            Some(id) => (id, false),
            None => (RequestId::new_v7(), true),
        };
        let body = render_parts(&mut parts, error, request_id, self.docs_base.as_deref());
        if minted && !parts.headers.contains_key(&X_REQUEST_ID) {
            parts
                .headers
                .insert(X_REQUEST_ID.clone(), request_id.header_value());
        }
        Response::from_parts(parts, ResponseBody::full(body))
    }
}

/// Writes an error's envelope into response parts: the error's own headers (a handler may have
/// built the response by hand, and Retry-After must reach the caller all the same), the JSON
/// content type, no stale Content-Length, and no [`ApiError`] left to render twice.
fn render_parts(
    parts: &mut Parts,
    error: &ApiError,
    request_id: RequestId,
    docs_base: Option<&str>,
) -> Bytes {
    let body = error.envelope(&request_id.to_string(), docs_base);
    for (name, value) in error.headers() {
        parts.headers.insert(name.clone(), value.clone());
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.extensions.remove::<ApiError>();
    body
}

/// How [`ErrorEnvelope`] renders the envelopes of one request, found in the request
/// extensions of every request that passed through it with a [`RequestId`].
#[derive(Debug, Clone)]
pub struct EnvelopeRenderer {
    request_id: RequestId,
    docs_base: Option<Arc<str>>,
}

impl EnvelopeRenderer {
    /// Renders the [`ApiError`] a response carries, if any, into its final body now, exactly as
    /// the envelope layer would later; `Err` gives back a response that carries none.
    pub fn render<B>(&self, response: Response<B>) -> Result<Response<Bytes>, Response<B>> {
        let Some(error) = response.extensions().get::<ApiError>().cloned() else {
            return Err(response);
        };
        let (mut parts, _placeholder) = response.into_parts();
        let body = render_parts(
            &mut parts,
            &error,
            self.request_id,
            self.docs_base.as_deref(),
        );
        Ok(Response::from_parts(parts, body))
    }
}

pin_project! {
    /// Response future of [`ErrorEnvelope`].
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
        render: Render,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Inner { #[pin] future: F },
        Panicked,
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<ResponseBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let future = match this.state.project() {
            StateProj::Inner { future } => future,
            StateProj::Panicked => return Poll::Ready(Ok(this.render.panicked())),
        };
        match catch_unwind(AssertUnwindSafe(|| future.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(Ok(response))) => Poll::Ready(Ok(this.render.response(response))),
            Ok(Poll::Ready(Err(err))) => Poll::Ready(Err(err)),
            Err(_panic) => Poll::Ready(Ok(this.render.panicked())),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use bytes::Bytes;
    use http::{HeaderMap, StatusCode};
    use http_body_util::{BodyExt, Full};
    use tower::{ServiceBuilder, ServiceExt, service_fn};
    use uuid::Uuid;

    use super::*;
    use crate::request_id::RequestIdLayer;

    type Reply = Response<Full<Bytes>>;

    async fn parts<B>(response: Response<ResponseBody<B>>) -> (StatusCode, HeaderMap, Bytes)
    where
        B: http_body::Body<Data = Bytes>,
        B::Error: std::fmt::Debug,
    {
        let (parts, body) = response.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        (parts.status, parts.headers, bytes)
    }

    fn json(bytes: &Bytes) -> serde_json::Value {
        serde_json::from_slice(bytes).unwrap()
    }

    #[tokio::test]
    async fn renders_the_error_with_the_request_id_of_the_extensions() {
        let svc = ErrorEnvelopeLayer::new().layer(service_fn(|_: Request<()>| async {
            Ok::<Reply, Infallible>(ApiError::new(ErrorCode::InvalidToken).into_response())
        }));
        let id = Uuid::now_v7();
        let mut req = Request::new(());
        req.extensions_mut().insert(RequestId::from(id));
        let (status, headers, body) = parts(svc.oneshot(req).await.unwrap()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(headers[header::CONTENT_TYPE], "application/json");
        let json = json(&body);
        assert_eq!(json["error"]["code"], "INVALID_TOKEN");
        assert_eq!(json["error"]["request_id"], id.to_string());
        assert!(json["error"].get("docs_url").is_none());
        // The RequestId layer owns the header when it is in front.
        assert!(headers.get("x-request-id").is_none());
    }

    #[tokio::test]
    async fn mints_and_sets_a_request_id_without_the_request_id_layer() {
        let svc = ErrorEnvelopeLayer::new().layer(service_fn(|_: Request<()>| async {
            Ok::<Reply, Infallible>(ApiError::new(ErrorCode::NotFound).into_response())
        }));
        let (status, headers, body) = parts(svc.oneshot(Request::new(())).await.unwrap()).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let header_id = headers["x-request-id"].to_str().unwrap();
        assert_eq!(Uuid::parse_str(header_id).unwrap().get_version_num(), 7);
        assert_eq!(json(&body)["error"]["request_id"], header_id);
    }

    #[tokio::test]
    async fn envelope_request_id_matches_the_header_under_request_id() {
        let svc = ServiceBuilder::new()
            .layer(RequestIdLayer::new())
            .layer(ErrorEnvelopeLayer::new())
            .service(service_fn(|_: Request<()>| async {
                Ok::<Reply, Infallible>(ApiError::new(ErrorCode::MissingAgentId).into_response())
            }));
        let (status, headers, body) = parts(svc.oneshot(Request::new(())).await.unwrap()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(
            json(&body)["error"]["request_id"],
            headers["x-request-id"].to_str().unwrap()
        );
        assert!(headers.contains_key("x-trace-id"));
        assert!(headers.contains_key("x-response-time"));
    }

    #[tokio::test]
    async fn adds_docs_url_with_a_docs_base() {
        let layer = ErrorEnvelopeLayer::new().docs_base(Some("https://docs.example.com/e/".into()));
        let svc = layer.layer(service_fn(|_: Request<()>| async {
            Ok::<Reply, Infallible>(ApiError::new(ErrorCode::PayloadTooLarge).into_response())
        }));
        let (_, _, body) = parts(svc.oneshot(Request::new(())).await.unwrap()).await;
        assert_eq!(
            json(&body)["error"]["docs_url"],
            "https://docs.example.com/e/payload-too-large"
        );
    }

    #[tokio::test]
    async fn keeps_retry_after_and_other_error_headers() {
        let svc = ErrorEnvelopeLayer::new().layer(service_fn(|_: Request<()>| async {
            let error = ApiError::new(ErrorCode::ServiceDegraded).with_retry_after(2);
            // Built by hand, as a handler might: the error's headers are not on it yet.
            let mut response = Response::new(Full::from("placeholder"));
            *response.status_mut() = error.status();
            response
                .headers_mut()
                .insert(header::CONTENT_LENGTH, HeaderValue::from_static("11"));
            response.extensions_mut().insert(error);
            Ok::<Reply, Infallible>(response)
        }));
        let (status, headers, body) = parts(svc.oneshot(Request::new(())).await.unwrap()).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(headers[header::RETRY_AFTER], "2");
        assert!(headers.get(header::CONTENT_LENGTH).is_none());
        assert_eq!(json(&body)["error"]["code"], "SERVICE_DEGRADED");
    }

    #[tokio::test]
    async fn leaves_other_responses_untouched() {
        let svc = ErrorEnvelopeLayer::new().layer(service_fn(|_: Request<()>| async {
            let mut response = Response::new(Full::from("plain failure"));
            *response.status_mut() = StatusCode::BAD_GATEWAY;
            Ok::<Reply, Infallible>(response)
        }));
        let (status, headers, body) = parts(svc.oneshot(Request::new(())).await.unwrap()).await;
        assert_eq!(status, StatusCode::BAD_GATEWAY);
        assert_eq!(body, "plain failure");
        assert!(headers.get(header::CONTENT_TYPE).is_none());
    }

    #[derive(Clone)]
    struct PanicsInCall;

    impl Service<Request<()>> for PanicsInCall {
        type Response = Reply;
        type Error = Infallible;
        type Future = std::future::Ready<Result<Reply, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<()>) -> Self::Future {
            panic!("bug in call")
        }
    }

    #[tokio::test]
    async fn a_panic_in_call_becomes_internal_error() {
        let svc = ErrorEnvelopeLayer::new().layer(PanicsInCall);
        let (status, _, body) = parts(svc.oneshot(Request::new(())).await.unwrap()).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(json(&body)["error"]["code"], "INTERNAL_ERROR");
    }

    #[tokio::test]
    async fn a_panic_while_polling_becomes_internal_error() {
        let svc = ServiceBuilder::new()
            .layer(RequestIdLayer::new())
            .layer(ErrorEnvelopeLayer::new())
            .service(service_fn(|req: Request<()>| async move {
                if req.headers().contains_key("authorization") {
                    panic!("bug while polling");
                }
                Ok::<Reply, Infallible>(Response::new(Full::default()))
            }));
        let req = Request::builder()
            .header("authorization", "Bearer svc_pat_secret")
            .body(())
            .unwrap();
        let (status, headers, body) = parts(svc.oneshot(req).await.unwrap()).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        let json = json(&body);
        assert_eq!(json["error"]["code"], "INTERNAL_ERROR");
        assert_eq!(
            json["error"]["request_id"],
            headers["x-request-id"].to_str().unwrap()
        );
        assert!(!String::from_utf8_lossy(&body).contains("svc_pat_"));
    }
}
