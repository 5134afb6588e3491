//! Money: what each model costs, and what each call cost.
//!
//! A registry `[[models]]` entry may carry a [`Price`] in US dollars per million tokens; the
//! gateway turns every call's reported usage into integer micro-dollars with [`CostMeter`]
//! and records them in the usage ledger. A call to a model without a price costs 0 and is
//! counted in `svc_proxy_unpriced_calls_total`, so an operator sees unpriced traffic.
//!
//! Budgets (an org's, an agent's or a token's limit per period, answered by ValidateToken)
//! are held as spend caps beside the token limit: [`caps`] names their counters and words
//! their refusal; the accounting around each call reserves its worst-case cost against them and
//! settles to [`CostMeter::cost`] of what it used.

pub mod caps;
mod cost;
mod price;

pub use cost::{CallUsage, CostMeter};
pub use price::{MAX_DOLLARS_PER_MILLION, MOCK_PRICE, Price};
