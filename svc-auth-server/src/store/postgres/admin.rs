//! The administration's statements: bootstrap, agents, users and the audit trail. Each runs on
//! a connection inside a transaction scoped to the org (`begin_tenant`), so row-level security
//! applies, and names `org_id` itself as every tenant query does.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::{map_error, map_insert_error};
use crate::store::agent_moves::AgentStatements;
use crate::store::references::check_token_references;
use crate::store::revocation::RevocationStatements;
use crate::store::rows::{AGENT_DETAIL_COLUMNS, AUDIT_COLUMNS, TOKEN_COLUMNS, USER_COLUMNS};
use crate::store::{
    AgentDetail, AgentStatus, AuditEntry, AuditEvent, AuditQuery, BootstrapOrg, Cursor, NewAgent,
    NewToken, NewUser, Organization, StoreError, TokenMetadata, User,
};

// The shared rows, with PostgreSQL's `timestamptz` columns.
type TokenRow = crate::store::rows::TokenRow<DateTime<Utc>>;
type AgentDetailRow = crate::store::rows::AgentDetailRow<DateTime<Utc>>;
type UserRow = crate::store::rows::UserRow<DateTime<Utc>>;
type AuditRow = crate::store::rows::AuditRow<DateTime<Utc>>;

/// Writes one audit event.
async fn insert_audit(
    conn: &mut PgConnection,
    org_id: Uuid,
    audit: &AuditEntry,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO audit_events \
             (event_id, org_id, actor_token_id, action, target_id, outcome, detail) \
         VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb)",
    )
    .bind(audit.event_id)
    .bind(org_id)
    .bind(audit.actor_token_id)
    .bind(audit.action.as_str())
    .bind(&audit.target_id)
    .bind(audit.outcome.as_str())
    .bind(audit.detail_json())
    .execute(conn)
    .await
    .map_err(|e| map_insert_error(e, "audit event"))?;
    Ok(())
}

/// The org, if it exists.
async fn organization(
    conn: &mut PgConnection,
    org_id: Uuid,
) -> Result<Option<Organization>, StoreError> {
    let row: Option<(Uuid, Option<String>, DateTime<Utc>)> =
        sqlx::query_as("SELECT org_id, name, created_at FROM organizations WHERE org_id = $1")
            .bind(org_id)
            .fetch_optional(conn)
            .await
            .map_err(map_error)?;
    Ok(row.map(|(org_id, name, created_at)| Organization {
        org_id,
        name,
        created_at,
    }))
}

/// Creates the org unless it exists, and returns it.
pub(super) async fn ensure_organization(
    conn: &mut PgConnection,
    org_id: Uuid,
) -> Result<Organization, StoreError> {
    sqlx::query("INSERT INTO organizations (org_id) VALUES ($1) ON CONFLICT (org_id) DO NOTHING")
        .bind(org_id)
        .execute(&mut *conn)
        .await
        .map_err(map_error)?;
    organization(conn, org_id)
        .await?
        .ok_or_else(|| StoreError::Query("the organization vanished".into()))
}

/// The org bootstrap mints for: created when new, read when existing (`None` if missing).
pub(super) async fn bootstrap_org(
    conn: &mut PgConnection,
    org: &BootstrapOrg,
) -> Result<Option<Organization>, StoreError> {
    match org {
        BootstrapOrg::New { org_id, name } => {
            sqlx::query("INSERT INTO organizations (org_id, name) VALUES ($1, $2)")
                .bind(org_id)
                .bind(name)
                .execute(&mut *conn)
                .await
                .map_err(|e| map_insert_error(e, "organization"))?;
            organization(conn, *org_id).await
        }
        BootstrapOrg::Existing(org_id) => organization(conn, *org_id).await,
    }
}

/// Inserts a token after checking its references.
pub(super) async fn insert_token(
    conn: &mut PgConnection,
    org_id: Uuid,
    token: &NewToken,
) -> Result<TokenMetadata, StoreError> {
    check_token_references(&mut *conn, org_id, token).await?;
    let (rpm, tpm) = token.limits.columns();
    let row: TokenRow = sqlx::query_as(&format!(
        "INSERT INTO tokens (token_id, org_id, user_id, agent_id, permissions, name, \
                             secret_hash, expires_at, issuer_token_id, rpm_limit, tpm_limit) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING {TOKEN_COLUMNS}"
    ))
    .bind(token.token_id)
    .bind(org_id)
    .bind(token.user_id)
    .bind(token.agent_id)
    .bind(token.permissions.bits())
    .bind(&token.name)
    .bind(&token.secret_hash)
    .bind(token.expires_at)
    .bind(token.issuer_token_id)
    .bind(rpm)
    .bind(tpm)
    .fetch_one(conn)
    .await
    .map_err(|e| map_insert_error(e, "token"))?;
    TokenMetadata::try_from(row)
}

pub(super) async fn insert_user(
    conn: &mut PgConnection,
    org_id: Uuid,
    user: &NewUser,
) -> Result<User, StoreError> {
    // No RETURNING: the row only becomes visible once its membership exists.
    sqlx::query("INSERT INTO users (user_id, display_name) VALUES ($1, $2)")
        .bind(user.user_id)
        .bind(&user.display_name)
        .execute(&mut *conn)
        .await
        .map_err(|e| map_insert_error(e, "user"))?;
    sqlx::query("INSERT INTO org_memberships (org_id, user_id, role) VALUES ($1, $2, $3)")
        .bind(org_id)
        .bind(user.user_id)
        .bind(user.role.as_str())
        .execute(&mut *conn)
        .await
        .map_err(|e| map_insert_error(e, "membership"))?;
    let row: UserRow = sqlx::query_as(&format!(
        "SELECT {USER_COLUMNS} FROM users AS u \
         JOIN org_memberships AS m ON m.user_id = u.user_id \
         WHERE m.org_id = $1 AND u.user_id = $2"
    ))
    .bind(org_id)
    .bind(user.user_id)
    .fetch_one(conn)
    .await
    .map_err(map_error)?;
    User::try_from(row)
}

pub(super) async fn list_users(
    conn: &mut PgConnection,
    org_id: Uuid,
    after: Option<Cursor>,
    limit: u32,
) -> Result<Vec<User>, StoreError> {
    let rows: Vec<UserRow> = sqlx::query_as(&format!(
        "SELECT {USER_COLUMNS} FROM users AS u \
         JOIN org_memberships AS m ON m.user_id = u.user_id \
         WHERE m.org_id = $1 \
           AND ($2::timestamptz IS NULL OR (u.created_at, u.user_id) > ($2, $3::uuid)) \
         ORDER BY u.created_at, u.user_id LIMIT $4"
    ))
    .bind(org_id)
    .bind(after.map(|c| c.at))
    .bind(after.map(|c| c.id))
    .bind(i64::from(limit))
    .fetch_all(conn)
    .await
    .map_err(map_error)?;
    rows.into_iter().map(User::try_from).collect()
}

pub(super) async fn insert_agent(
    conn: &mut PgConnection,
    org_id: Uuid,
    agent: &NewAgent,
) -> Result<AgentDetail, StoreError> {
    let row: AgentDetailRow = sqlx::query_as(&format!(
        "INSERT INTO agents (agent_id, org_id, status, name) VALUES ($1, $2, $3, $4) \
         RETURNING {AGENT_DETAIL_COLUMNS}"
    ))
    .bind(agent.agent_id)
    .bind(org_id)
    .bind(agent.status.as_str())
    .bind(&agent.name)
    .fetch_one(conn)
    .await
    .map_err(|e| map_insert_error(e, "agent"))?;
    AgentDetail::try_from(row)
}

/// The agent; `lock` takes its row for the rest of the transaction.
async fn agent_detail(
    conn: &mut PgConnection,
    org_id: Uuid,
    agent_id: Uuid,
    lock: bool,
) -> Result<Option<AgentDetail>, StoreError> {
    let lock = if lock { " FOR UPDATE" } else { "" };
    let row: Option<AgentDetailRow> = sqlx::query_as(&format!(
        "SELECT {AGENT_DETAIL_COLUMNS} FROM agents WHERE org_id = $1 AND agent_id = $2{lock}"
    ))
    .bind(org_id)
    .bind(agent_id)
    .fetch_optional(conn)
    .await
    .map_err(map_error)?;
    row.map(AgentDetail::try_from).transpose()
}

pub(super) async fn list_agents(
    conn: &mut PgConnection,
    org_id: Uuid,
    status: Option<AgentStatus>,
    after: Option<Cursor>,
    limit: u32,
) -> Result<Vec<AgentDetail>, StoreError> {
    let rows: Vec<AgentDetailRow> = sqlx::query_as(&format!(
        "SELECT {AGENT_DETAIL_COLUMNS} FROM agents \
         WHERE org_id = $1 AND ($2::text IS NULL OR status = $2) \
           AND ($3::timestamptz IS NULL OR (created_at, agent_id) > ($3, $4::uuid)) \
         ORDER BY created_at, agent_id LIMIT $5"
    ))
    .bind(org_id)
    .bind(status.map(AgentStatus::as_str))
    .bind(after.map(|c| c.at))
    .bind(after.map(|c| c.id))
    .bind(i64::from(limit))
    .fetch_all(conn)
    .await
    .map_err(map_error)?;
    rows.into_iter().map(AgentDetail::try_from).collect()
}

async fn update_agent_status(
    conn: &mut PgConnection,
    org_id: Uuid,
    agent_id: Uuid,
    status: AgentStatus,
    reason: Option<&str>,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE agents SET status = $3, status_reason = $4, updated_at = now() \
         WHERE org_id = $1 AND agent_id = $2",
    )
    .bind(org_id)
    .bind(agent_id)
    .bind(status.as_str())
    .bind(reason)
    .execute(conn)
    .await
    .map_err(map_error)?;
    Ok(())
}

pub(super) async fn audit_events(
    conn: &mut PgConnection,
    org_id: Uuid,
    query: &AuditQuery,
) -> Result<Vec<AuditEvent>, StoreError> {
    let rows: Vec<AuditRow> = sqlx::query_as(&format!(
        "SELECT {AUDIT_COLUMNS}, detail::text AS detail FROM audit_events \
         WHERE org_id = $1 \
           AND ($2::timestamptz IS NULL OR occurred_at >= $2) \
           AND ($3::timestamptz IS NULL OR occurred_at < $3) \
           AND ($4::text IS NULL OR action = $4) \
           AND ($5::timestamptz IS NULL OR (occurred_at, event_id) < ($5, $6::uuid)) \
         ORDER BY occurred_at DESC, event_id DESC LIMIT $7"
    ))
    .bind(org_id)
    .bind(query.start)
    .bind(query.end)
    .bind(query.action.map(|a| a.as_str()))
    .bind(query.before.map(|c| c.at))
    .bind(query.before.map(|c| c.id))
    .bind(i64::from(query.limit))
    .fetch_all(conn)
    .await
    .map_err(map_error)?;
    rows.into_iter().map(AuditEvent::try_from).collect()
}

impl AgentStatements for PgConnection {
    async fn agent_detail(
        &mut self,
        org_id: Uuid,
        agent_id: Uuid,
        lock: bool,
    ) -> Result<Option<AgentDetail>, StoreError> {
        agent_detail(self, org_id, agent_id, lock).await
    }

    async fn update_agent_status(
        &mut self,
        org_id: Uuid,
        agent_id: Uuid,
        status: AgentStatus,
        reason: Option<&str>,
    ) -> Result<(), StoreError> {
        update_agent_status(self, org_id, agent_id, status, reason).await
    }

    async fn update_agent_tools(
        &mut self,
        org_id: Uuid,
        agent_id: Uuid,
        tools: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE agents SET tools = $3, updated_at = now() \
             WHERE org_id = $1 AND agent_id = $2",
        )
        .bind(org_id)
        .bind(agent_id)
        .bind(tools)
        .execute(self)
        .await
        .map_err(map_error)?;
        Ok(())
    }

    async fn insert_audit(&mut self, org_id: Uuid, audit: &AuditEntry) -> Result<(), StoreError> {
        insert_audit(self, org_id, audit).await
    }
}

impl RevocationStatements for PgConnection {
    async fn token(
        &mut self,
        org_id: Uuid,
        token_id: Uuid,
    ) -> Result<Option<TokenMetadata>, StoreError> {
        let row: Option<TokenRow> = sqlx::query_as(&format!(
            "SELECT {TOKEN_COLUMNS} FROM tokens WHERE org_id = $1 AND token_id = $2"
        ))
        .bind(org_id)
        .bind(token_id)
        .fetch_optional(self)
        .await
        .map_err(map_error)?;
        row.map(TokenMetadata::try_from).transpose()
    }

    async fn mark_revoked(
        &mut self,
        org_id: Uuid,
        token_id: Uuid,
    ) -> Result<TokenMetadata, StoreError> {
        let row: TokenRow = sqlx::query_as(&format!(
            "UPDATE tokens SET revoked_at = COALESCE(revoked_at, now()) \
             WHERE org_id = $1 AND token_id = $2 RETURNING {TOKEN_COLUMNS}"
        ))
        .bind(org_id)
        .bind(token_id)
        .fetch_one(self)
        .await
        .map_err(map_error)?;
        TokenMetadata::try_from(row)
    }

    async fn revoke_issued(
        &mut self,
        org_id: Uuid,
        token_id: Uuid,
    ) -> Result<Vec<Uuid>, StoreError> {
        sqlx::query_scalar(ISSUED_TREE_REVOKE)
            .bind(org_id)
            .bind(token_id)
            .fetch_all(self)
            .await
            .map_err(map_error)
    }
}

/// Revokes the tokens under an issuer that are not revoked yet, walking the issuer tree within
/// the org (a child always names an issuer of its own org, so the walk never leaves it).
const ISSUED_TREE_REVOKE: &str = "\
    WITH RECURSIVE issued (token_id) AS ( \
        SELECT token_id FROM tokens WHERE org_id = $1 AND issuer_token_id = $2 \
        UNION \
        SELECT t.token_id FROM tokens AS t JOIN issued AS i ON t.issuer_token_id = i.token_id \
        WHERE t.org_id = $1 \
    ) \
    UPDATE tokens SET revoked_at = now() \
    WHERE org_id = $1 AND revoked_at IS NULL AND token_id IN (SELECT token_id FROM issued) \
    RETURNING token_id";
