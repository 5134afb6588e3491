//! [`Store`] on PostgreSQL, with row-level security as a second line of tenant isolation.
//!
//! Every tenant method runs in a transaction that first calls
//! `set_config('svc.org_id', $1, true)`: local to the transaction, so a pooled connection never
//! carries one request's org into the next. Each query also names `org_id` in its `WHERE`, so a
//! policy mistake alone exposes nothing. Connections run as the application role (see
//! [`pool::app_pool`]), which the policies apply to.

use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use prometheus_client::metrics::histogram::Histogram;
use sqlx::{PgConnection, PgPool, Postgres, Transaction};
use uuid::Uuid;

use super::driver_error;
use super::references::{ReferenceLookups, check_token_references};
use super::rows::{AGENT_COLUMNS, TOKEN_COLUMNS};
use super::timer::QueryTimer;
use super::{
    Agent, NewAgent, NewToken, NewUser, Organization, Store, StoreError, TokenCursor,
    TokenMetadata, TokenRecord, UsageGroup, UsageQuery, UsageTotals, User,
};

mod batch;
mod lookups;
pub mod pool;

use batch::TokenReads;
use lookups::Lookups;
pub use pool::{APP_ROLE, PoolSettings};

// The shared rows, with PostgreSQL's `timestamptz` columns.
type TokenRow = super::rows::TokenRow<DateTime<Utc>>;
type AgentRow = super::rows::AgentRow<DateTime<Utc>>;

/// The PostgreSQL identity store. Cloning shares the pools.
#[derive(Debug, Clone)]
pub struct PgStore {
    /// Transactions and admin statements.
    pool: PgPool,
    /// The one-statement lookups of every validation (see `lookups`).
    lookups: Lookups,
    /// ValidateToken's row reads, batched when they queue (see `batch`).
    token_reads: TokenReads,
    timer: QueryTimer,
}

impl PgStore {
    /// A store over `pool`. Build the pool with [`pool::app_pool`] so RLS applies. The
    /// validation lookups get connections of their own, as many as `pool` may open and as the
    /// same application role.
    pub fn new(pool: PgPool) -> PgStore {
        let settings = PoolSettings {
            max_connections: pool.options().get_max_connections(),
            acquire_timeout: pool.options().get_acquire_timeout(),
            ..PoolSettings::default()
        };
        let lookups = Lookups::new((*pool.connect_options()).clone(), &settings, APP_ROLE);
        PgStore {
            pool,
            token_reads: TokenReads::new(lookups.clone()),
            lookups,
            timer: QueryTimer::default(),
        }
    }

    /// A store over a lazily connecting application pool for `dsn`.
    pub fn connect_lazy(dsn: &str, settings: &PoolSettings) -> Result<PgStore, StoreError> {
        let options = pool::connect_options(dsn)?;
        Ok(PgStore::new(pool::app_pool(options, settings)))
    }

    /// Records every store call's wall time in `histogram` (`svc_db_query_duration_seconds`).
    pub fn with_query_histogram(mut self, histogram: Histogram) -> PgStore {
        self.timer = QueryTimer::new(histogram);
        self
    }

    /// The underlying pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// A transaction scoped to `org_id` for row-level security.
    async fn tenant(&self, org_id: Uuid) -> Result<Transaction<'static, Postgres>, StoreError> {
        pool::begin_tenant(&self.pool, org_id)
            .await
            .map_err(map_error)
    }
}

/// Sorts driver errors into "could not reach the database" and "the database said no".
pub(crate) fn map_error(error: sqlx::Error) -> StoreError {
    driver_error::classify(error, connection_lost)
}

fn map_insert_error(error: sqlx::Error, what: &'static str) -> StoreError {
    driver_error::classify_insert(error, what, connection_lost)
}

/// A failed TLS session or a broken wire protocol: the server could not be talked to.
fn connection_lost(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Tls(_) | sqlx::Error::Protocol(_))
}

/// [`Store::agent`]'s statement, built once.
static AGENT_IN_ORG: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {AGENT_COLUMNS} FROM agent_in_org($1, $2)"));

impl Store for PgStore {
    async fn ping(&self) -> Result<(), StoreError> {
        self.timer
            .time(async {
                sqlx::query("SELECT 1")
                    .execute(&self.pool)
                    .await
                    .map(|_| ())
                    .map_err(map_error)
            })
            .await
    }

    async fn token_for_validation(
        &self,
        token_id: Uuid,
    ) -> Result<Option<TokenRecord>, StoreError> {
        self.timer
            .time(async {
                let found = self.token_reads.read(token_id, None).await?;
                Ok(found.map(|(record, _)| record))
            })
            .await
    }

    async fn token_with_agent(
        &self,
        token_id: Uuid,
        agent_id: Uuid,
    ) -> Result<Option<(TokenRecord, Option<Agent>)>, StoreError> {
        // One statement: the token row, then the agent in the org that row names (never one the
        // caller names), under row-level security as in `agent` (see `batch`).
        self.timer
            .time(self.token_reads.read(token_id, Some(agent_id)))
            .await
    }

    async fn agent(&self, org_id: Uuid, agent_id: Uuid) -> Result<Option<Agent>, StoreError> {
        self.timer
            .time(async {
                // One round trip: the function sets the org for its own statement, so row-level
                // security applies as in an org-scoped transaction (see the migration).
                // The agent's key is (org, agent): one row or none.
                let rows: Vec<AgentRow> = self
                    .lookups
                    .fetch_all(sqlx::query_as(&AGENT_IN_ORG).bind(org_id).bind(agent_id))
                    .await
                    .map_err(map_error)?;
                rows.into_iter().next().map(Agent::try_from).transpose()
            })
            .await
    }

    async fn ensure_organization(&self, org_id: Uuid) -> Result<Organization, StoreError> {
        self.timer
            .time(async {
                let mut tx = self.tenant(org_id).await?;
                sqlx::query(
                "INSERT INTO organizations (org_id) VALUES ($1) ON CONFLICT (org_id) DO NOTHING",
            )
            .bind(org_id)
            .execute(&mut *tx)
            .await
            .map_err(map_error)?;
                let (org_id, created_at): (Uuid, DateTime<Utc>) = sqlx::query_as(
                    "SELECT org_id, created_at FROM organizations WHERE org_id = $1",
                )
                .bind(org_id)
                .fetch_one(&mut *tx)
                .await
                .map_err(map_error)?;
                tx.commit().await.map_err(map_error)?;
                Ok(Organization { org_id, created_at })
            })
            .await
    }

    async fn create_user(&self, org_id: Uuid, user: NewUser) -> Result<User, StoreError> {
        self.timer
            .time(async {
                let mut tx = self.tenant(org_id).await?;
                // No RETURNING: the row only becomes visible once its membership exists.
                sqlx::query("INSERT INTO users (user_id, display_name) VALUES ($1, $2)")
                    .bind(user.user_id)
                    .bind(&user.display_name)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| map_insert_error(e, "user"))?;
                sqlx::query(
                    "INSERT INTO org_memberships (org_id, user_id, role) VALUES ($1, $2, $3)",
                )
                .bind(org_id)
                .bind(user.user_id)
                .bind(user.role.as_str())
                .execute(&mut *tx)
                .await
                .map_err(|e| map_insert_error(e, "membership"))?;
                let (user_id, created_at): (Uuid, DateTime<Utc>) = sqlx::query_as(
                    "SELECT u.user_id, u.created_at FROM users AS u \
                 JOIN org_memberships AS m ON m.user_id = u.user_id \
                 WHERE m.org_id = $1 AND u.user_id = $2",
                )
                .bind(org_id)
                .bind(user.user_id)
                .fetch_one(&mut *tx)
                .await
                .map_err(map_error)?;
                tx.commit().await.map_err(map_error)?;
                Ok(User {
                    user_id,
                    created_at,
                })
            })
            .await
    }

    async fn is_member(&self, org_id: Uuid, user_id: Uuid) -> Result<bool, StoreError> {
        self.timer
            .time(async {
                let mut tx = self.tenant(org_id).await?;
                let member = tx.user_in_org(org_id, user_id).await?;
                tx.commit().await.map_err(map_error)?;
                Ok(member)
            })
            .await
    }

    async fn create_agent(&self, org_id: Uuid, agent: NewAgent) -> Result<Agent, StoreError> {
        self.timer
            .time(async {
                let mut tx = self.tenant(org_id).await?;
                let row: AgentRow = sqlx::query_as(&format!(
                    "INSERT INTO agents (agent_id, org_id, status, name) VALUES ($1, $2, $3, $4) \
                 RETURNING {AGENT_COLUMNS}"
                ))
                .bind(agent.agent_id)
                .bind(org_id)
                .bind(agent.status.as_str())
                .bind(&agent.name)
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| map_insert_error(e, "agent"))?;
                tx.commit().await.map_err(map_error)?;
                Agent::try_from(row)
            })
            .await
    }

    async fn create_token(
        &self,
        org_id: Uuid,
        token: NewToken,
    ) -> Result<TokenMetadata, StoreError> {
        self.timer
            .time(async {
                let mut tx = self.tenant(org_id).await?;
                check_token_references(&mut *tx, org_id, &token).await?;
                let row: TokenRow = sqlx::query_as(&format!(
                    "INSERT INTO tokens (token_id, org_id, user_id, agent_id, permissions, name, \
                                     secret_hash, expires_at, issuer_token_id, rpm_limit, \
                                     tpm_limit) \
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
                .bind(token.limits.columns().0)
                .bind(token.limits.columns().1)
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| map_insert_error(e, "token"))?;
                tx.commit().await.map_err(map_error)?;
                TokenMetadata::try_from(row)
            })
            .await
    }

    async fn revoke_token(
        &self,
        org_id: Uuid,
        token_id: Uuid,
    ) -> Result<Option<TokenMetadata>, StoreError> {
        self.timer
            .time(async {
                let mut tx = self.tenant(org_id).await?;
                let row: Option<TokenRow> = sqlx::query_as(&format!(
                    "UPDATE tokens SET revoked_at = COALESCE(revoked_at, now()) \
                 WHERE org_id = $1 AND token_id = $2 RETURNING {TOKEN_COLUMNS}"
                ))
                .bind(org_id)
                .bind(token_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(map_error)?;
                tx.commit().await.map_err(map_error)?;
                row.map(TokenMetadata::try_from).transpose()
            })
            .await
    }

    async fn list_tokens(
        &self,
        org_id: Uuid,
        after: Option<TokenCursor>,
        limit: u32,
    ) -> Result<Vec<TokenMetadata>, StoreError> {
        self.timer
            .time(async {
                let mut tx = self.tenant(org_id).await?;
                let rows: Vec<TokenRow> = match after {
                    None => {
                        sqlx::query_as(&format!(
                            "SELECT {TOKEN_COLUMNS} FROM tokens WHERE org_id = $1 \
                         ORDER BY created_at, token_id LIMIT $2"
                        ))
                        .bind(org_id)
                        .bind(i64::from(limit))
                        .fetch_all(&mut *tx)
                        .await
                    }
                    Some(cursor) => {
                        sqlx::query_as(&format!(
                            "SELECT {TOKEN_COLUMNS} FROM tokens \
                         WHERE org_id = $1 AND (created_at, token_id) > ($2, $3) \
                         ORDER BY created_at, token_id LIMIT $4"
                        ))
                        .bind(org_id)
                        .bind(cursor.created_at)
                        .bind(cursor.token_id)
                        .bind(i64::from(limit))
                        .fetch_all(&mut *tx)
                        .await
                    }
                }
                .map_err(map_error)?;
                tx.commit().await.map_err(map_error)?;
                rows.into_iter().map(TokenMetadata::try_from).collect()
            })
            .await
    }

    async fn usage(
        &self,
        org_id: Uuid,
        query: &UsageQuery,
    ) -> Result<Vec<UsageTotals>, StoreError> {
        self.timer
            .time(async {
                let key = match query.group {
                    UsageGroup::Token => "token_id::text",
                    UsageGroup::Agent => "COALESCE(agent_id::text, '')",
                    UsageGroup::Model => "model",
                    UsageGroup::Day => "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
                };
                let mut tx = self.tenant(org_id).await?;
                let rows: Vec<UsageTotals> =
                    sqlx::query_as(&super::usage::totals_sql(key, '$', "COLLATE \"C\""))
                        .bind(org_id)
                        .bind(query.start)
                        .bind(query.end)
                        .bind(query.after.as_deref())
                        .bind(i64::from(query.limit))
                        .fetch_all(&mut *tx)
                        .await
                        .map_err(map_error)?;
                tx.commit().await.map_err(map_error)?;
                Ok(rows)
            })
            .await
    }
}

impl ReferenceLookups for PgConnection {
    async fn agent_in_org(&mut self, org_id: Uuid, agent_id: Uuid) -> Result<bool, StoreError> {
        sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM agents WHERE org_id = $1 AND agent_id = $2)",
        )
        .bind(org_id)
        .bind(agent_id)
        .fetch_one(self)
        .await
        .map_err(map_error)
    }

    async fn user_in_org(&mut self, org_id: Uuid, user_id: Uuid) -> Result<bool, StoreError> {
        sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM org_memberships WHERE org_id = $1 AND user_id = $2)",
        )
        .bind(org_id)
        .bind(user_id)
        .fetch_one(self)
        .await
        .map_err(map_error)
    }
}

#[cfg(test)]
mod tests;
