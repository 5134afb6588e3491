//! The response future shared by the layers that check a request before calling the service.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::{Request, Response};
use pin_project_lite::pin_project;
use tower::Service;

use crate::body::ResponseBody;
use crate::error::{ApiError, ErrorCode};

/// A check in progress: boxed because a validator's future type cannot be named.
pub(crate) type Check<T> = Pin<Box<dyn Future<Output = Result<T, ApiError>> + Send>>;

/// Applies the outcome of a successful check to the request (e.g. inserts the OrgContext).
pub(crate) type Apply<T, B> = fn(&mut Request<B>, T);

pin_project! {
    /// Response future of [`PatAuth`](super::PatAuth),
    /// [`RequirePermission`](super::RequirePermission) and
    /// [`AgentCheck`](crate::agent::AgentCheck): reject now, check then call, or call.
    pub struct ResponseFuture<T, ReqBody, S, F> {
        #[pin]
        state: State<T, ReqBody, S, F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<T, ReqBody, S, F> {
        Rejected { error: Option<ApiError> },
        Checking {
            check: Check<T>,
            // The request and the service readied for it, held until the check passes; the
            // body is not polled meanwhile.
            pending: Option<(Request<ReqBody>, S)>,
            apply: Apply<T, ReqBody>,
        },
        Calling { #[pin] future: F },
    }
}

impl<T, ReqBody, S, F> ResponseFuture<T, ReqBody, S, F> {
    pub(crate) fn reject(error: ApiError) -> Self {
        ResponseFuture {
            state: State::Rejected { error: Some(error) },
        }
    }

    pub(crate) fn check(
        check: Check<T>,
        request: Request<ReqBody>,
        service: S,
        apply: Apply<T, ReqBody>,
    ) -> Self {
        ResponseFuture {
            state: State::Checking {
                check,
                pending: Some((request, service)),
                apply,
            },
        }
    }

    pub(crate) fn call(future: F) -> Self {
        ResponseFuture {
            state: State::Calling { future },
        }
    }
}

impl<T, ReqBody, S, ResBody> Future for ResponseFuture<T, ReqBody, S, S::Future>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Output = Result<Response<ResponseBody<ResBody>>, S::Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            let mut state = self.as_mut().project().state;
            match state.as_mut().project() {
                StateProj::Rejected { error } => {
                    let error = error
                        .take()
                        .unwrap_or_else(|| ApiError::new(ErrorCode::InternalError));
                    return Poll::Ready(Ok(error.into_response_with(ResponseBody::empty())));
                }
                StateProj::Checking {
                    check,
                    pending,
                    apply,
                } => {
                    let outcome = ready!(check.as_mut().poll(cx));
                    let next = match (outcome, pending.take()) {
                        (Ok(value), Some((mut request, mut service))) => {
                            apply(&mut request, value);
                            State::Calling {
                                future: service.call(request),
                            }
                        }
                        (Err(error), _) => State::Rejected { error: Some(error) },
                        // Polled again after completing: answer rather than panic.
                        (Ok(_), None) => State::Rejected { error: None },
                    };
                    state.set(next);
                }
                StateProj::Calling { future } => {
                    let response = ready!(future.poll(cx))?;
                    return Poll::Ready(Ok(response.map(ResponseBody::inner)));
                }
            }
        }
    }
}

impl<T, ReqBody, S, F> fmt::Debug for ResponseFuture<T, ReqBody, S, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
