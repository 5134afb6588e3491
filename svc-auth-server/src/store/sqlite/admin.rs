//! The administration's statements on the embedded store: orgs, agents, users and the audit
//! trail. As in `tenant`, each names `org_id` in its `WHERE` (or writes it as a column).

use sqlx::SqliteConnection;
use uuid::Uuid;

use super::{map_error, map_insert_error, now_micros, to_micros};
use crate::store::agent_moves::AgentStatements;
use crate::store::revocation::RevocationStatements;
use crate::store::rows::TOKEN_COLUMNS;
use crate::store::rows::{AGENT_DETAIL_COLUMNS, AUDIT_COLUMNS, StoredTime, USER_COLUMNS};
use crate::store::{
    AgentDetail, AgentStatus, AuditEntry, AuditEvent, AuditQuery, BootstrapOrg, Cursor, NewAgent,
    NewUser, Organization, StoreError, TokenMetadata, User,
};

// The shared rows, with SQLite's integer-microsecond time columns.
type AgentDetailRow = crate::store::rows::AgentDetailRow<i64>;
type TokenRow = crate::store::rows::TokenRow<i64>;
type UserRow = crate::store::rows::UserRow<i64>;
type AuditRow = crate::store::rows::AuditRow<i64>;

/// Writes one audit event.
async fn insert_audit(
    conn: &mut SqliteConnection,
    org_id: Uuid,
    audit: &AuditEntry,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO audit_events \
             (event_id, org_id, occurred_at, actor_token_id, action, target_id, outcome, detail) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )
    .bind(audit.event_id)
    .bind(org_id)
    .bind(now_micros())
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

async fn organization(
    conn: &mut SqliteConnection,
    org_id: Uuid,
) -> Result<Option<Organization>, StoreError> {
    let row: Option<(Option<String>, i64)> =
        sqlx::query_as("SELECT name, created_at FROM organizations WHERE org_id = ?1")
            .bind(org_id)
            .fetch_optional(conn)
            .await
            .map_err(map_error)?;
    row.map(|(name, created_at)| {
        Ok(Organization {
            org_id,
            name,
            created_at: created_at.into_time()?,
        })
    })
    .transpose()
}

/// Creates the org unless it exists, and returns it.
pub(super) async fn ensure_organization(
    conn: &mut SqliteConnection,
    org_id: Uuid,
) -> Result<Organization, StoreError> {
    sqlx::query(
        "INSERT INTO organizations (org_id, created_at) VALUES (?1, ?2) \
         ON CONFLICT (org_id) DO NOTHING",
    )
    .bind(org_id)
    .bind(now_micros())
    .execute(&mut *conn)
    .await
    .map_err(map_error)?;
    organization(conn, org_id)
        .await?
        .ok_or_else(|| StoreError::Query("the organization vanished".into()))
}

/// The org bootstrap mints for: created when new, read when existing (`None` if missing).
pub(super) async fn bootstrap_org(
    conn: &mut SqliteConnection,
    org: &BootstrapOrg,
) -> Result<Option<Organization>, StoreError> {
    match org {
        BootstrapOrg::New { org_id, name } => {
            sqlx::query("INSERT INTO organizations (org_id, name, created_at) VALUES (?1, ?2, ?3)")
                .bind(org_id)
                .bind(name)
                .bind(now_micros())
                .execute(&mut *conn)
                .await
                .map_err(|e| map_insert_error(e, "organization"))?;
            organization(conn, *org_id).await
        }
        BootstrapOrg::Existing(org_id) => organization(conn, *org_id).await,
    }
}

pub(super) async fn insert_user(
    conn: &mut SqliteConnection,
    org_id: Uuid,
    user: &NewUser,
) -> Result<User, StoreError> {
    let created_at = now_micros();
    sqlx::query("INSERT INTO users (user_id, display_name, created_at) VALUES (?1, ?2, ?3)")
        .bind(user.user_id)
        .bind(&user.display_name)
        .bind(created_at)
        .execute(&mut *conn)
        .await
        .map_err(|e| map_insert_error(e, "user"))?;
    sqlx::query(
        "INSERT INTO org_memberships (org_id, user_id, role, created_at) VALUES (?1, ?2, ?3, ?4)",
    )
    .bind(org_id)
    .bind(user.user_id)
    .bind(user.role.as_str())
    .bind(created_at)
    .execute(&mut *conn)
    .await
    .map_err(|e| map_insert_error(e, "membership"))?;
    Ok(User {
        user_id: user.user_id,
        name: user.display_name.clone(),
        created_at: created_at.into_time()?,
    })
}

pub(super) async fn list_users(
    conn: &mut SqliteConnection,
    org_id: Uuid,
    after: Option<Cursor>,
    limit: u32,
) -> Result<Vec<User>, StoreError> {
    let rows: Vec<UserRow> = sqlx::query_as(&format!(
        "SELECT {USER_COLUMNS} FROM users AS u \
         JOIN org_memberships AS m ON m.user_id = u.user_id \
         WHERE m.org_id = ?1 AND (?2 IS NULL OR (u.created_at, u.user_id) > (?2, ?3)) \
         ORDER BY u.created_at, u.user_id LIMIT ?4"
    ))
    .bind(org_id)
    .bind(after.map(|c| to_micros(c.at)))
    .bind(after.map(|c| c.id))
    .bind(i64::from(limit))
    .fetch_all(conn)
    .await
    .map_err(map_error)?;
    rows.into_iter().map(User::try_from).collect()
}

pub(super) async fn insert_agent(
    conn: &mut SqliteConnection,
    org_id: Uuid,
    agent: &NewAgent,
) -> Result<AgentDetail, StoreError> {
    let now = now_micros();
    let row: AgentDetailRow = sqlx::query_as(&format!(
        "INSERT INTO agents (agent_id, org_id, status, name, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?5) RETURNING {AGENT_DETAIL_COLUMNS}"
    ))
    .bind(agent.agent_id)
    .bind(org_id)
    .bind(agent.status.as_str())
    .bind(&agent.name)
    .bind(now)
    .fetch_one(conn)
    .await
    .map_err(|e| map_insert_error(e, "agent"))?;
    AgentDetail::try_from(row)
}

async fn agent_detail(
    conn: &mut SqliteConnection,
    org_id: Uuid,
    agent_id: Uuid,
) -> Result<Option<AgentDetail>, StoreError> {
    let row: Option<AgentDetailRow> = sqlx::query_as(&format!(
        "SELECT {AGENT_DETAIL_COLUMNS} FROM agents WHERE org_id = ?1 AND agent_id = ?2"
    ))
    .bind(org_id)
    .bind(agent_id)
    .fetch_optional(conn)
    .await
    .map_err(map_error)?;
    row.map(AgentDetail::try_from).transpose()
}

pub(super) async fn list_agents(
    conn: &mut SqliteConnection,
    org_id: Uuid,
    status: Option<AgentStatus>,
    after: Option<Cursor>,
    limit: u32,
) -> Result<Vec<AgentDetail>, StoreError> {
    let rows: Vec<AgentDetailRow> = sqlx::query_as(&format!(
        "SELECT {AGENT_DETAIL_COLUMNS} FROM agents \
         WHERE org_id = ?1 AND (?2 IS NULL OR status = ?2) \
           AND (?3 IS NULL OR (created_at, agent_id) > (?3, ?4)) \
         ORDER BY created_at, agent_id LIMIT ?5"
    ))
    .bind(org_id)
    .bind(status.map(AgentStatus::as_str))
    .bind(after.map(|c| to_micros(c.at)))
    .bind(after.map(|c| c.id))
    .bind(i64::from(limit))
    .fetch_all(conn)
    .await
    .map_err(map_error)?;
    rows.into_iter().map(AgentDetail::try_from).collect()
}

async fn update_agent_status(
    conn: &mut SqliteConnection,
    org_id: Uuid,
    agent_id: Uuid,
    status: AgentStatus,
    reason: Option<&str>,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE agents SET status = ?3, status_reason = ?4, updated_at = ?5 \
         WHERE org_id = ?1 AND agent_id = ?2",
    )
    .bind(org_id)
    .bind(agent_id)
    .bind(status.as_str())
    .bind(reason)
    .bind(now_micros())
    .execute(conn)
    .await
    .map_err(map_error)?;
    Ok(())
}

pub(super) async fn audit_events(
    conn: &mut SqliteConnection,
    org_id: Uuid,
    query: &AuditQuery,
) -> Result<Vec<AuditEvent>, StoreError> {
    let rows: Vec<AuditRow> = sqlx::query_as(&format!(
        "SELECT {AUDIT_COLUMNS}, detail FROM audit_events \
         WHERE org_id = ?1 \
           AND (?2 IS NULL OR occurred_at >= ?2) \
           AND (?3 IS NULL OR occurred_at < ?3) \
           AND (?4 IS NULL OR action = ?4) \
           AND (?5 IS NULL OR (occurred_at, event_id) < (?5, ?6)) \
         ORDER BY occurred_at DESC, event_id DESC LIMIT ?7"
    ))
    .bind(org_id)
    .bind(query.start.map(to_micros))
    .bind(query.end.map(to_micros))
    .bind(query.action.map(|a| a.as_str()))
    .bind(query.before.map(|c| to_micros(c.at)))
    .bind(query.before.map(|c| c.id))
    .bind(i64::from(query.limit))
    .fetch_all(conn)
    .await
    .map_err(map_error)?;
    rows.into_iter().map(AuditEvent::try_from).collect()
}

impl AgentStatements for SqliteConnection {
    async fn agent_detail(
        &mut self,
        org_id: Uuid,
        agent_id: Uuid,
        _lock: bool,
    ) -> Result<Option<AgentDetail>, StoreError> {
        agent_detail(self, org_id, agent_id).await
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
            "UPDATE agents SET tools = ?3, updated_at = ?4 WHERE org_id = ?1 AND agent_id = ?2",
        )
        .bind(org_id)
        .bind(agent_id)
        .bind(tools)
        .bind(now_micros())
        .execute(self)
        .await
        .map_err(map_error)?;
        Ok(())
    }

    async fn insert_audit(&mut self, org_id: Uuid, audit: &AuditEntry) -> Result<(), StoreError> {
        insert_audit(self, org_id, audit).await
    }
}

impl RevocationStatements for SqliteConnection {
    async fn token(
        &mut self,
        org_id: Uuid,
        token_id: Uuid,
    ) -> Result<Option<TokenMetadata>, StoreError> {
        let row: Option<TokenRow> = sqlx::query_as(&format!(
            "SELECT {TOKEN_COLUMNS} FROM tokens WHERE org_id = ?1 AND token_id = ?2"
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
        super::tenant::revoke_token(self, org_id, token_id)
            .await?
            .ok_or_else(|| StoreError::Query("the token vanished".into()))
    }

    async fn revoke_issued(
        &mut self,
        org_id: Uuid,
        token_id: Uuid,
    ) -> Result<Vec<Uuid>, StoreError> {
        sqlx::query_scalar(ISSUED_TREE_REVOKE)
            .bind(org_id)
            .bind(token_id)
            .bind(now_micros())
            .fetch_all(self)
            .await
            .map_err(map_error)
    }
}

/// Revokes the tokens under an issuer that are not revoked yet, walking the issuer tree within
/// the org.
const ISSUED_TREE_REVOKE: &str = "\
    WITH RECURSIVE issued (token_id) AS ( \
        SELECT token_id FROM tokens WHERE org_id = ?1 AND issuer_token_id = ?2 \
        UNION \
        SELECT t.token_id FROM tokens AS t JOIN issued AS i ON t.issuer_token_id = i.token_id \
        WHERE t.org_id = ?1 \
    ) \
    UPDATE tokens SET revoked_at = ?3 \
    WHERE org_id = ?1 AND revoked_at IS NULL AND token_id IN (SELECT token_id FROM issued) \
    RETURNING token_id";
