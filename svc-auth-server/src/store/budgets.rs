//! Money budgets: what a budget is, the period it counts over, and how one is set, deleted
//! and listed with its spend, written once for every backend (each supplies the statements,
//! on a connection inside an org-scoped transaction).

use std::future::Future;

use chrono::{DateTime, Datelike, Days, Months, NaiveTime, Utc};
use uuid::Uuid;

use super::agent_moves::AgentStatements;
use super::{AuditEntry, Reference, StoreError};

/// The statements budgets need. Audit events are written with [`AgentStatements`]'s.
pub(super) trait BudgetStatements: AgentStatements {
    /// Whether the agent or token is in `org_id` (the org is always its own).
    fn target_in_org(
        &mut self,
        org_id: Uuid,
        target: BudgetTarget,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Inserts the budget, or replaces the one its target has.
    fn upsert_budget(
        &mut self,
        org_id: Uuid,
        budget: &Budget,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Removes the target's budget; false when it had none.
    fn remove_budget(
        &mut self,
        org_id: Uuid,
        target: BudgetTarget,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Every budget of `org_id`: the org's first, then by scope and target.
    fn budgets(
        &mut self,
        org_id: Uuid,
    ) -> impl Future<Output = Result<Vec<Budget>, StoreError>> + Send;

    /// The ledger's cost summed over the target's calls since `since` (ever, when `None`).
    fn spent(
        &mut self,
        org_id: Uuid,
        target: BudgetTarget,
        since: Option<DateTime<Utc>>,
    ) -> impl Future<Output = Result<i64, StoreError>> + Send;
}

/// [`Store::set_budget`](super::Store::set_budget) on one connection.
pub(super) async fn set<C: BudgetStatements>(
    conn: &mut C,
    org_id: Uuid,
    budget: Budget,
    audit: AuditEntry,
) -> Result<Budget, StoreError> {
    if !conn.target_in_org(org_id, budget.target).await? {
        return Err(StoreError::NotInOrg(match budget.target {
            BudgetTarget::Token(_) => Reference::Token,
            _ => Reference::Agent,
        }));
    }
    conn.upsert_budget(org_id, &budget).await?;
    let audit = audit
        .detail("scope", budget.target.scope())
        .detail("limit_usd_micros", budget.limit_usd_micros.to_string())
        .detail("period", budget.period.as_str());
    conn.insert_audit(org_id, &audit).await?;
    Ok(budget)
}

/// [`Store::delete_budget`](super::Store::delete_budget) on one connection.
pub(super) async fn delete<C: BudgetStatements>(
    conn: &mut C,
    org_id: Uuid,
    target: BudgetTarget,
    audit: AuditEntry,
) -> Result<bool, StoreError> {
    if !conn.remove_budget(org_id, target).await? {
        return Ok(false);
    }
    conn.insert_audit(org_id, &audit.detail("scope", target.scope()))
        .await?;
    Ok(true)
}

/// [`Store::list_budgets`](super::Store::list_budgets) on one connection.
pub(super) async fn list<C: BudgetStatements>(
    conn: &mut C,
    org_id: Uuid,
    now: DateTime<Utc>,
) -> Result<Vec<BudgetSpend>, StoreError> {
    let budgets = conn.budgets(org_id).await?;
    let mut out = Vec::with_capacity(budgets.len());
    for budget in budgets {
        let spent_usd_micros = conn
            .spent(org_id, budget.target, budget.period.start(now))
            .await?;
        out.push(BudgetSpend {
            budget,
            spent_usd_micros,
        });
    }
    Ok(out)
}

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

    /// The target a stored scope and key name.
    pub fn from_stored(scope: &str, key: Uuid) -> Result<BudgetTarget, StoreError> {
        match scope {
            "org" => Ok(BudgetTarget::Org),
            "agent" => Ok(BudgetTarget::Agent(key)),
            "token" => Ok(BudgetTarget::Token(key)),
            other => Err(StoreError::Query(
                format!("stored budget scope {other:?} is unknown").into(),
            )),
        }
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

/// A budget with its target's spend in the current period, from the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetSpend {
    /// The budget.
    pub budget: Budget,
    /// Spent in the period that holds the time asked about, in US micro-dollars.
    pub spent_usd_micros: i64,
}

/// A stored budget row: scope, target key, limit, period.
pub(super) type BudgetRow = (String, Uuid, i64, String);

/// The budgets stored rows hold; a word no budget has is a query error.
pub(super) fn from_rows(rows: Vec<BudgetRow>) -> Result<Vec<Budget>, StoreError> {
    rows.into_iter()
        .map(|(scope, key, limit_usd_micros, period)| {
            Ok(Budget {
                target: BudgetTarget::from_stored(&scope, key)?,
                limit_usd_micros,
                period: BudgetPeriod::parse(&period).map_err(|e| StoreError::Query(e.into()))?,
            })
        })
        .collect()
}

/// The ledger's filter of a target's calls, with `{id}` the backend's placeholder of its id;
/// the org's is every call.
pub(super) fn ledger_filter(target: BudgetTarget, id: &str) -> String {
    match target {
        BudgetTarget::Org => String::new(),
        BudgetTarget::Agent(_) => format!(" AND agent_id = {id}"),
        BudgetTarget::Token(_) => format!(" AND token_id = {id}"),
    }
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
