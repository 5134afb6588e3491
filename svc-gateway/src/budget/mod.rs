//! Money: what each model costs, and what each call cost.
//!
//! A registry `[[models]]` entry may carry a [`Price`] in US dollars per million tokens; the
//! gateway turns every call's reported usage into integer micro-dollars with [`CostMeter`]
//! and records them in the usage ledger. A call to a model without a price costs 0 and is
//! counted in `svc_proxy_unpriced_calls_total`, so an operator sees unpriced traffic.
//!
//! This module is the one place the request path asks about money: the handler calls
//! [`CostMeter::observe`] with each call's report and [`CostMeter::cost`] when it records the
//! call in the ledger.

mod cost;
mod price;

pub use cost::{CallUsage, CostMeter};
pub use price::{MAX_DOLLARS_PER_MILLION, MOCK_PRICE, Price};
