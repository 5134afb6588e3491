//! The rate-limit decision started at the same moment as authentication; see
//! [`EarlyRateLimitLayer`].

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::task::{Context, Poll, ready};

use http::{HeaderValue, Request, Response, StatusCode, header};
use pin_project_lite::pin_project;
use tower::{Layer, Service};
use uuid::Uuid;

use super::store::{Decision, RateLimitStore, RequestCount};
use crate::context::OrgContext;
use crate::store::{StoreError, StoreFuture};

/// Tokens remembered at most; past it the memory starts again from empty.
pub(crate) const MAX_SEEN: usize = 16_384;

/// What one request counts against: its org, and its token when the token has a limit of its
/// own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Ask {
    org_id: Uuid,
    token: Option<(Uuid, u32)>,
}

/// What the store answered to an [`Ask`]: the org's decision and the token's.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Counted {
    org: Decision,
    token: Option<Decision>,
}

impl Ask {
    pub(crate) fn of(context: &OrgContext) -> Ask {
        Ask {
            org_id: context.org_id,
            token: context
                .limits
                .requests_per_minute
                .map(|limit| (context.token_id, limit)),
        }
    }

    /// What a store counting the request with its reservation counts, against the org's
    /// `limit` (and the token's own).
    pub(crate) fn requests(self, limit: u32) -> RequestCount {
        RequestCount {
            org_id: self.org_id,
            limit,
            token: self.token,
        }
    }

    /// Counts one request against the org's `limit` (and the token's own).
    pub(crate) fn count<S: RateLimitStore + ?Sized>(
        self,
        store: &S,
        limit: u32,
    ) -> StoreFuture<Counted> {
        match self.token {
            None => {
                let org = store.check(self.org_id, limit);
                Box::pin(async move {
                    Ok(Counted {
                        org: org.await?,
                        token: None,
                    })
                })
            }
            Some((token_id, token_limit)) => {
                let both = store.check_with_token(self.org_id, limit, token_id, token_limit);
                Box::pin(async move {
                    let (org, token) = both.await?;
                    Ok(Counted {
                        org,
                        token: Some(token),
                    })
                })
            }
        }
    }

    /// Gives back what `counted` allowed; `None` when it allowed nothing.
    fn refund(
        self,
        store: &Arc<dyn RateLimitStore>,
        limit: u32,
        counted: Counted,
    ) -> Option<StoreFuture<()>> {
        let org = counted
            .org
            .allowed
            .then(|| store.refund(self.org_id, limit));
        let token = match (self.token, counted.token) {
            (Some((token_id, token_limit)), Some(decision)) if decision.allowed => {
                Some(store.refund_token(self.org_id, token_id, token_limit))
            }
            _ => None,
        };
        match (org, token) {
            (None, None) => None,
            (Some(one), None) | (None, Some(one)) => Some(one),
            (Some(org), Some(token)) => Some(Box::pin(async move {
                let (org, token) = futures_util::future::join(org, token).await;
                org.and(token)
            })),
        }
    }
}

impl Counted {
    /// The decision the request is answered with: the stricter of the org's and the token's.
    pub(crate) fn decision(&self) -> Decision {
        match self.token {
            Some(token) => token.stricter(self.org),
            None => self.org,
        }
    }
}

/// Authenticated tokens, by a keyed hash of their `Authorization` value.
pub(crate) struct SeenTokens {
    hasher: RandomState,
    /// Each token's ask, and whether its last request's count was left to its handler.
    asks: RwLock<HashMap<u64, (Ask, bool)>>,
}

impl fmt::Debug for SeenTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SeenTokens").finish_non_exhaustive()
    }
}

impl Default for SeenTokens {
    fn default() -> Self {
        SeenTokens {
            hasher: RandomState::new(),
            asks: RwLock::new(HashMap::new()),
        }
    }
}

impl SeenTokens {
    fn key(&self, authorization: &HeaderValue) -> u64 {
        self.hasher.hash_one(authorization.as_bytes())
    }

    fn get(&self, key: u64) -> Option<(Ask, bool)> {
        let asks = self.asks.read().unwrap_or_else(PoisonError::into_inner);
        asks.get(&key).copied()
    }

    /// Remembers what an authenticated token counts against, and whether its request's count
    /// was left to its handler (its next is then not counted early).
    pub(crate) fn remember(&self, key: u64, ask: Ask, later: bool) {
        if self.get(key) == Some((ask, later)) {
            return;
        }
        let mut asks = self.asks.write().unwrap_or_else(PoisonError::into_inner);
        if asks.len() >= MAX_SEEN && !asks.contains_key(&key) {
            asks.clear();
        }
        asks.insert(key, (ask, later));
    }

    fn forget(&self, key: u64) {
        let mut asks = self.asks.write().unwrap_or_else(PoisonError::into_inner);
        asks.remove(&key);
    }
}

/// The store, limit and memory an [`EarlyRateLimitLayer`] shares with the `OrgRateLimitLayer`
/// it came from.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) store: Arc<dyn RateLimitStore>,
    pub(crate) limit: u32,
    pub(crate) seen: Arc<SeenTokens>,
}

/// Starts the rate-limit decision of a request whose token was authenticated before, for
/// `OrgRateLimit` to take. Made by
/// [`OrgRateLimitLayer::early`](super::OrgRateLimitLayer::early).
///
/// A token's org never changes, so once a token has been authenticated the org (and the
/// token's own limit) its next request counts against is known before the auth service
/// answers. [`EarlyRateLimit`] sits in front of `PatAuth` and starts that request's store
/// round trip at once; [`OrgRateLimit`](super::OrgRateLimit) further in takes the decision
/// instead of starting its own. The two round trips overlap, and the request waits for the
/// longer of them rather than for both in turn.
///
/// Nothing about the answers changes. `OrgRateLimit` still decides, after authentication and
/// only for the org the validated token names: a token refused by the auth service is 401
/// whatever the store said, and a request the limiter never reached (401, 403, a 503 from the
/// auth service, a client gone) is given back with [`RateLimitStore::refund`] before its
/// answer leaves, so it spends none of its org's limit. A token refused with 401 or 403 is
/// forgotten at once, until a request of it passes again: a flood of a revoked token, or of a
/// paused agent's, is counted and given back only by the requests already in flight when the
/// first refusal came back, and after that not at all.
///
/// A token whose last request's count `OrgRateLimit` left to its handler
/// ([`CountLater`](super::CountLater)) is not asked early: its handler counts it.
///
/// Tokens are remembered by a keyed hash of their `Authorization` value (never the value
/// itself), up to 16,384 at a time. A store that cannot give back
/// ([`RateLimitStore::refunds`] false) is never asked early.
#[derive(Clone)]
pub struct EarlyRateLimitLayer {
    shared: Shared,
}

impl fmt::Debug for EarlyRateLimitLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EarlyRateLimitLayer")
            .field("limit", &self.shared.limit)
            .finish_non_exhaustive()
    }
}

impl EarlyRateLimitLayer {
    pub(crate) fn new(shared: Shared) -> EarlyRateLimitLayer {
        EarlyRateLimitLayer { shared }
    }
}

impl<I> Layer<I> for EarlyRateLimitLayer {
    type Service = EarlyRateLimit<I>;

    fn layer(&self, inner: I) -> EarlyRateLimit<I> {
        EarlyRateLimit {
            inner,
            shared: self.shared.clone(),
        }
    }
}

/// The service of [`EarlyRateLimitLayer`].
#[derive(Clone)]
pub struct EarlyRateLimit<I> {
    inner: I,
    shared: Shared,
}

impl<I: fmt::Debug> fmt::Debug for EarlyRateLimit<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EarlyRateLimit")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<I, ReqBody, ResBody> Service<Request<ReqBody>> for EarlyRateLimit<I>
where
    I: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<ResBody>;
    type Error = I::Error;
    type Future = EarlyFuture<I::Future, ResBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), I::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> Self::Future {
        let early = request
            .headers()
            .get(header::AUTHORIZATION)
            .map(|authorization| {
                let shared = &self.shared;
                let key = shared.seen.key(authorization);
                let slot = match shared.seen.get(key) {
                    Some((ask, false)) if shared.store.refunds() => {
                        Slot::Counting(ask, ask.count(&*shared.store, shared.limit))
                    }
                    _ => Slot::Empty,
                };
                Early(Arc::new(Started {
                    key,
                    shared: shared.clone(),
                    slot: Mutex::new(slot),
                }))
            });
        if let Some(early) = &early {
            request.extensions_mut().insert(early.clone());
        }
        EarlyFuture {
            inner: self.inner.call(request),
            early,
            refunding: None,
            response: None,
        }
    }
}

pin_project! {
    /// Response future of [`EarlyRateLimit`].
    pub struct EarlyFuture<F, B> {
        #[pin]
        inner: F,
        early: Option<Early>,
        refunding: Option<StoreFuture<()>>,
        response: Option<Response<B>>,
    }
}

impl<F, B, E> Future for EarlyFuture<F, B>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Some(refunding) = this.refunding {
            // The refund's failure is the store's to report; the answer goes out regardless.
            let _ = ready!(refunding.as_mut().poll(cx));
            *this.refunding = None;
            if let Some(response) = this.response.take() {
                return Poll::Ready(Ok(response));
            }
        }
        if let Some(early) = this.early {
            early.0.drive(cx);
        }
        let response = ready!(this.inner.poll(cx))?;
        let Some(early) = this.early.take() else {
            return Poll::Ready(Ok(response));
        };
        // Refused for what the token is or may do: not asked early again until it passes, so
        // a revoked token or a paused agent's flood costs the store nothing once answered.
        if matches!(
            response.status(),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
        ) {
            early.0.shared.seen.forget(early.0.key);
        }
        let Some(mut refund) = early.0.leftover() else {
            return Poll::Ready(Ok(response));
        };
        // Given back before the answer leaves, so a client that saw its refusal finds its
        // org's allowance as it was.
        match refund.as_mut().poll(cx) {
            Poll::Ready(_) => Poll::Ready(Ok(response)),
            Poll::Pending => {
                *this.refunding = Some(refund);
                *this.response = Some(response);
                Poll::Pending
            }
        }
    }
}

/// On the request: the decision [`EarlyRateLimit`] started, for `OrgRateLimit` to take.
#[derive(Clone)]
pub(crate) struct Early(Arc<Started>);

struct Started {
    key: u64,
    shared: Shared,
    slot: Mutex<Slot>,
}

enum Slot {
    /// Nothing started, or taken by `OrgRateLimit`.
    Empty,
    Counting(Ask, StoreFuture<Counted>),
    Counted(Ask, Result<Counted, StoreError>),
}

impl Early {
    /// Remembers the request's token as `ask`'s (and whether its count is left to its handler,
    /// `later`) and takes the decision started for it, if one was started for the same ask. A
    /// decision for another ask (the token's own limit changed) stays, to be given back.
    pub(crate) fn take(&self, ask: Ask, later: bool) -> Option<StoreFuture<Counted>> {
        let started = &self.0;
        started.shared.seen.remember(started.key, ask, later);
        let mut slot = started.lock();
        match &*slot {
            Slot::Counting(early, _) | Slot::Counted(early, _) if *early == ask => {}
            _ => return None,
        }
        match std::mem::replace(&mut *slot, Slot::Empty) {
            Slot::Counting(_, count) => Some(count),
            Slot::Counted(_, result) => Some(Box::pin(std::future::ready(result))),
            Slot::Empty => None,
        }
    }
}

impl Started {
    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Polls the decision until `OrgRateLimit` takes it, so its command leaves with the
    /// request's first poll and its answer is read as it arrives.
    fn drive(&self, cx: &mut Context<'_>) {
        let mut slot = self.lock();
        if let Slot::Counting(ask, count) = &mut *slot
            && let Poll::Ready(result) = count.as_mut().poll(cx)
        {
            *slot = Slot::Counted(*ask, result);
        }
    }

    /// What gives back a decision nobody took.
    fn leftover(&self) -> Option<StoreFuture<()>> {
        let slot = std::mem::replace(&mut *self.lock(), Slot::Empty);
        let Shared { store, limit, .. } = self.shared.clone();
        match slot {
            Slot::Empty | Slot::Counted(_, Err(_)) => None,
            Slot::Counted(ask, Ok(counted)) => ask.refund(&store, limit, counted),
            Slot::Counting(ask, count) => Some(Box::pin(async move {
                match count
                    .await
                    .map(|counted| ask.refund(&store, limit, counted))
                {
                    Ok(Some(refund)) => refund.await,
                    _ => Ok(()),
                }
            })),
        }
    }
}

impl Drop for Started {
    /// A request dropped before its answer (the client went away) still gives back what it
    /// counted, on a task of its own.
    fn drop(&mut self) {
        if let Some(refund) = self.leftover()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(refund);
        }
    }
}
