//! Money budgets: what a budget is, the period it counts over, and how one is set, deleted
//! and listed with its spend, written once for every backend (each supplies the statements,
//! on a connection inside an org-scoped transaction).

use std::future::Future;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::agent_moves::AgentStatements;
pub use svc_core::budget::{Budget, BudgetPeriod, BudgetTarget};

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
    spend(conn, org_id, budgets, now).await
}

/// [`Store::budget_spend`](super::Store::budget_spend) on one connection.
pub(super) async fn spend<C: BudgetStatements>(
    conn: &mut C,
    org_id: Uuid,
    budgets: Vec<Budget>,
    now: DateTime<Utc>,
) -> Result<Vec<BudgetSpend>, StoreError> {
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
                target: stored_target(&scope, key)?,
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

/// The target a stored scope and key name.
pub(super) fn stored_target(scope: &str, key: Uuid) -> Result<BudgetTarget, StoreError> {
    match scope {
        "org" => Ok(BudgetTarget::Org),
        "agent" => Ok(BudgetTarget::Agent(key)),
        "token" => Ok(BudgetTarget::Token(key)),
        other => Err(StoreError::Query(
            format!("stored budget scope {other:?} is unknown").into(),
        )),
    }
}
