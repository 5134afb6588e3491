//! Tokens per minute at the gateway: the estimate a call reserves before the provider sees it,
//! and the settlement to what it really used.
//!
//! The allowance itself (atomic, shared by every replica) is svc-tower's
//! [`TokenBudgetStore`]; this module decides how much to reserve and how much was used:
//!
//! - the estimate is every part of the request a provider bills (see
//!   [`crate::token_estimate`]: all text, tools and schemas, images, token ids) and `n` times
//!   the completion cap (`max_completion_tokens`, `max_tokens` or `max_output_tokens`, else
//!   `SVC_RATE_LIMIT_DEFAULT_COMPLETION_TOKENS`);
//! - the settlement is the provider's reported usage (for a stream, its usage chunk); a stream
//!   that ended before reporting it is charged its prompt estimate plus a quarter of the event
//!   bytes it sent; a call no provider answered is charged nothing. A call that used more than
//!   it reserved owes the difference, but the debt never reaches past one window of the
//!   limit: the org waits at most a minute, never an hour.
//!
//! The org's limit is `SVC_RATE_LIMIT_TPM`; a token's own comes from ValidateToken. Like the
//! request limit, a store that fails or is slow fails open.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use svc_tower::context::OrgContext;
use svc_tower::rate_limit::{TokenBudget, TokenBudgetStore, TokenDecision};

use crate::request::ApiRequest;
use crate::token_estimate;
use crate::usage::Report;

/// Completion tokens reserved for a request that names no maximum.
pub const DEFAULT_COMPLETION_TOKENS: u64 = 1024;
/// How long a reservation may take by default (`SVC_RATE_LIMIT_TPM_TIMEOUT`) before the call
/// proceeds unmetered; a settlement gets four times as long. Longer
/// than the request limit's 25 ms: a refused burst would otherwise pass unmetered exactly when
/// it queues for the store, which for a budget is the case that matters.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(250);

/// The reservation of one call.
#[derive(Debug, Clone, Copy)]
pub struct Reservation {
    /// The buckets it drew on.
    pub budget: TokenBudget,
    /// Tokens reserved.
    pub tokens: u64,
    /// The prompt part of the estimate, for a stream cut short.
    pub prompt: u64,
    /// The store's answer, for the headers.
    pub decision: TokenDecision,
}

/// Reserves and settles calls' tokens.
#[derive(Clone)]
pub struct TokenLimiter {
    store: Arc<dyn TokenBudgetStore>,
    org_limit: Option<u64>,
    default_completion: u64,
    timeout: Duration,
}

impl std::fmt::Debug for TokenLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenLimiter")
            .field("org_limit", &self.org_limit)
            .field("default_completion", &self.default_completion)
            .finish_non_exhaustive()
    }
}

impl TokenLimiter {
    /// A limiter on `store`: `org_limit` tokens per minute per org (`None`: only tokens' own
    /// limits apply).
    pub fn new(
        store: Arc<dyn TokenBudgetStore>,
        org_limit: Option<u64>,
        default_completion: u64,
        timeout: Duration,
    ) -> TokenLimiter {
        TokenLimiter {
            store,
            org_limit,
            default_completion,
            timeout,
        }
    }

    /// The prompt and completion estimate of `api`.
    pub fn estimate(&self, api: &ApiRequest) -> (u64, u64) {
        let prompt = token_estimate::prompt_tokens(&api.json, api.message_count);
        let completion =
            token_estimate::completion_tokens(&api.json, api.max_tokens, self.default_completion);
        (prompt, completion)
    }

    /// Reserves `api`'s estimate for `org`; `None` when no limit applies. A store that fails
    /// or misses its timeout lets the call through unmetered (and it settles nothing).
    pub async fn reserve(&self, org: &OrgContext, api: &ApiRequest) -> Option<Reservation> {
        let budget = TokenBudget {
            org_id: org.org_id,
            org_limit: self.org_limit,
            token_id: org.token_id,
            token_limit: org.limits.tokens_per_minute,
        };
        if !budget.is_limited() {
            return None;
        }
        let (prompt, completion) = self.estimate(api);
        let tokens = prompt.saturating_add(completion);
        let decision =
            match tokio::time::timeout(self.timeout, self.store.reserve(budget, tokens)).await {
                Ok(Ok(decision)) => decision,
                outcome => {
                    warn_fail_open(outcome.err().is_some());
                    return Some(Reservation {
                        budget: TokenBudget {
                            org_limit: None,
                            token_limit: None,
                            ..budget
                        },
                        tokens: 0,
                        prompt,
                        decision: budget.unmetered(),
                    });
                }
            };
        Some(Reservation {
            budget,
            tokens,
            prompt,
            decision,
        })
    }

    /// Settles `reservation` to what the call used (see the [module docs](self)); `report` is
    /// `None` when no provider answered.
    pub async fn settle(&self, reservation: &Reservation, report: Option<&Report>) {
        if !reservation.budget.is_limited() || !reservation.decision.allowed {
            return;
        }
        let used = match report {
            Some(Report {
                usage: Some(usage), ..
            }) => u64::try_from(usage.prompt_tokens.saturating_add(usage.completion_tokens))
                .unwrap_or(0),
            Some(Report {
                streamed_bytes: Some(bytes),
                ..
            }) => reservation.prompt.saturating_add(bytes.div_ceil(4)),
            _ => 0,
        };
        let settle = self
            .store
            .settle(reservation.budget, reservation.tokens, used);
        if !matches!(
            tokio::time::timeout(self.timeout * 4, settle).await,
            Ok(Ok(_))
        ) {
            warn_fail_open(false);
        }
    }
}

/// Warns at most every few seconds: a Redis outage must not flood the log.
fn warn_fail_open(timed_out: bool) {
    static LAST: AtomicI64 = AtomicI64::new(0);
    let now = chrono::Utc::now().timestamp();
    let last = LAST.load(Ordering::Relaxed);
    if now - last >= 5
        && LAST
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        tracing::warn!(
            timed_out,
            "token rate limit store failed; calls proceed unmetered"
        );
    }
}
