//! Budgets' statements in PostgreSQL, on a connection in an org-scoped transaction.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::map_error;
use crate::store::StoreError;
use crate::store::budgets::{
    Budget, BudgetRow, BudgetStatements, BudgetTarget, from_rows, ledger_filter,
};

impl BudgetStatements for PgConnection {
    async fn target_in_org(
        &mut self,
        org_id: Uuid,
        target: BudgetTarget,
    ) -> Result<bool, StoreError> {
        let sql = match target {
            BudgetTarget::Org => return Ok(true),
            BudgetTarget::Agent(_) => {
                "SELECT EXISTS (SELECT 1 FROM agents WHERE org_id = $1 AND agent_id = $2)"
            }
            BudgetTarget::Token(_) => {
                "SELECT EXISTS (SELECT 1 FROM tokens WHERE org_id = $1 AND token_id = $2)"
            }
        };
        sqlx::query_scalar(sql)
            .bind(org_id)
            .bind(target.id())
            .fetch_one(self)
            .await
            .map_err(map_error)
    }

    async fn upsert_budget(&mut self, org_id: Uuid, budget: &Budget) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO budgets (org_id, scope, target_id, limit_usd_micros, period) \
             VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (org_id, scope, target_id) DO UPDATE \
             SET limit_usd_micros = EXCLUDED.limit_usd_micros, period = EXCLUDED.period, \
                 updated_at = now()",
        )
        .bind(org_id)
        .bind(budget.target.scope())
        .bind(budget.target.key(org_id))
        .bind(budget.limit_usd_micros)
        .bind(budget.period.as_str())
        .execute(self)
        .await
        .map_err(map_error)?;
        Ok(())
    }

    async fn remove_budget(
        &mut self,
        org_id: Uuid,
        target: BudgetTarget,
    ) -> Result<bool, StoreError> {
        let done =
            sqlx::query("DELETE FROM budgets WHERE org_id = $1 AND scope = $2 AND target_id = $3")
                .bind(org_id)
                .bind(target.scope())
                .bind(target.key(org_id))
                .execute(self)
                .await
                .map_err(map_error)?;
        Ok(done.rows_affected() > 0)
    }

    async fn budgets(&mut self, org_id: Uuid) -> Result<Vec<Budget>, StoreError> {
        let rows: Vec<BudgetRow> = sqlx::query_as(
            "SELECT scope, target_id, limit_usd_micros, period FROM budgets WHERE org_id = $1 \
             ORDER BY scope <> 'org', scope, target_id",
        )
        .bind(org_id)
        .fetch_all(self)
        .await
        .map_err(map_error)?;
        from_rows(rows)
    }

    async fn spent(
        &mut self,
        org_id: Uuid,
        target: BudgetTarget,
        since: Option<DateTime<Utc>>,
    ) -> Result<i64, StoreError> {
        let sql = format!(
            "SELECT CAST(COALESCE(sum(cost_usd_micros), 0) AS bigint) FROM usage_ledger \
             WHERE org_id = $1 AND ($2::timestamptz IS NULL OR created_at >= $2){}",
            ledger_filter(target, "$3")
        );
        sqlx::query_scalar(&sql)
            .bind(org_id)
            .bind(since)
            .bind(target.id())
            .fetch_one(self)
            .await
            .map_err(map_error)
    }
}
