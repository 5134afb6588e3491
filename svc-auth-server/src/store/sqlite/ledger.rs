//! The usage ledger in the embedded store: what `svc dev`'s gateway writes and GetUsage reads.

use svc_runtime::usage::UsageRecord;
use uuid::Uuid;

use super::{SqliteStore, map_error, to_micros};
use crate::store::{StoreError, UsageGroup, UsageQuery, UsageTotals};

impl SqliteStore {
    /// Appends `records` in one transaction; a record already there (a retried batch) is
    /// skipped.
    pub async fn record_usage(&self, records: &[UsageRecord]) -> Result<(), StoreError> {
        self.timer
            .time(async {
                let mut tx = self.write().await?;
                for record in records {
                    sqlx::query(
                        "INSERT OR IGNORE INTO usage_ledger (record_id, org_id, token_id, \
                             agent_id, model, provider, prompt_tokens, completion_tokens, status, \
                             latency_ms, created_at, tool, outcome, cost_usd_micros) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
                    )
                    .bind(record.record_id.to_string())
                    .bind(record.org_id)
                    .bind(record.token_id.to_string())
                    .bind(record.agent_id.map(|id| id.to_string()))
                    .bind(&record.model)
                    .bind(&record.provider)
                    .bind(record.prompt_tokens)
                    .bind(record.completion_tokens)
                    .bind(i64::from(record.status))
                    .bind(i64::from(record.latency_ms))
                    .bind(to_micros(record.at))
                    .bind(record.tool.as_ref().map(|call| call.tool.as_str()))
                    .bind(record.tool.as_ref().map(|call| call.outcome))
                    .bind(record.cost_usd_micros)
                    .execute(&mut *tx)
                    .await
                    .map_err(map_error)?;
                }
                tx.commit().await.map_err(map_error)
            })
            .await
    }

    pub(super) async fn usage_totals(
        &self,
        org_id: Uuid,
        query: &UsageQuery,
    ) -> Result<Vec<UsageTotals>, StoreError> {
        let key = match query.group {
            UsageGroup::Token => "token_id",
            UsageGroup::Agent => "COALESCE(agent_id, '')",
            UsageGroup::Model => "model",
            UsageGroup::Day => "strftime('%Y-%m-%d', created_at / 1000000, 'unixepoch')",
            UsageGroup::Tool => "tool",
        };
        self.timer
            .time(async {
                sqlx::query_as(&crate::store::usage::totals_sql(query.group, key, '?', ""))
                    .bind(org_id)
                    .bind(query.start.map(to_micros))
                    .bind(query.end.map(to_micros))
                    .bind(query.after.as_deref())
                    .bind(i64::from(query.limit))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(map_error)
            })
            .await
    }
}
