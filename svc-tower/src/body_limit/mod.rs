//! Refuses request bodies over a size limit with 413 `PAYLOAD_TOO_LARGE`, whether the
//! `Content-Length` declares it or a streamed body grows past it.
//!
//! ```
//! use std::convert::Infallible;
//! use http::{Request, Response, StatusCode};
//! use http_body_util::Full;
//! use svc_tower::body_limit::{self, BodyLimitLayer, LimitedBody};
//! use tower::{Layer, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let svc = BodyLimitLayer::new(16).layer(service_fn(
//!     |req: Request<LimitedBody<Full<bytes::Bytes>>>| async move {
//!         // The handler reads through the limit; over it, `collect` gives the 413 error.
//!         let response = match body_limit::collect(req.into_body(), usize::MAX).await {
//!             Ok(bytes) => Response::new(Full::from(bytes)),
//!             Err(rejection) => rejection.into_response(),
//!         };
//!         Ok::<_, Infallible>(response)
//!     },
//! ));
//! let small = svc.clone().oneshot(Request::new(Full::from("short"))).await.unwrap();
//! assert_eq!(small.status(), StatusCode::OK);
//! let big = svc.oneshot(Request::new(Full::from("far longer than sixteen bytes"))).await.unwrap();
//! assert_eq!(big.status(), StatusCode::PAYLOAD_TOO_LARGE);
//! # }
//! ```
//!
//! # How it decides
//!
//! A `Content-Length` over the limit is refused at once: the inner service is not called and
//! the body is never polled. Any other body (chunked, or honest about its length) reaches the
//! inner service as a [`LimitedBody`], which fails with http-body-util's `LengthLimitError` as soon as more
//! than the limit has been read, so nothing ever buffers more than the limit. The inner service
//! turns that into the 413 with [`collect`] (or [`is_length_limit_error`] on the error it got).
//! If it answers anything else after its reader hit the limit (axum's `Bytes` extractor answers
//! a plain-text 413, a hand-rolled reader might answer 400), the layer replaces that answer
//! with the `PAYLOAD_TOO_LARGE` rejection, so the caller always gets the envelope.
//!
//! # Where it goes
//!
//! Inside ErrorEnvelope (which renders the rejection) and outside PatAuth: the declared length
//! is checked before any I/O, yet the body itself is only read by the handler, after
//! authentication. A handler that buffers the body reads it with
//! `body_limit::collect(body, max)`, with the same limit.
//!
//! A body that trickles in is bounded in time by tower-http's `RequestBodyTimeoutLayer`
//! stacked beside this one: `collect` turns its timeout into 408 `REQUEST_TIMEOUT`.

mod body;
mod service;

pub use body::{LimitedBody, collect, is_body_timeout_error, is_length_limit_error};
pub use service::{BodyLimit, BodyLimitLayer, ResponseFuture};
