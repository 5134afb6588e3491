//! The queries. Each tenant query names `org_id = ?` in its `WHERE` (or writes it as a column):
//! with no row-level security underneath, that clause is what keeps orgs apart.

use sqlx::{SqliteConnection, SqlitePool};
use uuid::Uuid;

use super::{map_error, map_insert_error, now_micros, to_micros};
use crate::store::agent_moves::stored_status;
use crate::store::references::{ReferenceLookups, check_token_references};
use crate::store::rows::{AGENT_COLUMNS, TOKEN_COLUMNS, VALIDATION_COLUMNS};
use crate::store::{Agent, AgentStatus, Cursor, NewToken, StoreError, TokenMetadata, TokenRecord};

// The shared rows, with SQLite's integer-microsecond time columns.
type TokenRow = crate::store::rows::TokenRow<i64>;
type ValidationRow = crate::store::rows::ValidationRow<i64>;
type AgentRow = crate::store::rows::AgentRow<i64>;

/// The one lookup that precedes knowing the org: by token id alone.
pub(super) async fn token_for_validation(
    pool: &SqlitePool,
    token_id: Uuid,
) -> Result<Option<TokenRecord>, StoreError> {
    let row: Option<ValidationRow> = sqlx::query_as(&format!(
        "SELECT {VALIDATION_COLUMNS} FROM tokens WHERE token_id = ?1"
    ))
    .bind(token_id)
    .fetch_optional(pool)
    .await
    .map_err(map_error)?;
    let Some(mut record) = row.map(TokenRecord::try_from).transpose()? else {
        return Ok(None);
    };
    record.budgets = budgets_for_call(pool, &record, None).await?;
    Ok(Some(record))
}

/// The budgets a call with `record` draws on: its org's, its own, and `agent`'s (else the
/// token's own agent's), as PostgreSQL's `budgets_for_call` answers them.
pub(super) async fn budgets_for_call(
    pool: &SqlitePool,
    record: &TokenRecord,
    agent: Option<Uuid>,
) -> Result<Vec<crate::store::Budget>, StoreError> {
    let rows: Vec<crate::store::budgets::BudgetRow> = sqlx::query_as(
        "SELECT scope, target_id, limit_usd_micros, period FROM budgets WHERE org_id = ?1 \
         AND ((scope = 'org' AND target_id = ?1) OR (scope = 'token' AND target_id = ?2) \
              OR (scope = 'agent' AND target_id = ?3))",
    )
    .bind(record.org_id)
    .bind(record.token_id)
    .bind(agent.or(record.agent_id))
    .fetch_all(pool)
    .await
    .map_err(map_error)?;
    crate::store::budgets::from_rows(rows)
}

pub(super) async fn agent(
    conn: &mut SqliteConnection,
    org_id: Uuid,
    agent_id: Uuid,
) -> Result<Option<Agent>, StoreError> {
    let row: Option<AgentRow> = sqlx::query_as(&format!(
        "SELECT {AGENT_COLUMNS} FROM agents WHERE org_id = ?1 AND agent_id = ?2"
    ))
    .bind(org_id)
    .bind(agent_id)
    .fetch_optional(conn)
    .await
    .map_err(map_error)?;
    row.map(Agent::try_from).transpose()
}

impl ReferenceLookups for SqliteConnection {
    async fn agent_in_org(
        &mut self,
        org_id: Uuid,
        agent_id: Uuid,
    ) -> Result<Option<AgentStatus>, StoreError> {
        let status: Option<String> =
            sqlx::query_scalar("SELECT status FROM agents WHERE org_id = ?1 AND agent_id = ?2")
                .bind(org_id)
                .bind(agent_id)
                .fetch_optional(self)
                .await
                .map_err(map_error)?;
        stored_status(status)
    }

    async fn user_in_org(&mut self, org_id: Uuid, user_id: Uuid) -> Result<bool, StoreError> {
        sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM org_memberships WHERE org_id = ?1 AND user_id = ?2)",
        )
        .bind(org_id)
        .bind(user_id)
        .fetch_one(self)
        .await
        .map_err(map_error)
    }
}

pub(super) async fn create_token(
    conn: &mut SqliteConnection,
    org_id: Uuid,
    token: &NewToken,
) -> Result<TokenMetadata, StoreError> {
    check_token_references(&mut *conn, org_id, token).await?;
    let row: TokenRow = sqlx::query_as(&format!(
        "INSERT INTO tokens (token_id, org_id, user_id, agent_id, permissions, name, \
                             secret_hash, created_at, expires_at, issuer_token_id, rpm_limit, \
                             tpm_limit) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) RETURNING {TOKEN_COLUMNS}"
    ))
    .bind(token.token_id)
    .bind(org_id)
    .bind(token.user_id)
    .bind(token.agent_id)
    .bind(token.permissions.bits())
    .bind(&token.name)
    .bind(&token.secret_hash)
    .bind(now_micros())
    .bind(token.expires_at.map(to_micros))
    .bind(token.issuer_token_id)
    .bind(token.limits.columns().0)
    .bind(token.limits.columns().1)
    .fetch_one(conn)
    .await
    .map_err(|e| map_insert_error(e, "token"))?;
    TokenMetadata::try_from(row)
}

pub(super) async fn revoke_token(
    conn: &mut SqliteConnection,
    org_id: Uuid,
    token_id: Uuid,
) -> Result<Option<TokenMetadata>, StoreError> {
    let row: Option<TokenRow> = sqlx::query_as(&format!(
        "UPDATE tokens SET revoked_at = COALESCE(revoked_at, ?3) \
         WHERE org_id = ?1 AND token_id = ?2 RETURNING {TOKEN_COLUMNS}"
    ))
    .bind(org_id)
    .bind(token_id)
    .bind(now_micros())
    .fetch_optional(conn)
    .await
    .map_err(map_error)?;
    row.map(TokenMetadata::try_from).transpose()
}

pub(super) async fn list_tokens(
    conn: &mut SqliteConnection,
    org_id: Uuid,
    after: Option<Cursor>,
    limit: u32,
) -> Result<Vec<TokenMetadata>, StoreError> {
    let rows: Vec<TokenRow> = sqlx::query_as(&format!(
        "SELECT {TOKEN_COLUMNS} FROM tokens \
         WHERE org_id = ?1 AND (?2 IS NULL OR (created_at, token_id) > (?2, ?3)) \
         ORDER BY created_at, token_id LIMIT ?4"
    ))
    .bind(org_id)
    .bind(after.map(|c| to_micros(c.at)))
    .bind(after.map(|c| c.id))
    .bind(i64::from(limit))
    .fetch_all(conn)
    .await
    .map_err(map_error)?;
    rows.into_iter().map(TokenMetadata::try_from).collect()
}
