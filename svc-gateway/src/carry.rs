//! Layers that take something from each request and put it on its answer: [`Carry`] does the
//! tower plumbing once, a [`Carried`] says what is carried.
//!
//! The access log's [`IdentityLayer`](crate::access_log::IdentityLayer) carries the token's
//! org onto the answer, and the chat routes'
//! [`SessionLayer`](crate::session::SessionLayer) the session id.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::{Request, Response};
use pin_project_lite::pin_project;
use tower::Service;

/// What a [`Carry`] takes from a request and gives its answer.
pub trait Carried: Clone {
    /// What travels from the request to its answer.
    type Value;

    /// Takes the value from `request`, which it may also change.
    fn take<B>(&self, request: &mut Request<B>) -> Self::Value;

    /// Puts the value on the answer.
    fn give<B>(value: Self::Value, response: &mut Response<B>);
}

/// The service of a [`Carried`] layer.
#[derive(Debug, Clone)]
pub struct Carry<S, K> {
    inner: S,
    carried: K,
}

impl<S, K> Carry<S, K> {
    /// `inner`, with what `carried` says carried from each request to its answer.
    pub fn new(inner: S, carried: K) -> Carry<S, K> {
        Carry { inner, carried }
    }
}

impl<S, K, ReqBody, ResBody> Service<Request<ReqBody>> for Carry<S, K>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    K: Carried,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = CarryFuture<S::Future, K>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> Self::Future {
        let value = self.carried.take(&mut request);
        CarryFuture {
            inner: self.inner.call(request),
            value: Some(value),
        }
    }
}

pin_project! {
    /// The answer of a [`Carry`], with the value given to it.
    pub struct CarryFuture<F, K>
    where
        K: Carried,
    {
        #[pin]
        inner: F,
        value: Option<K::Value>,
    }
}

impl<F, K, B, E> Future for CarryFuture<F, K>
where
    F: Future<Output = Result<Response<B>, E>>,
    K: Carried,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut response = ready!(this.inner.poll(cx))?;
        if let Some(value) = this.value.take() {
            K::give(value, &mut response);
        }
        Poll::Ready(Ok(response))
    }
}
