//! The layer, its service and its response future.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use http::{Request, Response, header};
use pin_project_lite::pin_project;
use tower::{Layer, Service};

use super::LimitedBody;
use crate::body::ResponseBody;
use crate::error::{ApiError, ErrorCode};

/// Applies [`BodyLimit`]; see the [module docs](super).
#[derive(Debug, Clone, Copy)]
pub struct BodyLimitLayer {
    max_bytes: usize,
}

impl BodyLimitLayer {
    /// Limits request bodies to `max_bytes`.
    pub fn new(max_bytes: usize) -> BodyLimitLayer {
        BodyLimitLayer { max_bytes }
    }
}

impl<S> Layer<S> for BodyLimitLayer {
    type Service = BodyLimit<S>;

    fn layer(&self, inner: S) -> BodyLimit<S> {
        BodyLimit {
            inner,
            max_bytes: self.max_bytes,
        }
    }
}

/// Refuses bodies over the limit with 413; see the [module docs](super).
#[derive(Debug, Clone, Copy)]
pub struct BodyLimit<S> {
    inner: S,
    max_bytes: usize,
}

impl<S> BodyLimit<S> {
    /// A [`BodyLimitLayer`] of `max_bytes`.
    pub fn layer(max_bytes: usize) -> BodyLimitLayer {
        BodyLimitLayer::new(max_bytes)
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for BodyLimit<S>
where
    S: Service<Request<LimitedBody<ReqBody>>, Response = Response<ResBody>>,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.max_bytes as u64) {
            // Refused before a byte of the body is read.
            return ResponseFuture {
                state: State::Rejected,
            };
        }
        let tripped = Arc::new(AtomicBool::new(false));
        let limit = self.max_bytes;
        let flag = Arc::clone(&tripped);
        let req = req.map(move |body| LimitedBody::with_flag(body, limit, flag));
        ResponseFuture {
            state: State::Forward {
                future: self.inner.call(req),
                tripped,
            },
        }
    }
}

fn too_large<B>() -> Response<ResponseBody<B>> {
    ApiError::new(ErrorCode::PayloadTooLarge).into_response_with(ResponseBody::empty())
}

pin_project! {
    /// Response future of [`BodyLimit`].
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Rejected,
        Forward { #[pin] future: F, tripped: Arc<AtomicBool> },
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<ResponseBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Rejected => Poll::Ready(Ok(too_large())),
            StateProj::Forward { future, tripped } => {
                let response = match future.poll(cx) {
                    Poll::Ready(Ok(response)) => response,
                    Poll::Ready(Err(err)) => return Poll::Ready(Err(err)),
                    Poll::Pending => return Poll::Pending,
                };
                let already_413 = response
                    .extensions()
                    .get::<ApiError>()
                    .is_some_and(|e| e.code() == &ErrorCode::PayloadTooLarge);
                if tripped.load(Ordering::Relaxed) && !already_413 {
                    // The reader hit the limit, whatever it made of the error: the answer is
                    // 413, not the 400 or 500 a generic body error would have become.
                    return Poll::Ready(Ok(too_large()));
                }
                Poll::Ready(Ok(response.map(ResponseBody::inner)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::atomic::AtomicUsize;

    use bytes::Bytes;
    use futures_util::stream;
    use http::StatusCode;
    use http_body::{Body, Frame};
    use http_body_util::{BodyExt, Full, StreamBody};
    use tower::{ServiceBuilder, ServiceExt, service_fn};

    use super::*;
    use crate::body_limit::collect;
    use crate::envelope::ErrorEnvelopeLayer;

    type Reply = Response<Full<Bytes>>;

    type Chunked = StreamBody<stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

    /// A chunked body of the given chunk sizes, with no length known up front.
    fn chunked(sizes: &[usize]) -> Chunked {
        let frames: Vec<_> = sizes
            .iter()
            .map(|&n| Ok(Frame::data(Bytes::from(vec![b'x'; n]))))
            .collect();
        StreamBody::new(stream::iter(frames))
    }

    /// The handler the gateway writes: read through `collect`, reject with its error.
    async fn echo_len<B>(req: Request<LimitedBody<B>>) -> Result<Reply, Infallible>
    where
        B: Body<Data = Bytes>,
        B::Error: Into<tower::BoxError>,
    {
        Ok(match collect(req.into_body(), usize::MAX).await {
            Ok(bytes) => Response::new(Full::from(bytes.len().to_string())),
            Err(rejection) => rejection.into_response(),
        })
    }

    #[tokio::test]
    async fn a_declared_length_over_the_limit_is_refused_unread() {
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&calls);
        let svc = BodyLimitLayer::new(10).layer(service_fn(
            move |_: Request<LimitedBody<Full<Bytes>>>| {
                seen.fetch_add(1, Ordering::SeqCst);
                async { Ok::<Reply, Infallible>(Response::new(Full::default())) }
            },
        ));
        let req = Request::builder()
            .header(header::CONTENT_LENGTH, "11")
            .body(Full::new(Bytes::from_static(b"01234567890")))
            .unwrap();
        let response = svc.oneshot(req).await.unwrap();
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let error = response.extensions().get::<ApiError>().unwrap();
        assert_eq!(error.code(), &ErrorCode::PayloadTooLarge);
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_chunked_body_growing_past_the_limit_is_refused() {
        let svc = BodyLimitLayer::new(10).layer(service_fn(echo_len));
        let response = svc
            .oneshot(Request::new(chunked(&[4, 4, 4])))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[tokio::test]
    async fn a_body_at_the_limit_reaches_the_handler_whole() {
        let svc = BodyLimitLayer::new(12).layer(service_fn(echo_len));
        let response = svc
            .oneshot(Request::new(chunked(&[4, 4, 4])))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "12");
    }

    #[tokio::test]
    async fn a_swallowed_limit_error_still_answers_413() {
        let svc =
            BodyLimitLayer::new(10).layer(service_fn(|req: Request<LimitedBody<_>>| async move {
                let mut response = Response::new(Full::<Bytes>::from("could not read body"));
                if req.into_body().collect().await.is_err() {
                    *response.status_mut() = StatusCode::BAD_REQUEST;
                }
                Ok::<_, Infallible>(response)
            }));
        let response = svc.oneshot(Request::new(chunked(&[8, 8]))).await.unwrap();
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert!(response.extensions().get::<ApiError>().is_some());
    }

    #[tokio::test]
    async fn the_rejection_renders_as_the_envelope() {
        let svc = ServiceBuilder::new()
            .layer(ErrorEnvelopeLayer::new())
            .layer(BodyLimitLayer::new(10))
            .service(service_fn(echo_len));
        for req in [
            Request::new(chunked(&[6, 6])),
            Request::builder()
                .header(header::CONTENT_LENGTH, "1000000")
                .body(chunked(&[1]))
                .unwrap(),
        ] {
            let response = svc.clone().oneshot(req).await.unwrap();
            assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
            let body = response.into_body().collect().await.unwrap().to_bytes();
            let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(json["error"]["code"], "PAYLOAD_TOO_LARGE");
        }
    }
}
