//! A request's rate-limit count left to its handler, to be made in the same store step as the
//! call's token reservation; see [`OrgRateLimitLayer::count_later_when`].
//!
//! [`OrgRateLimitLayer::count_later_when`]: super::OrgRateLimitLayer::count_later_when

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use http::HeaderMap;

use super::early::{Ask, MAX_SEEN};
use super::store::{Decision, RateLimitStore, RequestCount};
use crate::context::OrgContext;

/// Which requests' counts wait for their handler: those of a context and request head it
/// returns true for.
pub(crate) type Predicate = Arc<dyn Fn(&OrgContext, &HeaderMap) -> bool + Send + Sync>;

/// What [`OrgRateLimit`](super::OrgRateLimit) needs to leave counts to handlers.
#[derive(Clone)]
pub(crate) struct Deferral {
    pub(crate) when: Predicate,
    pub(crate) store: Arc<dyn RateLimitStore>,
    pub(crate) refused: Arc<Refusals>,
}

/// The asks refused lately, each until its refusal's `Retry-After`: until then their requests
/// are counted before their bodies are read, as every request is without a deferral, so a
/// client that keeps sending over its limit has one body read, not each. Redis still decides
/// each of those requests.
#[derive(Debug, Default)]
pub(crate) struct Refusals {
    until: RwLock<HashMap<Ask, Instant>>,
}

impl Refusals {
    /// Whether `ask` was refused and its retry time has not come.
    pub(crate) fn holds(&self, ask: &Ask) -> bool {
        let until = self.until.read().unwrap_or_else(PoisonError::into_inner);
        until.get(ask).is_some_and(|until| Instant::now() < *until)
    }

    /// Notes `decision` of `ask`: a refusal until its retry time.
    pub(crate) fn note(&self, ask: Ask, decision: &Decision) {
        if decision.allowed {
            return;
        }
        let now = Instant::now();
        let mut until = self.until.write().unwrap_or_else(PoisonError::into_inner);
        if until.len() >= MAX_SEEN {
            until.retain(|_, at| now < *at);
            if until.len() >= MAX_SEEN {
                until.clear();
            }
        }
        until.insert(
            ask,
            now + Duration::from_secs(decision.retry_after_secs.max(1)),
        );
    }
}

/// On a request whose rate-limit count [`OrgRateLimit`](super::OrgRateLimit) left to its
/// handler: the handler counts the request with its token reservation
/// ([`TokenBudgetStore::reserve_counting`](super::TokenBudgetStore::reserve_counting)) and
/// says what was decided with [`counted`](Self::counted), or counts it alone with
/// [`count`](Self::count), before anything the request does outside the gateway (the provider
/// call). SPEC's order of answers holds: a handler that answers without counting (a body that
/// does not parse) is counted after it, and a request over its limit is then answered 429
/// instead. Whatever the handler answers, the `X-RateLimit-*` headers are the decision's.
#[derive(Clone)]
pub struct CountLater(Arc<Later>);

struct Later {
    ask: Ask,
    limit: u32,
    store: Arc<dyn RateLimitStore>,
    timeout: Duration,
    /// `None` until counted; then the decision, `None` in it when the count failed open.
    decision: Mutex<Option<Option<Decision>>>,
}

impl fmt::Debug for CountLater {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountLater")
            .field("requests", &self.requests())
            .field("decision", &self.decision())
            .finish()
    }
}

impl CountLater {
    pub(crate) fn new(ask: Ask, limit: u32, deferral: &Deferral, timeout: Duration) -> CountLater {
        CountLater(Arc::new(Later {
            ask,
            limit,
            store: deferral.store.clone(),
            timeout,
            decision: Mutex::new(None),
        }))
    }

    /// The limits the request counts against.
    pub fn requests(&self) -> RequestCount {
        let Later { ask, limit, .. } = &*self.0;
        ask.requests(*limit)
    }

    /// Records what the handler's store step decided for the request: `None` when the step
    /// failed and the request goes on as if unlimited.
    pub fn counted(&self, decision: Option<Decision>) {
        *self.lock() = Some(decision);
    }

    /// Counts the request alone, unless it was counted already; whether it may go on. A store
    /// that fails or takes longer than the limiter's timeout lets it go on.
    pub async fn count(&self) -> bool {
        if let Some(decision) = self.decision() {
            return decision.is_none_or(|d| d.allowed);
        }
        let Later {
            ask,
            limit,
            store,
            timeout,
            ..
        } = &*self.0;
        let counted = tokio::time::timeout(*timeout, ask.count(&**store, *limit)).await;
        let decision = match counted {
            Ok(Ok(counted)) => Some(counted.decision()),
            _ => None,
        };
        self.counted(decision);
        decision.is_none_or(|d| d.allowed)
    }

    /// Whether the request was counted (or its count failed open).
    pub fn is_counted(&self) -> bool {
        self.decision().is_some()
    }

    /// `None` until counted.
    pub(crate) fn decision(&self) -> Option<Option<Decision>> {
        *self.lock()
    }

    pub(crate) fn ask(&self) -> (Ask, u32) {
        (self.0.ask, self.0.limit)
    }

    pub(crate) fn store(&self) -> &Arc<dyn RateLimitStore> {
        &self.0.store
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Option<Decision>>> {
        self.0
            .decision
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}
