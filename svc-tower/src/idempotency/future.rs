use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response};
use http_body::Body;
use http_body_util::Full;
use http_body_util::combinators::Collect;
use pin_project_lite::pin_project;
use tokio::time::{Timeout, timeout};
use tower::{BoxError, Service};
use uuid::Uuid;

use super::config::{Config, storable};
use super::fingerprint::Fingerprint;
use super::guard::ClaimGuard;
use super::respond::{called, in_progress, key_reuse, reject, replay, stored_headers, unreadable};
use super::store::{Claim, IdempotencyStore, StoredResponse};
use crate::body::ResponseBody;
use crate::envelope::EnvelopeRenderer;
use crate::error::ApiError;
use crate::store::{FailureKind, StoreError, StoreFuture, WarnThrottle};

static WARN: WarnThrottle = WarnThrottle::new("idempotency");

/// What a request with a key is deduplicated by.
pub(crate) struct Scope {
    pub(crate) org_id: Uuid,
    pub(crate) key: Arc<str>,
    pub(crate) route: String,
    /// Set when ErrorEnvelope is in front: a rejection from the inner service (a provider's
    /// 400) is then rendered here, stored and replayed like any other final answer.
    pub(crate) renderer: Option<EnvelopeRenderer>,
}

pin_project! {
    /// Response future of [`Idempotency`](super::Idempotency).
    pub struct ResponseFuture<S, I, ReqBody, ResBody>
    where
        S: IdempotencyStore,
        I: Service<Request<Full<Bytes>>>,
        ReqBody: Body,
        ResBody: Body,
    {
        #[pin]
        state: State<S, I, ReqBody, ResBody>,
        store: S,
        config: Arc<Config>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, I, ReqBody, ResBody>
    where
        S: IdempotencyStore,
        I: Service<Request<Full<Bytes>>>,
        ReqBody: Body,
        ResBody: Body,
    {
        Reject { error: Option<ApiError> },
        // Buffering the request body, which the inner service gets whole.
        Reading {
            #[pin]
            collect: Collect<ReqBody>,
            parts: Option<Parts>,
            inner: Option<I>,
            scope: Option<Scope>,
        },
        Claiming {
            #[pin]
            claim: Timeout<StoreFuture<Claim>>,
            request: Option<Request<Full<Bytes>>>,
            inner: Option<I>,
            scope: Option<Scope>,
        },
        // No key, no org, or the store failed: the inner response goes out untouched.
        Forward { #[pin] future: I::Future },
        // The inner service runs under our claim.
        Calling {
            #[pin]
            future: I::Future,
            guard: Option<ClaimGuard<S>>,
            renderer: Option<EnvelopeRenderer>,
        },
        // A response that must not be stored: free the key before answering, so a retry
        // that follows at once finds it free.
        Releasing {
            #[pin]
            release: Timeout<StoreFuture<bool>>,
            response: Option<Response<ResBody>>,
        },
        Buffering {
            #[pin]
            collect: Collect<ResBody>,
            parts: Option<http::response::Parts>,
            guard: Option<ClaimGuard<S>>,
        },
        Committing {
            #[pin]
            commit: Timeout<StoreFuture<bool>>,
            response: Option<Response<Bytes>>,
            guard: Option<ClaimGuard<S>>,
        },
    }
}

impl<S, I, ReqBody, ResBody> ResponseFuture<S, I, ReqBody, ResBody>
where
    S: IdempotencyStore,
    I: Service<Request<Full<Bytes>>>,
    ReqBody: Body,
    ResBody: Body,
{
    pub(crate) fn reject(error: ApiError, store: S, config: Arc<Config>) -> Self {
        ResponseFuture {
            state: State::Reject { error: Some(error) },
            store,
            config,
        }
    }

    pub(crate) fn new(
        collect: Collect<ReqBody>,
        parts: Parts,
        inner: I,
        scope: Option<Scope>,
        store: S,
        config: Arc<Config>,
    ) -> Self {
        ResponseFuture {
            state: State::Reading {
                collect,
                parts: Some(parts),
                inner: Some(inner),
                scope,
            },
            store,
            config,
        }
    }
}

type Output<ResBody, E> = Result<Response<ResponseBody<ResBody>>, E>;

impl<S, I, ReqBody, ResBody> Future for ResponseFuture<S, I, ReqBody, ResBody>
where
    S: IdempotencyStore + Clone,
    I: Service<Request<Full<Bytes>>, Response = Response<ResBody>>,
    ReqBody: Body,
    ReqBody::Error: Into<BoxError>,
    ResBody: Body<Data = Bytes>,
    ResBody::Error: Into<BoxError>,
{
    type Output = Output<ResBody, I::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            let (store, config) = (&*this.store, &**this.config);
            let next = match this.state.as_mut().project() {
                StateProj::Reject { error } => {
                    let error = error.take().expect("polled after completion");
                    return Poll::Ready(Ok(reject(error)));
                }
                StateProj::Reading {
                    collect,
                    parts,
                    inner,
                    scope,
                } => {
                    let collected = ready!(collect.poll(cx));
                    let (Some(parts), Some(mut inner)) = (parts.take(), inner.take()) else {
                        panic!("polled after completion")
                    };
                    let bytes = match collected {
                        Ok(collected) => collected.to_bytes(),
                        Err(error) => return Poll::Ready(Ok(reject(unreadable(error.into())))),
                    };
                    let Some(scope) = scope.take() else {
                        let request = Request::from_parts(parts, Full::new(bytes));
                        this.state.set(State::Forward {
                            future: inner.call(request),
                        });
                        continue;
                    };
                    if let Some(error) = config.refuse(&parts, &bytes) {
                        return Poll::Ready(Ok(reject(error)));
                    }
                    // A caller that parsed the body already hands its fingerprint over, so
                    // nothing parses the body twice.
                    let fingerprint = match parts.extensions.get::<Fingerprint>() {
                        Some(fingerprint) => *fingerprint,
                        None => Fingerprint::compute(&parts.method, &scope.route, &bytes),
                    };
                    let claim = timeout(
                        config.timeout,
                        store.claim(scope.org_id, &scope.key, fingerprint, config.pending_ttl),
                    );
                    State::Claiming {
                        claim,
                        request: Some(Request::from_parts(parts, Full::new(bytes))),
                        inner: Some(inner),
                        scope: Some(scope),
                    }
                }
                StateProj::Claiming {
                    claim,
                    request,
                    inner,
                    scope,
                } => {
                    let claim = ready!(claim.poll(cx));
                    let (Some(request), Some(mut inner), Some(scope)) =
                        (request.take(), inner.take(), scope.take())
                    else {
                        panic!("polled after completion")
                    };
                    match claim {
                        Ok(Ok(Claim::Claimed(token))) => State::Calling {
                            future: inner.call(request),
                            guard: Some(ClaimGuard::new(
                                store.clone(),
                                scope.org_id,
                                scope.key,
                                token,
                            )),
                            renderer: scope.renderer,
                        },
                        Ok(Ok(Claim::InProgress)) => {
                            return Poll::Ready(Ok(reject(in_progress())));
                        }
                        Ok(Ok(Claim::Committed(stored))) => {
                            return Poll::Ready(Ok(replay(stored)));
                        }
                        Ok(Ok(Claim::Mismatch)) => {
                            return Poll::Ready(Ok(reject(key_reuse())));
                        }
                        Ok(Err(error)) => {
                            fail_open(config, FailureKind::Error, Some(&error));
                            State::Forward {
                                future: inner.call(request),
                            }
                        }
                        Err(_elapsed) => {
                            fail_open(config, FailureKind::Timeout, None);
                            State::Forward {
                                future: inner.call(request),
                            }
                        }
                    }
                }
                StateProj::Forward { future } => {
                    let response = ready!(future.poll(cx))?;
                    return Poll::Ready(Ok(called(response.map(ResponseBody::inner))));
                }
                StateProj::Calling {
                    future,
                    guard,
                    renderer,
                } => {
                    // On an inner error the guard drops with this future and frees the key.
                    let response = ready!(future.poll(cx))?;
                    let guard = guard.take().expect("polled after completion");
                    match rendered_rejection(config, response, renderer.take()) {
                        Ok(rendered) => {
                            let (parts, bytes) = rendered.into_parts();
                            let stored = StoredResponse {
                                status: parts.status,
                                headers: stored_headers(&parts.headers),
                                body: bytes.clone(),
                            };
                            State::Committing {
                                commit: timeout(config.timeout, guard.commit(stored, config.ttl)),
                                response: Some(Response::from_parts(parts, bytes)),
                                guard: Some(guard),
                            }
                        }
                        Err(response) => {
                            if storable(config, &response) {
                                let (parts, body) = response.into_parts();
                                State::Buffering {
                                    collect: http_body_util::BodyExt::collect(body),
                                    parts: Some(parts),
                                    guard: Some(guard),
                                }
                            } else {
                                State::Releasing {
                                    release: timeout(config.timeout, guard.release()),
                                    response: Some(response),
                                }
                            }
                        }
                    }
                }
                StateProj::Releasing { release, response } => {
                    match ready!(release.poll(cx)) {
                        Ok(Ok(_)) => {}
                        Ok(Err(error)) => fail_open(config, FailureKind::Error, Some(&error)),
                        Err(_elapsed) => fail_open(config, FailureKind::Timeout, None),
                    }
                    let response = response.take().expect("polled after completion");
                    return Poll::Ready(Ok(called(response.map(ResponseBody::inner))));
                }
                StateProj::Buffering {
                    collect,
                    parts,
                    guard,
                } => {
                    let collected = ready!(collect.poll(cx));
                    let (Some(parts), Some(guard)) = (parts.take(), guard.take()) else {
                        panic!("polled after completion")
                    };
                    let bytes = match collected {
                        Ok(collected) => collected.to_bytes(),
                        Err(_) => {
                            // The inner body broke off: nothing to store; the guard frees the
                            // key as it drops.
                            drop(guard);
                            let error = ApiError::new(config.broken_body.clone());
                            return Poll::Ready(Ok(called(reject(error))));
                        }
                    };
                    let stored = StoredResponse {
                        status: parts.status,
                        headers: stored_headers(&parts.headers),
                        body: bytes.clone(),
                    };
                    let commit = timeout(config.timeout, guard.commit(stored, config.ttl));
                    State::Committing {
                        commit,
                        response: Some(Response::from_parts(parts, bytes)),
                        guard: Some(guard),
                    }
                }
                StateProj::Committing {
                    commit,
                    response,
                    guard,
                } => {
                    let committed = ready!(commit.poll(cx));
                    let mut guard = guard.take().expect("polled after completion");
                    match committed {
                        // `false`: the claim expired and was taken over; the new holder's
                        // request decides what the key replays.
                        Ok(Ok(_)) => guard.disarm(),
                        // The commit may or may not have landed: the guard's release is a
                        // compare-and-set on our claim, harmless if it did.
                        Ok(Err(error)) => fail_open(config, FailureKind::Error, Some(&error)),
                        Err(_elapsed) => fail_open(config, FailureKind::Timeout, None),
                    }
                    drop(guard);
                    let response = response.take().expect("polled after completion");
                    return Poll::Ready(Ok(called(response.map(ResponseBody::full))));
                }
            };
            this.state.set(next);
        }
    }
}

/// A final rejection (a provider's 400, say: not 429, not 5xx) rendered into its envelope
/// bytes now, so it is committed and replayed like a success; `Err` hands back any other
/// response, and a rejection when no renderer is in front (it then re-runs on retry).
fn rendered_rejection<B>(
    config: &Config,
    response: Response<B>,
    renderer: Option<EnvelopeRenderer>,
) -> Result<Response<Bytes>, Response<B>> {
    match renderer {
        Some(renderer) if !config.releases(response.status()) => renderer.render(response),
        _ => Err(response),
    }
}

fn fail_open(config: &Config, kind: FailureKind, error: Option<&StoreError>) {
    WARN.fail_open(config.metrics.as_ref(), kind, error);
}
