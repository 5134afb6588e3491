//! SetBudget, DeleteBudget and ListBudgets: money budgets on the org, its agents and its
//! tokens.
//!
//! A budget's target is always in the caller's org: an agent or token of another org (or of
//! none) is PermissionDenied, the same answer either way. Spend is read from the usage ledger.

use super::convert::parse_optional_id;
use super::status;
use crate::store::{
    AuditAction, AuditEntry, Budget, BudgetPeriod, BudgetSpend, BudgetTarget, Store,
};
use crate::verify::ValidToken;
use chrono::Utc;
use svc_core::permissions::Permissions;
use svc_proto::v1;
use tonic::Status;

pub(super) const SET: Op = Op::act(
    "SetBudget",
    Permissions::BUDGET_MANAGE,
    "BUDGET_MANAGE",
    AuditAction::BudgetSet,
);
pub(super) const DELETE: Op = Op::act(
    "DeleteBudget",
    Permissions::BUDGET_MANAGE,
    "BUDGET_MANAGE",
    AuditAction::BudgetDelete,
);
pub(super) const LIST: Op = Op::read("ListBudgets", Permissions::BUDGET_MANAGE, "BUDGET_MANAGE");
const SPEND: &str = "GetBudgetSpend";

use super::access::Op;

/// The target a request names, or InvalidArgument.
fn target(scope: &str, target_id: &str) -> Result<BudgetTarget, Status> {
    let id = match target_id {
        "" => None,
        id => parse_optional_id("target_id", Some(id))?,
    };
    BudgetTarget::parse(scope, id).map_err(|e| Status::invalid_argument(format!("scope: {e}")))
}

/// The audit entry of an act on `target` in the caller's org.
fn audit(caller: &ValidToken, action: AuditAction, target: BudgetTarget) -> AuditEntry {
    let entry = AuditEntry::ok(Some(caller.token_id), action);
    entry.target(target.id().unwrap_or(caller.org_id))
}

/// The wire form of a budget.
pub(crate) fn budget(budget: Budget, spent: Option<i64>) -> v1::Budget {
    v1::Budget {
        scope: budget.target.scope().to_owned(),
        target_id: budget
            .target
            .id()
            .map(|id| id.to_string())
            .unwrap_or_default(),
        limit_usd_micros: budget.limit_usd_micros,
        period: budget.period.as_str().to_owned(),
        spent_usd_micros: spent,
    }
}

pub(super) async fn set<S: Store>(
    store: &S,
    caller: &ValidToken,
    req: v1::SetBudgetRequest,
) -> Result<v1::Budget, Status> {
    let target = target(&req.scope, &req.target_id)?;
    if req.limit_usd_micros < 0 {
        return Err(Status::invalid_argument("limit_usd_micros is negative"));
    }
    let period = BudgetPeriod::parse(&req.period)
        .map_err(|e| Status::invalid_argument(format!("period: {e}")))?;
    let wanted = Budget {
        target,
        limit_usd_micros: req.limit_usd_micros,
        period,
    };
    let set = store
        .set_budget(
            caller.org_id,
            wanted,
            audit(caller, AuditAction::BudgetSet, target),
        )
        .await
        .map_err(|e| status::store_error(SET.name, e))?;
    tracing::info!(
        org_id = %caller.org_id,
        scope = target.scope(),
        target_id = target.id().map(|id| id.to_string()),
        limit_usd_micros = set.limit_usd_micros,
        period = period.as_str(),
        set_by = %caller.token_id,
        "budget set"
    );
    Ok(budget(set, None))
}

pub(super) async fn delete<S: Store>(
    store: &S,
    caller: &ValidToken,
    req: &v1::DeleteBudgetRequest,
) -> Result<v1::DeleteBudgetResponse, Status> {
    let target = target(&req.scope, &req.target_id)?;
    let deleted = store
        .delete_budget(
            caller.org_id,
            target,
            audit(caller, AuditAction::BudgetDelete, target),
        )
        .await
        .map_err(|e| status::store_error(DELETE.name, e))?;
    if !deleted {
        return Err(Status::not_found("no such budget in the caller's org"));
    }
    tracing::info!(
        org_id = %caller.org_id,
        scope = target.scope(),
        target_id = target.id().map(|id| id.to_string()),
        deleted_by = %caller.token_id,
        "budget deleted"
    );
    Ok(v1::DeleteBudgetResponse {})
}

pub(super) async fn list<S: Store>(
    store: &S,
    caller: &ValidToken,
) -> Result<v1::ListBudgetsResponse, Status> {
    let budgets = store
        .list_budgets(caller.org_id, Utc::now())
        .await
        .map_err(|e| status::store_error(LIST.name, e))?;
    Ok(v1::ListBudgetsResponse {
        budgets: budgets
            .into_iter()
            .map(
                |BudgetSpend {
                     budget: b,
                     spent_usd_micros,
                 }| budget(b, Some(spent_usd_micros)),
            )
            .collect(),
    })
}

/// GetBudgetSpend: the validated token's budgets with their spend in the current period.
pub(super) async fn spend<S: Store>(
    store: &S,
    token: &ValidToken,
) -> Result<v1::GetBudgetSpendResponse, Status> {
    let spent = store
        .budget_spend(token.org_id, token.budgets.clone(), Utc::now())
        .await
        .map_err(|e| status::store_error(SPEND, e))?;
    Ok(v1::GetBudgetSpendResponse {
        budgets: spent
            .into_iter()
            .map(|spend| budget(spend.budget, Some(spend.spent_usd_micros)))
            .collect(),
    })
}
