//! The ledger in PostgreSQL, written as the gateway's role under row-level security.

use futures_util::future::BoxFuture;
use sqlx::PgPool;
use uuid::Uuid;

use super::{LedgerSink, SinkError, UsageRecord};

/// Writes batches into `usage_ledger`: one transaction per batch, one statement per org in it
/// (the row-level security setting is per org), every column sent as one array.
#[derive(Clone, Debug)]
pub struct PgLedger {
    pool: PgPool,
}

impl PgLedger {
    /// A sink on `pool`, whose connections run as `svc_gateway`.
    pub fn new(pool: PgPool) -> PgLedger {
        PgLedger { pool }
    }
}

impl LedgerSink for PgLedger {
    fn write<'a>(&'a self, batch: &'a [UsageRecord]) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            let mut orgs: Vec<Uuid> = batch.iter().map(|r| r.org_id).collect();
            orgs.sort_unstable();
            orgs.dedup();
            let mut tx = self.pool.begin().await?;
            for org_id in orgs {
                let rows: Vec<&UsageRecord> = batch.iter().filter(|r| r.org_id == org_id).collect();
                sqlx::query("SELECT set_config('svc.org_id', $1, true)")
                    .bind(org_id.to_string())
                    .execute(&mut *tx)
                    .await?;
                // No conflict target: naming one would need SELECT, which this role lacks.
                sqlx::query(
                    "INSERT INTO usage_ledger (record_id, org_id, token_id, agent_id, model, \
                         provider, prompt_tokens, completion_tokens, status, latency_ms, created_at, \
                         tool, outcome, cost_usd_micros) \
                     SELECT * FROM UNNEST($1::uuid[], $2::uuid[], $3::uuid[], $4::uuid[], \
                         $5::text[], $6::text[], $7::bigint[], $8::bigint[], $9::int[], $10::int[], \
                         $11::timestamptz[], $12::text[], $13::text[], $14::bigint[]) \
                     ON CONFLICT DO NOTHING",
                )
                .bind(rows.iter().map(|r| r.record_id).collect::<Vec<_>>())
                .bind(rows.iter().map(|r| r.org_id).collect::<Vec<_>>())
                .bind(rows.iter().map(|r| r.token_id).collect::<Vec<_>>())
                .bind(rows.iter().map(|r| r.agent_id).collect::<Vec<_>>())
                .bind(rows.iter().map(|r| r.model.as_str()).collect::<Vec<_>>())
                .bind(rows.iter().map(|r| r.provider.as_str()).collect::<Vec<_>>())
                .bind(rows.iter().map(|r| r.prompt_tokens).collect::<Vec<_>>())
                .bind(rows.iter().map(|r| r.completion_tokens).collect::<Vec<_>>())
                .bind(rows.iter().map(|r| i32::from(r.status)).collect::<Vec<_>>())
                .bind(
                    rows.iter()
                        .map(|r| i32::try_from(r.latency_ms).unwrap_or(i32::MAX))
                        .collect::<Vec<_>>(),
                )
                .bind(rows.iter().map(|r| r.at).collect::<Vec<_>>())
                .bind(
                    rows.iter()
                        .map(|r| r.tool.as_ref().map(|call| call.tool.as_str()))
                        .collect::<Vec<_>>(),
                )
                .bind(
                    rows.iter()
                        .map(|r| r.tool.as_ref().map(|call| call.outcome))
                        .collect::<Vec<_>>(),
                )
                .bind(rows.iter().map(|r| r.cost_usd_micros).collect::<Vec<_>>())
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }
}
