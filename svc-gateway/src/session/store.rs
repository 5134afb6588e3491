//! Durable sessions in PostgreSQL, under the same row-level security as every tenant table.

use std::time::Duration;

use sqlx::PgPool;
use svc_runtime::postgres::{self as pool, PoolSettings};
use uuid::Uuid;

/// The auth server's role, which the gateway no longer uses.
pub use svc_runtime::postgres::APP_ROLE;

/// The gateway's own role (migration `gateway_role`): it may record sessions and checkpoints
/// and nothing else, so a compromised gateway cannot read, mint or revoke tokens. Like
/// [`APP_ROLE`] it owns nothing and cannot bypass row-level security.
pub const GATEWAY_ROLE: &str = "svc_gateway";

/// Pool size: one write per completed call, off the request path.
pub const MAX_CONNECTIONS: u32 = 4;
/// Bound on getting a pooled connection, connecting included.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

/// Token counts reported by the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// `usage.prompt_tokens`.
    pub prompt_tokens: i64,
    /// `usage.completion_tokens`.
    pub completion_tokens: i64,
    /// `usage.total_tokens`.
    pub total_tokens: i64,
}

impl Usage {
    /// The `usage` object of an OpenAI-shaped body, when it has one.
    pub fn from_body(body: &[u8]) -> Option<Usage> {
        let json: serde_json::Value = serde_json::from_slice(body).ok()?;
        let usage = json.get("usage")?;
        Some(Usage {
            prompt_tokens: usage.get("prompt_tokens")?.as_i64()?,
            completion_tokens: usage.get("completion_tokens")?.as_i64()?,
            total_tokens: usage.get("total_tokens")?.as_i64()?,
        })
    }
}

/// The metadata of one completed call. No content, ever.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The gateway request id.
    pub request_id: Uuid,
    /// The requested model.
    pub model: String,
    /// How many messages the request carried.
    pub message_count: i32,
    /// The HTTP status returned.
    pub status: u16,
    /// Time to the response head, in milliseconds.
    pub latency_ms: i32,
    /// Whether the answer was streamed.
    pub stream: bool,
    /// Token usage, when the answer reported it.
    pub usage: Option<Usage>,
}

/// One checkpoint to record, with the session it belongs to.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The org (the transaction is scoped to it).
    pub org_id: Uuid,
    /// The agent of the request, if any.
    pub agent_id: Option<Uuid>,
    /// The session id as the client sent it, or minted.
    pub session_id: String,
    /// What to record.
    pub checkpoint: Checkpoint,
}

/// The session upsert and the checkpoint insert, inside `tx`.
async fn write(
    tx: &mut sqlx::PgConnection,
    org_id: Uuid,
    agent_id: Option<Uuid>,
    session_id: &str,
    checkpoint: &Checkpoint,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO sessions (org_id, session_id, agent_id) VALUES ($1, $2, $3)
         ON CONFLICT (org_id, session_id) DO UPDATE SET last_seen_at = now()
         WHERE sessions.org_id = $1",
    )
    .bind(org_id)
    .bind(session_id)
    .bind(agent_id)
    .execute(&mut *tx)
    .await?;
    let usage = checkpoint.usage;
    sqlx::query(
        "INSERT INTO session_checkpoints (checkpoint_id, org_id, session_id, request_id, model,
             message_count, status, latency_ms, stream, prompt_tokens, completion_tokens,
             total_tokens)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    )
    .bind(svc_core::id::uuid_v7())
    .bind(org_id)
    .bind(session_id)
    .bind(checkpoint.request_id)
    .bind(&checkpoint.model)
    .bind(checkpoint.message_count)
    .bind(i32::from(checkpoint.status))
    .bind(checkpoint.latency_ms)
    .bind(checkpoint.stream)
    .bind(usage.map(|u| u.prompt_tokens))
    .bind(usage.map(|u| u.completion_tokens))
    .bind(usage.map(|u| u.total_tokens))
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Writes sessions and checkpoints.
#[derive(Clone, Debug)]
pub struct SessionStore {
    pool: PgPool,
}

impl SessionStore {
    /// A lazily connecting pool for `dsn`; every connection runs as [`GATEWAY_ROLE`]. Fails
    /// only on a malformed DSN, without echoing it.
    pub fn connect_lazy(dsn: &str) -> Result<SessionStore, InvalidDsn> {
        // The shared pool builder, so both services reach PostgreSQL the same way: a non-owner
        // role, no statement logging, TCP_NODELAY, bounded waits.
        let options = pool::connect_options(dsn).map_err(|_| InvalidDsn)?;
        let settings = PoolSettings {
            max_connections: MAX_CONNECTIONS,
            acquire_timeout: ACQUIRE_TIMEOUT,
            ..PoolSettings::default()
        };
        Ok(SessionStore {
            pool: pool::role_pool(options, &settings, GATEWAY_ROLE),
        })
    }

    /// Records the session (created, or its last use bumped) and one checkpoint, in one
    /// transaction scoped to `org_id`.
    pub async fn record(
        &self,
        org_id: Uuid,
        agent_id: Option<Uuid>,
        session_id: &str,
        checkpoint: &Checkpoint,
    ) -> Result<(), sqlx::Error> {
        let mut tx = pool::begin_tenant(&self.pool, org_id).await?;
        write(&mut tx, org_id, agent_id, session_id, checkpoint).await?;
        tx.commit().await
    }

    /// Records `entries`, all of `org_id`, in one transaction scoped to it.
    pub async fn record_all(&self, org_id: Uuid, entries: &[&Entry]) -> Result<(), sqlx::Error> {
        let mut tx = pool::begin_tenant(&self.pool, org_id).await?;
        for entry in entries {
            write(
                &mut tx,
                org_id,
                entry.agent_id,
                &entry.session_id,
                &entry.checkpoint,
            )
            .await?;
        }
        tx.commit().await
    }

    /// The pool, for readiness and tests.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

/// `POSTGRES_DSN` does not parse (its value is never shown).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("POSTGRES_DSN: not a valid PostgreSQL connection string")]
pub struct InvalidDsn;
