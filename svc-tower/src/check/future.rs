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

/// Applies the outcome of a successful check to the request (e.g. inserts the OrgContext).
type Apply<T, B> = fn(&mut Request<B>, T);

pin_project! {
    /// Response future of [`AsyncCheck`](super::AsyncCheck) and the layers built on it:
    /// reject now, check then call, or call.
    pub struct ResponseFuture<T, C, ReqBody, S, F> {
        #[pin]
        state: State<T, C, ReqBody, S, F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<T, C, ReqBody, S, F> {
        Rejected { error: Option<ApiError> },
        Checking {
            #[pin]
            check: C,
            // The request and the service readied for it, held until the check passes; the
            // body is not polled meanwhile.
            pending: Option<(Request<ReqBody>, S)>,
            apply: Apply<T, ReqBody>,
        },
        Calling { #[pin] future: F },
    }
}

impl<T, C, ReqBody, S, F> ResponseFuture<T, C, ReqBody, S, F> {
    pub(crate) fn reject(error: ApiError) -> Self {
        ResponseFuture {
            state: State::Rejected { error: Some(error) },
        }
    }

    pub(crate) fn check(
        check: C,
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

impl<T, C, ReqBody, S, ResBody> Future for ResponseFuture<T, C, ReqBody, S, S::Future>
where
    C: Future<Output = Result<T, ApiError>>,
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
                    let outcome = ready!(check.poll(cx));
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

impl<T, C, ReqBody, S, F> fmt::Debug for ResponseFuture<T, C, ReqBody, S, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
