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

use super::agent_moves::{AgentStatements, move_agent, set_tools, stored_status};
use super::budgets::{self as budget_flows, Budget, BudgetSpend, BudgetTarget};
use super::driver_error;
use super::references::ReferenceLookups;
use super::revocation;
use super::rows::{AGENT_COLUMNS, TOKEN_COLUMNS};
use super::timer::QueryTimer;
use super::{
    Agent, AgentDetail, AgentStatus, AuditEntry, AuditEvent, AuditQuery, BootstrapOrg, BoxFuture,
    Cursor, NewAgent, NewToken, NewUser, Organization, Revocation, Revoked, Store, StoreError,
    TokenMetadata, TokenRecord, UsageGroup, UsageQuery, UsageTotals, User,
};

mod admin;
mod batch;
mod budgets;
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

    /// Runs `work` in a transaction scoped to `org_id`, timed, and commits what it returns
    /// `Ok` (an error rolls everything back: an act and its audit event land together).
    async fn in_tenant<T>(
        &self,
        org_id: Uuid,
        work: impl for<'c> FnOnce(&'c mut PgConnection) -> BoxFuture<'c, Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        self.timer
            .time(async {
                let mut tx = self.tenant(org_id).await?;
                let out = work(&mut tx).await?;
                tx.commit().await.map_err(map_error)?;
                Ok(out)
            })
            .await
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
        self.in_tenant(org_id, |tx| {
            Box::pin(admin::ensure_organization(tx, org_id))
        })
        .await
    }

    async fn bootstrap(
        &self,
        org: BootstrapOrg,
        token: NewToken,
        audit: AuditEntry,
    ) -> Result<Option<(Organization, TokenMetadata)>, StoreError> {
        self.in_tenant(org.org_id(), |tx| {
            Box::pin(async move {
                let Some(organization) = admin::bootstrap_org(tx, &org).await? else {
                    return Ok(None);
                };
                let token = admin::insert_token(tx, organization.org_id, &token).await?;
                tx.insert_audit(organization.org_id, &audit).await?;
                Ok(Some((organization, token)))
            })
        })
        .await
    }

    async fn create_user(
        &self,
        org_id: Uuid,
        user: NewUser,
        audit: Option<AuditEntry>,
    ) -> Result<User, StoreError> {
        self.in_tenant(org_id, |tx| {
            Box::pin(async move {
                let user = admin::insert_user(tx, org_id, &user).await?;
                tx.maybe_audit(org_id, audit.as_ref()).await?;
                Ok(user)
            })
        })
        .await
    }

    async fn list_users(
        &self,
        org_id: Uuid,
        after: Option<Cursor>,
        limit: u32,
    ) -> Result<Vec<User>, StoreError> {
        self.in_tenant(org_id, |tx| {
            Box::pin(admin::list_users(tx, org_id, after, limit))
        })
        .await
    }

    async fn is_member(&self, org_id: Uuid, user_id: Uuid) -> Result<bool, StoreError> {
        self.in_tenant(org_id, |tx| Box::pin(tx.user_in_org(org_id, user_id)))
            .await
    }

    async fn create_agent(
        &self,
        org_id: Uuid,
        agent: NewAgent,
        audit: Option<AuditEntry>,
    ) -> Result<AgentDetail, StoreError> {
        self.in_tenant(org_id, |tx| {
            Box::pin(async move {
                let agent = admin::insert_agent(tx, org_id, &agent).await?;
                tx.maybe_audit(org_id, audit.as_ref()).await?;
                Ok(agent)
            })
        })
        .await
    }

    async fn agent_detail(
        &self,
        org_id: Uuid,
        agent_id: Uuid,
    ) -> Result<Option<AgentDetail>, StoreError> {
        self.in_tenant(org_id, |tx| {
            Box::pin(tx.agent_detail(org_id, agent_id, false))
        })
        .await
    }

    async fn list_agents(
        &self,
        org_id: Uuid,
        status: Option<AgentStatus>,
        after: Option<Cursor>,
        limit: u32,
    ) -> Result<Vec<AgentDetail>, StoreError> {
        self.in_tenant(org_id, |tx| {
            Box::pin(admin::list_agents(tx, org_id, status, after, limit))
        })
        .await
    }

    async fn set_agent_status(
        &self,
        org_id: Uuid,
        agent_id: Uuid,
        status: AgentStatus,
        reason: Option<String>,
        audit: AuditEntry,
    ) -> Result<Option<AgentDetail>, StoreError> {
        self.in_tenant(org_id, |tx| {
            Box::pin(move_agent(tx, org_id, agent_id, status, reason, audit))
        })
        .await
    }

    async fn set_agent_tools(
        &self,
        org_id: Uuid,
        agent_id: Uuid,
        tools: Vec<String>,
        audit: AuditEntry,
    ) -> Result<Option<AgentDetail>, StoreError> {
        self.in_tenant(org_id, |tx| {
            Box::pin(set_tools(tx, org_id, agent_id, tools, audit))
        })
        .await
    }

    async fn create_token(
        &self,
        org_id: Uuid,
        token: NewToken,
        audit: Option<AuditEntry>,
    ) -> Result<TokenMetadata, StoreError> {
        self.in_tenant(org_id, |tx| {
            Box::pin(async move {
                let token = admin::insert_token(tx, org_id, &token).await?;
                tx.maybe_audit(org_id, audit.as_ref()).await?;
                Ok(token)
            })
        })
        .await
    }

    async fn revoke(
        &self,
        org_id: Uuid,
        revocation: Revocation,
        audit: Option<AuditEntry>,
    ) -> Result<Option<Revoked>, StoreError> {
        self.in_tenant(org_id, |tx| {
            Box::pin(revocation::revoke(tx, org_id, revocation, audit))
        })
        .await
    }

    async fn list_tokens(
        &self,
        org_id: Uuid,
        after: Option<Cursor>,
        limit: u32,
    ) -> Result<Vec<TokenMetadata>, StoreError> {
        self.in_tenant(org_id, |tx| {
            Box::pin(async move {
                let rows: Vec<TokenRow> = sqlx::query_as(&format!(
                    "SELECT {TOKEN_COLUMNS} FROM tokens WHERE org_id = $1 \
                       AND ($2::timestamptz IS NULL OR (created_at, token_id) > ($2, $3::uuid)) \
                     ORDER BY created_at, token_id LIMIT $4"
                ))
                .bind(org_id)
                .bind(after.map(|c| c.at))
                .bind(after.map(|c| c.id))
                .bind(i64::from(limit))
                .fetch_all(&mut *tx)
                .await
                .map_err(map_error)?;
                rows.into_iter().map(TokenMetadata::try_from).collect()
            })
        })
        .await
    }

    async fn record_audit(&self, org_id: Uuid, audit: AuditEntry) -> Result<(), StoreError> {
        self.in_tenant(org_id, |tx| {
            Box::pin(async move { tx.insert_audit(org_id, &audit).await })
        })
        .await
    }

    async fn audit_events(
        &self,
        org_id: Uuid,
        query: &AuditQuery,
    ) -> Result<Vec<AuditEvent>, StoreError> {
        let query = query.clone();
        self.in_tenant(org_id, |tx| {
            Box::pin(async move { admin::audit_events(tx, org_id, &query).await })
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
                    UsageGroup::Tool => "tool",
                };
                let mut tx = self.tenant(org_id).await?;
                let rows: Vec<UsageTotals> = sqlx::query_as(&super::usage::totals_sql(
                    query.group,
                    key,
                    '$',
                    "COLLATE \"C\"",
                ))
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

    async fn set_budget(
        &self,
        org_id: Uuid,
        budget: Budget,
        audit: AuditEntry,
    ) -> Result<Budget, StoreError> {
        self.in_tenant(org_id, |tx| {
            Box::pin(budget_flows::set(tx, org_id, budget, audit))
        })
        .await
    }

    async fn delete_budget(
        &self,
        org_id: Uuid,
        target: BudgetTarget,
        audit: AuditEntry,
    ) -> Result<bool, StoreError> {
        self.in_tenant(org_id, |tx| {
            Box::pin(budget_flows::delete(tx, org_id, target, audit))
        })
        .await
    }

    async fn list_budgets(
        &self,
        org_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Vec<BudgetSpend>, StoreError> {
        self.in_tenant(org_id, |tx| Box::pin(budget_flows::list(tx, org_id, now)))
            .await
    }

    async fn budget_spend(
        &self,
        org_id: Uuid,
        budgets: Vec<Budget>,
        now: DateTime<Utc>,
    ) -> Result<Vec<BudgetSpend>, StoreError> {
        self.in_tenant(org_id, |tx| {
            Box::pin(budget_flows::spend(tx, org_id, budgets, now))
        })
        .await
    }
}

impl ReferenceLookups for PgConnection {
    async fn agent_in_org(
        &mut self,
        org_id: Uuid,
        agent_id: Uuid,
    ) -> Result<Option<AgentStatus>, StoreError> {
        let status: Option<String> =
            sqlx::query_scalar("SELECT status FROM agents WHERE org_id = $1 AND agent_id = $2")
                .bind(org_id)
                .bind(agent_id)
                .fetch_optional(self)
                .await
                .map_err(map_error)?;
        stored_status(status)
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
