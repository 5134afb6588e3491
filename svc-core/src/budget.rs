//! Money budgets: what one limits (an org, an agent or a token), the period it counts over
//! and its limit in US micro-dollars. The identity plane stores them and answers them with
//! every validated token; the gateway holds calls to them.

use chrono::{DateTime, Datelike, Days, Months, NaiveTime, Utc};
use uuid::Uuid;

/// What a budget limits: the whole org, one of its agents or one of its tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BudgetTarget {
    /// The org's own calls, every agent and token together.
    Org,
    /// One agent's calls.
    Agent(Uuid),
    /// One token's calls.
    Token(Uuid),
}

impl BudgetTarget {
    /// The target a scope word and id name: an empty id for `org`, an id for the others.
    pub fn parse(scope: &str, target_id: Option<Uuid>) -> Result<BudgetTarget, String> {
        match (scope, target_id) {
            ("org", None) => Ok(BudgetTarget::Org),
            ("org", Some(_)) => Err("an org budget names no target_id".to_owned()),
            ("agent", Some(id)) => Ok(BudgetTarget::Agent(id)),
            ("token", Some(id)) => Ok(BudgetTarget::Token(id)),
            ("agent" | "token", None) => Err(format!("a {scope} budget needs a target_id")),
            (other, _) => Err(format!("{other:?} is not org, agent or token")),
        }
    }

    /// The stored and wire word.
    pub fn scope(self) -> &'static str {
        match self {
            BudgetTarget::Org => "org",
            BudgetTarget::Agent(_) => "agent",
            BudgetTarget::Token(_) => "token",
        }
    }

    /// The agent's or token's id; `None` for the org.
    pub fn id(self) -> Option<Uuid> {
        match self {
            BudgetTarget::Org => None,
            BudgetTarget::Agent(id) | BudgetTarget::Token(id) => Some(id),
        }
    }

    /// The stored key: the org's own id for an org budget.
    pub fn key(self, org_id: Uuid) -> Uuid {
        self.id().unwrap_or(org_id)
    }
}

/// The span a budget's spend is counted over, in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BudgetPeriod {
    /// From midnight.
    Day,
    /// From Monday's midnight.
    Week,
    /// From the first of the month.
    Month,
    /// Since ever: it never resets.
    Total,
}

impl BudgetPeriod {
    /// The stored and wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetPeriod::Day => "day",
            BudgetPeriod::Week => "week",
            BudgetPeriod::Month => "month",
            BudgetPeriod::Total => "total",
        }
    }

    /// The period a word names.
    pub fn parse(word: &str) -> Result<BudgetPeriod, String> {
        match word {
            "day" => Ok(BudgetPeriod::Day),
            "week" => Ok(BudgetPeriod::Week),
            "month" => Ok(BudgetPeriod::Month),
            "total" => Ok(BudgetPeriod::Total),
            other => Err(format!("{other:?} is not day, week, month or total")),
        }
    }

    /// When the period that holds `now` began; `None` for `total`.
    pub fn start(self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let today = now.date_naive();
        let first = match self {
            BudgetPeriod::Day => today,
            BudgetPeriod::Week => {
                today - Days::new(u64::from(today.weekday().num_days_from_monday()))
            }
            BudgetPeriod::Month => today.with_day(1)?,
            BudgetPeriod::Total => return None,
        };
        Some(first.and_time(NaiveTime::MIN).and_utc())
    }

    /// When the period that holds `now` ends (the next one begins); `None` for `total`.
    pub fn end(self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let start = self.start(now)?;
        match self {
            BudgetPeriod::Day => start.checked_add_days(Days::new(1)),
            BudgetPeriod::Week => start.checked_add_days(Days::new(7)),
            BudgetPeriod::Month => start.checked_add_months(Months::new(1)),
            BudgetPeriod::Total => None,
        }
    }
}

/// One budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// What it limits.
    pub target: BudgetTarget,
    /// The most its target may spend in a period, in US micro-dollars.
    pub limit_usd_micros: i64,
    /// The period.
    pub period: BudgetPeriod,
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn periods_start_and_end_in_utc() {
        // A Wednesday.
        let now = Utc.with_ymd_and_hms(2026, 11, 25, 17, 30, 0).unwrap();
        let at = |y, m, d| Some(Utc.with_ymd_and_hms(y, m, d, 0, 0, 0).unwrap());
        assert_eq!(BudgetPeriod::Day.start(now), at(2026, 11, 25));
        assert_eq!(BudgetPeriod::Day.end(now), at(2026, 11, 26));
        assert_eq!(BudgetPeriod::Week.start(now), at(2026, 11, 23));
        assert_eq!(BudgetPeriod::Week.end(now), at(2026, 11, 30));
        assert_eq!(BudgetPeriod::Month.start(now), at(2026, 11, 1));
        assert_eq!(BudgetPeriod::Month.end(now), at(2026, 12, 1));
        let december = Utc.with_ymd_and_hms(2026, 12, 31, 23, 59, 59).unwrap();
        assert_eq!(BudgetPeriod::Month.end(december), at(2027, 1, 1));
        assert_eq!(BudgetPeriod::Total.start(now), None);
        assert_eq!(BudgetPeriod::Total.end(now), None);
    }

    #[test]
    fn targets_and_periods_parse_their_words() {
        let id = Uuid::new_v4();
        assert_eq!(BudgetTarget::parse("org", None), Ok(BudgetTarget::Org));
        assert_eq!(
            BudgetTarget::parse("agent", Some(id)),
            Ok(BudgetTarget::Agent(id))
        );
        assert_eq!(
            BudgetTarget::parse("token", Some(id)).map(BudgetTarget::scope),
            Ok("token")
        );
        assert!(BudgetTarget::parse("org", Some(id)).is_err());
        assert!(BudgetTarget::parse("agent", None).is_err());
        assert!(BudgetTarget::parse("team", Some(id)).is_err());
        for period in ["day", "week", "month", "total"] {
            assert_eq!(
                BudgetPeriod::parse(period).map(BudgetPeriod::as_str),
                Ok(period)
            );
        }
        assert!(BudgetPeriod::parse("year").is_err());
    }
}
