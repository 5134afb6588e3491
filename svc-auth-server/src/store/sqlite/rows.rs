//! Rows as SQLite returns them, and their conversion to the store's records.

use chrono::{DateTime, Utc};
use svc_tower::context::Permissions;
use uuid::Uuid;

use crate::store::{Agent, AgentStatus, StoreError, TokenMetadata, TokenRecord};

/// The columns every token query returns, in [`TokenRow`]'s order.
pub(super) const TOKEN_COLUMNS: &str =
    "token_id, org_id, user_id, agent_id, permissions, name, created_at, expires_at, revoked_at";

/// A stored time (microseconds since the epoch) as a timestamp.
pub(super) fn stored_time(micros: i64) -> Result<DateTime<Utc>, StoreError> {
    DateTime::from_timestamp_micros(micros)
        .ok_or_else(|| StoreError::Query("a stored time is out of range".into()))
}

fn optional_time(micros: Option<i64>) -> Result<Option<DateTime<Utc>>, StoreError> {
    micros.map(stored_time).transpose()
}

#[derive(sqlx::FromRow)]
pub(super) struct TokenRow {
    token_id: Uuid,
    org_id: Uuid,
    user_id: Option<Uuid>,
    agent_id: Option<Uuid>,
    permissions: i64,
    name: Option<String>,
    created_at: i64,
    expires_at: Option<i64>,
    revoked_at: Option<i64>,
}

impl TryFrom<TokenRow> for TokenMetadata {
    type Error = StoreError;

    fn try_from(row: TokenRow) -> Result<Self, StoreError> {
        Ok(TokenMetadata {
            token_id: row.token_id,
            org_id: row.org_id,
            user_id: row.user_id,
            agent_id: row.agent_id,
            permissions: Permissions::from_bits(row.permissions),
            name: row.name,
            created_at: stored_time(row.created_at)?,
            expires_at: optional_time(row.expires_at)?,
            revoked_at: optional_time(row.revoked_at)?,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct ValidationRow {
    token_id: Uuid,
    org_id: Uuid,
    user_id: Option<Uuid>,
    agent_id: Option<Uuid>,
    permissions: i64,
    secret_hash: String,
    expires_at: Option<i64>,
    revoked_at: Option<i64>,
}

impl TryFrom<ValidationRow> for TokenRecord {
    type Error = StoreError;

    fn try_from(row: ValidationRow) -> Result<Self, StoreError> {
        Ok(TokenRecord {
            token_id: row.token_id,
            org_id: row.org_id,
            user_id: row.user_id,
            agent_id: row.agent_id,
            permissions: Permissions::from_bits(row.permissions),
            secret_hash: row.secret_hash,
            expires_at: optional_time(row.expires_at)?,
            revoked_at: optional_time(row.revoked_at)?,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct AgentRow {
    agent_id: Uuid,
    org_id: Uuid,
    status: String,
    name: Option<String>,
    created_at: i64,
}

impl TryFrom<AgentRow> for Agent {
    type Error = StoreError;

    fn try_from(row: AgentRow) -> Result<Self, StoreError> {
        let status: AgentStatus = row
            .status
            .parse()
            .map_err(|e| StoreError::Query(Box::new(e)))?;
        Ok(Agent {
            agent_id: row.agent_id,
            org_id: row.org_id,
            status,
            name: row.name,
            created_at: stored_time(row.created_at)?,
        })
    }
}
