//! The accounting around each provider call: one place that holds a call's tokens and money
//! before the provider sees it, and settles them, counts its usage and writes its ledger row
//! and session checkpoint where its answer ends.
//!
//! The path of a provider-backed request, top to bottom:
//!
//! 1. the layers in front authenticate the token (learning its limits and budgets), check the
//!    agent and the route's permission, and count the request against its org's rate limit,
//!    or, for a call that will reserve (a token limit or a budget applies, and no
//!    `Idempotency-Key`), leave that count to step 4 (see [`hold`]);
//! 2. the handler ([`crate::routes::forward`]) reads the body through the body limit, parses
//!    and validates it once, and builds the [`Call`];
//! 3. Idempotency replays a finished answer or claims the key (a replay holds nothing);
//! 4. [`Accounting::call`] holds the call's estimated tokens and worst-case cost against every
//!    limit and budget that applies, with its request's count when it was left here, in one
//!    step of the shared store ([`hold`]), or refuses it;
//! 5. [`Forward`] calls the provider; its answer's body knows the call's usage;
//! 6. the answer goes back up in a [`Metered`] body, which settles the hold to the real usage
//!    and cost and records the call where the body ends, for JSON and SSE alike.

pub mod hold;
mod metered;

use std::sync::Arc;

use axum::body::Body;
use futures_util::future::BoxFuture;
use http::Response;

pub use hold::{Hold, Holder, SpendSource};
pub use metered::{Metered, Settlement};

use crate::budget::CostMeter;
use crate::call::Call;
use crate::forward::Forward;
use crate::ledger::Ledger;
use crate::session::CheckpointWriter;
use crate::usage::TokenMetrics;

/// Where calls are accounted.
pub(crate) struct Books {
    pub(crate) holder: Holder,
    pub(crate) tokens: TokenMetrics,
    pub(crate) cost: CostMeter,
    pub(crate) ledger: Option<Ledger>,
    pub(crate) checkpoints: Option<CheckpointWriter>,
}

/// Holds, forwards and accounts for provider calls; cloning shares everything.
#[derive(Clone)]
pub struct Accounting {
    books: Arc<Books>,
    forward: Forward,
}

impl std::fmt::Debug for Accounting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Accounting")
            .field("holder", &self.books.holder)
            .finish_non_exhaustive()
    }
}

impl Accounting {
    /// Accounts for the calls `forward` makes: holds with `holder`, counts tokens in `tokens`,
    /// prices with `cost`, records in `ledger` and checkpoints sessions with `checkpoints`.
    pub fn new(
        forward: Forward,
        holder: Holder,
        tokens: TokenMetrics,
        cost: CostMeter,
        ledger: Option<Ledger>,
        checkpoints: Option<CheckpointWriter>,
    ) -> Accounting {
        Accounting {
            books: Arc::new(Books {
                holder,
                tokens,
                cost,
                ledger,
                checkpoints,
            }),
            forward,
        }
    }

    /// Whether a call of `org` reserves tokens or money before the provider sees it.
    pub fn meters(&self, org: &svc_tower::context::OrgContext) -> bool {
        self.books.holder.meters(org)
    }

    /// Holds `call`'s tokens and money, makes it, and answers with a body that settles them.
    pub fn call(&self, call: Call) -> BoxFuture<'static, Response<Body>> {
        let this = self.clone();
        Box::pin(async move { this.account(call).await })
    }

    async fn account(&self, call: Call) -> Response<Body> {
        let hold = match self.books.holder.hold(&call).await {
            Ok(hold) => hold,
            Err(refused) => return (*refused).into_response_with(Body::empty()),
        };
        let answer = self.forward.answer(&call).await;
        let (mut head, body) = answer.into_parts();
        hold.set_headers(&mut head.headers);
        let settlement = Settlement {
            books: self.books.clone(),
            status: head.status.as_u16(),
            latency_ms: i32::try_from(call.started.elapsed().as_millis()).unwrap_or(i32::MAX),
            at: chrono::Utc::now(),
            call,
            hold,
        };
        Response::from_parts(head, Body::new(Metered::new(body, settlement)))
    }
}
