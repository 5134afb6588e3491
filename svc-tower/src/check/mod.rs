//! A layer that runs an asynchronous check on each request before the inner service sees it.
//!
//! Modelled on tower-http's `AsyncRequireAuthorization`: a [`CheckRequest`] looks at the
//! request (headers and extensions, never the body), either refuses it at once or starts a
//! future, and on success [`CheckRequest::apply`] puts what it learned on the request. A
//! refusal is an [`ApiError`] response, so every check answers in the same envelope.
//!
//! [`PatAuth`](crate::auth::PatAuth) and [`AgentCheck`](crate::agent::AgentCheck) are this layer with the
//! crate's own checks; write your own for anything else that must be asked of a backend
//! before a request goes on.
//!
//! ```
//! use std::convert::Infallible;
//! use std::future::{Ready, ready};
//!
//! use http::{Request, Response, StatusCode};
//! use svc_tower::check::{AsyncCheckLayer, CheckRequest};
//! use svc_tower::error::{ApiError, ErrorCode};
//! use tower::{Layer, ServiceExt, service_fn};
//!
//! /// Lets through only requests that name a tenant, and hands the tenant on.
//! #[derive(Clone)]
//! struct Tenant;
//!
//! #[derive(Clone)]
//! struct TenantName(String);
//!
//! impl<B> CheckRequest<B> for Tenant {
//!     type Output = TenantName;
//!     type Future = Ready<Result<TenantName, ApiError>>;
//!
//!     fn check(&mut self, request: &Request<B>) -> Result<Self::Future, ApiError> {
//!         let name = request.headers().get("x-tenant").and_then(|v| v.to_str().ok());
//!         match name {
//!             Some(name) => Ok(ready(Ok(TenantName(name.to_owned())))),
//!             None => Err(ApiError::new(ErrorCode::ValidationError)),
//!         }
//!     }
//!
//!     fn apply(request: &mut Request<B>, tenant: TenantName) {
//!         request.extensions_mut().insert(tenant);
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let service = AsyncCheckLayer::new(Tenant).layer(service_fn(|req: Request<()>| async move {
//!     let tenant = req.extensions().get::<TenantName>().map(|t| t.0.clone());
//!     Ok::<_, Infallible>(Response::new(tenant.unwrap_or_default()))
//! }));
//! let refused = service.clone().oneshot(Request::new(())).await.unwrap();
//! assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
//! let named = Request::builder().header("x-tenant", "acme").body(()).unwrap();
//! assert_eq!(service.oneshot(named).await.unwrap().status(), StatusCode::OK);
//! # }
//! ```

mod future;

use std::fmt;
use std::future::Future;
use std::mem;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower::{Layer, Service};

use crate::body::ResponseBody;
use crate::error::ApiError;

pub use future::ResponseFuture;

/// A check in flight whose future type cannot be named (an `async` block), boxed.
pub type BoxCheck<T> = Pin<Box<dyn Future<Output = Result<T, ApiError>> + Send + 'static>>;

/// A check a request must pass before it goes on; see the [module docs](self).
pub trait CheckRequest<B> {
    /// What a passing check learned, handed to [`apply`](CheckRequest::apply).
    type Output;
    /// The check in flight.
    type Future: Future<Output = Result<Self::Output, ApiError>>;

    /// Starts the check for `request`, or refuses it without starting anything.
    // The refusal becomes the response as it is; boxing it would only add an allocation.
    #[allow(clippy::result_large_err)]
    fn check(&mut self, request: &Request<B>) -> Result<Self::Future, ApiError>;

    /// Puts what a passing check learned on the request before the inner service sees it.
    fn apply(request: &mut Request<B>, output: Self::Output);
}

/// Applies [`AsyncCheck`]; see the [module docs](self).
#[derive(Clone)]
pub struct AsyncCheckLayer<C> {
    check: C,
}

impl<C> AsyncCheckLayer<C> {
    /// Checks every request with `check`.
    pub fn new(check: C) -> AsyncCheckLayer<C> {
        AsyncCheckLayer { check }
    }
}

impl<C: fmt::Debug> fmt::Debug for AsyncCheckLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncCheckLayer")
            .field("check", &self.check)
            .finish()
    }
}

impl<S, C: Clone> Layer<S> for AsyncCheckLayer<C> {
    type Service = AsyncCheck<S, C>;

    fn layer(&self, inner: S) -> AsyncCheck<S, C> {
        AsyncCheck {
            inner,
            check: self.check.clone(),
        }
    }
}

/// Runs a [`CheckRequest`] on each request; the body is not polled until the check passes.
#[derive(Clone)]
pub struct AsyncCheck<S, C> {
    inner: S,
    check: C,
}

impl<S, C> AsyncCheck<S, C> {
    /// Wraps `inner` with `check`.
    pub fn new(inner: S, check: C) -> AsyncCheck<S, C> {
        AsyncCheck { inner, check }
    }

    /// The check this service runs.
    pub fn get_check(&self) -> &C {
        &self.check
    }
}

impl<S: fmt::Debug, C: fmt::Debug> fmt::Debug for AsyncCheck<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncCheck")
            .field("inner", &self.inner)
            .field("check", &self.check)
            .finish()
    }
}

impl<S, C, ReqBody, ResBody> Service<Request<ReqBody>> for AsyncCheck<S, C>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    C: CheckRequest<ReqBody>,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<C::Output, C::Future, ReqBody, S, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        match self.check.check(&request) {
            Err(error) => ResponseFuture::reject(error),
            Ok(check) => {
                // The clone may not be ready; the instance poll_ready readied goes with this
                // request.
                let clone = self.inner.clone();
                let inner = mem::replace(&mut self.inner, clone);
                ResponseFuture::check(check, request, inner, C::apply)
            }
        }
    }
}
