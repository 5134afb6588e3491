//! Budgets as spend caps: the counter of each budget a call draws on, what the call reserves
//! against it, and what the client is told.
//!
//! A budget's counter is named by its target and its current period
//! (`budget:agent:<id>:day:20261125`), so a new period starts a new counter at zero and the
//! last one expires soon after its period ends. A `total` budget's counter lives a week at a
//! time; when it is gone it is rebuilt from the ledger like any other.

use chrono::{DateTime, Utc};
use http::{HeaderName, HeaderValue};
use svc_tower::context::{Budget, BudgetPeriod, BudgetTarget};
use svc_tower::error::{ApiError, ErrorCode};
use svc_tower::rate_limit::{CapState, SpendCap};

/// `x-svc-budget-remaining-usd`: what the tightest budget of the request has left, in dollars.
pub static X_SVC_BUDGET_REMAINING_USD: HeaderName =
    HeaderName::from_static("x-svc-budget-remaining-usd");

/// How long a counter outlives its period: a settlement that arrives after the period ended
/// still finds it.
const AFTER_PERIOD_SECS: i64 = 3_600;
/// How long a `total` budget's counter lives before it is rebuilt from the ledger.
const TOTAL_TTL_SECS: u64 = 7 * 24 * 3_600;

/// The counter name of `budget` in the period holding `now`.
pub fn counter(budget: &Budget, now: DateTime<Utc>) -> String {
    let target = match budget.target {
        BudgetTarget::Org => "org".to_owned(),
        BudgetTarget::Agent(id) => format!("agent:{id}"),
        BudgetTarget::Token(id) => format!("token:{id}"),
    };
    let period = budget.period.as_str();
    match budget.period.start(now) {
        Some(start) => format!("budget:{target}:{period}:{}", start.format("%Y%m%d")),
        None => format!("budget:{target}:{period}"),
    }
}

/// The cap of `budget` for a call that reserves `amount` micro-dollars, at `now`.
pub fn cap(budget: &Budget, amount: u64, now: DateTime<Utc>) -> SpendCap {
    let ttl_secs = match budget.period.end(now) {
        Some(end) => u64::try_from((end - now).num_seconds() + AFTER_PERIOD_SECS).unwrap_or(1),
        None => TOTAL_TTL_SECS,
    };
    SpendCap {
        name: counter(budget, now),
        limit: u64::try_from(budget.limit_usd_micros).unwrap_or(0),
        amount,
        ttl_secs,
        seed: None,
    }
}

/// The budget whose state leaves the least: the one that answers for the request.
pub fn tightest<'a>(
    budgets: &'a [Budget],
    states: &'a [CapState],
) -> Option<(&'a Budget, &'a CapState)> {
    budgets
        .iter()
        .zip(states)
        .min_by_key(|(_, state)| (state.fits, state.remaining()))
}

/// The `x-svc-budget-remaining-usd` value of `micros` micro-dollars: dollars with up to six
/// decimals.
pub fn remaining_header(micros: u64) -> HeaderValue {
    let text = dollars(micros);
    HeaderValue::from_str(&text).unwrap_or(HeaderValue::from_static("0"))
}

/// `micros` as dollars, without trailing zeros: `1.5`, `0.000125`, `3`.
pub fn dollars(micros: u64) -> String {
    let whole = micros / 1_000_000;
    let fraction = micros % 1_000_000;
    if fraction == 0 {
        return whole.to_string();
    }
    let fraction = format!("{fraction:06}");
    format!("{whole}.{}", fraction.trim_end_matches('0'))
}

/// The 429 `BUDGET_EXCEEDED` of a call that `budget` (at `state`) cannot hold, at `now`. Its
/// detail names the budget's scope and period, never an id or another org's figure.
pub fn refusal(budget: &Budget, state: &CapState, now: DateTime<Utc>) -> ApiError {
    let scope = match budget.target {
        BudgetTarget::Org => "org",
        BudgetTarget::Agent(_) => "agent",
        BudgetTarget::Token(_) => "token",
    };
    let per = match budget.period {
        BudgetPeriod::Total => "in total".to_owned(),
        period => format!("per {}", period.as_str()),
    };
    let mut detail = format!(
        "The {scope} budget of ${} {per} cannot hold this request's worst-case cost: ${} \
         remains.",
        dollars(state.limit),
        dollars(state.remaining()),
    );
    let mut error = ApiError::new(ErrorCode::BudgetExceeded);
    if let Some(end) = budget.period.end(now) {
        detail.push_str(&format!(
            " It resets at {}.",
            end.format("%Y-%m-%dT%H:%M:%SZ")
        ));
        let wait = (end - now).num_seconds().max(1);
        // A client waits for a reset within the day; past that, it is told when, not to wait.
        if wait <= 86_400 {
            error = error.with_retry_after(u64::try_from(wait).unwrap_or(1));
        }
    }
    error.with_detail(detail).with_header(
        X_SVC_BUDGET_REMAINING_USD.clone(),
        remaining_header(state.remaining()),
    )
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use uuid::Uuid;

    use super::*;

    #[test]
    fn counters_name_their_period_and_live_past_it() {
        let now = Utc.with_ymd_and_hms(2026, 11, 25, 23, 0, 0).unwrap();
        let agent = Uuid::new_v4();
        let day = Budget {
            target: BudgetTarget::Agent(agent),
            limit_usd_micros: 1_000_000,
            period: BudgetPeriod::Day,
        };
        let cap = cap(&day, 250, now);
        assert_eq!(cap.name, format!("budget:agent:{agent}:day:20261125"));
        assert_eq!(
            (cap.limit, cap.amount, cap.ttl_secs),
            (1_000_000, 250, 7_200)
        );
        let tomorrow = Utc.with_ymd_and_hms(2026, 11, 26, 0, 0, 1).unwrap();
        assert_eq!(
            counter(&day, tomorrow),
            format!("budget:agent:{agent}:day:20261126"),
            "a new day, a new counter"
        );
        let total = Budget {
            target: BudgetTarget::Org,
            limit_usd_micros: 5,
            period: BudgetPeriod::Total,
        };
        assert_eq!(counter(&total, now), "budget:org:total");
    }

    #[test]
    fn dollars_have_up_to_six_decimals() {
        assert_eq!(dollars(0), "0");
        assert_eq!(dollars(3_000_000), "3");
        assert_eq!(dollars(1_500_000), "1.5");
        assert_eq!(dollars(125), "0.000125");
        assert_eq!(dollars(12_345_678), "12.345678");
    }

    #[test]
    fn a_refusal_names_the_scope_and_waits_for_a_reset_within_the_day() {
        let now = Utc.with_ymd_and_hms(2026, 11, 25, 22, 0, 0).unwrap();
        let budget = Budget {
            target: BudgetTarget::Token(Uuid::new_v4()),
            limit_usd_micros: 2_000_000,
            period: BudgetPeriod::Day,
        };
        let state = CapState {
            fits: false,
            limit: 2_000_000,
            spent: 1_990_000,
        };
        let error = refusal(&budget, &state, now);
        assert_eq!(error.code(), &ErrorCode::BudgetExceeded);
        let detail = error.detail().unwrap_or_default();
        assert!(detail.contains("token budget of $2 per day"), "{detail}");
        assert!(detail.contains("$0.01 remains"), "{detail}");
        let retry = |error: &ApiError| error.headers().get(http::header::RETRY_AFTER).cloned();
        assert_eq!(retry(&error), Some(HeaderValue::from(7_200)));
        assert_eq!(
            error.headers().get(&X_SVC_BUDGET_REMAINING_USD),
            Some(&HeaderValue::from_static("0.01"))
        );
        let month = Budget {
            period: BudgetPeriod::Month,
            ..budget
        };
        assert_eq!(retry(&refusal(&month, &state, now)), None);
    }
}
