//! [`Store`] on an embedded SQLite database, for `svc dev` and single-node trials.
//!
//! A file (WAL, a busy timeout) or a private in-memory database, with its own schema created at
//! open (`schema.sql`, idempotent; the PostgreSQL migrations do not apply). SQLite has no
//! row-level security, so tenant isolation rests on the other lines of defence: every tenant
//! query names `org_id` in its `WHERE`, and composite foreign keys tie a token's user and agent
//! to the token's org. Production refuses this store (see `svc-gateway dev`).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use svc_auth_server::store::{SqliteStore, Store};
//!
//! let store = SqliteStore::in_memory().await.unwrap();
//! let org_id = uuid::Uuid::new_v4();
//! let org = store.ensure_organization(org_id).await.unwrap();
//! assert_eq!(org.org_id, org_id);
//! assert!(store.agent(org_id, uuid::Uuid::new_v4()).await.unwrap().is_none());
//! # }
//! ```

use std::path::Path;

use chrono::{DateTime, Utc};
use prometheus_client::metrics::histogram::Histogram;
use sqlx::{Sqlite, SqliteConnection, SqlitePool, Transaction};
use uuid::Uuid;

use super::agent_moves::{AgentStatements, move_agent, set_tools};
use super::budgets::{self as budget_flows, Budget, BudgetSpend, BudgetTarget};
use super::driver_error;
use super::references::ReferenceLookups;
use super::revocation;
use super::timer::QueryTimer;
use super::{
    Agent, AgentDetail, AgentStatus, AuditEntry, AuditEvent, AuditQuery, BootstrapOrg, BoxFuture,
    Cursor, NewAgent, NewToken, NewUser, Organization, Revocation, Revoked, Store, StoreError,
    TokenMetadata, TokenRecord, UsageQuery, UsageTotals, User,
};

mod admin;
mod budgets;
mod ledger;
mod open;
mod tenant;

pub use open::{
    DEFAULT_ACQUIRE_TIMEOUT, DEFAULT_BUSY_TIMEOUT, DEFAULT_MAX_CONNECTIONS, SCHEMA_VERSION,
    SqliteSettings,
};

/// The embedded identity store. Cloning shares the pool.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    timer: QueryTimer,
}

impl SqliteStore {
    /// Opens the database file at `path`, creating it and its schema when missing.
    pub async fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_with(path, &SqliteSettings::default()).await
    }

    /// [`SqliteStore::open`] with explicit pool settings.
    pub async fn open_with(
        path: impl AsRef<Path>,
        settings: &SqliteSettings,
    ) -> Result<SqliteStore, StoreError> {
        let pool = open::file_pool(path.as_ref(), settings).await?;
        Ok(SqliteStore::from_pool(pool))
    }

    /// A private in-memory database: gone when the last clone of the store is dropped.
    pub async fn in_memory() -> Result<SqliteStore, StoreError> {
        let pool = open::memory_pool(&SqliteSettings::default()).await?;
        Ok(SqliteStore::from_pool(pool))
    }

    fn from_pool(pool: SqlitePool) -> SqliteStore {
        SqliteStore {
            pool,
            timer: QueryTimer::default(),
        }
    }

    /// Records every store call's wall time in `histogram` (`svc_db_query_duration_seconds`).
    pub fn with_query_histogram(mut self, histogram: Histogram) -> SqliteStore {
        self.timer = QueryTimer::new(histogram);
        self
    }

    /// The underlying pool.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Closes every connection, checkpointing the WAL into the database file.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// A read transaction.
    async fn read(&self) -> Result<Transaction<'static, Sqlite>, StoreError> {
        self.pool.begin().await.map_err(map_error)
    }

    /// A write transaction. `IMMEDIATE` takes the write lock up front, waiting up to the busy
    /// timeout; a deferred transaction that reads then writes would fail at once instead when
    /// another connection wrote in between.
    async fn write(&self) -> Result<Transaction<'static, Sqlite>, StoreError> {
        self.pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(map_error)
    }

    /// Runs `work` in a write transaction, timed, and commits what it returns `Ok` (an error
    /// rolls everything back: an act and its audit event land together).
    async fn in_write<T>(
        &self,
        work: impl for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        self.timer
            .time(async {
                let mut tx = self.write().await?;
                let out = work(&mut tx).await?;
                tx.commit().await.map_err(map_error)?;
                Ok(out)
            })
            .await
    }

    /// Runs `work` in a read transaction, timed.
    async fn in_read<T>(
        &self,
        work: impl for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        self.timer
            .time(async {
                let mut tx = self.read().await?;
                let out = work(&mut tx).await?;
                tx.commit().await.map_err(map_error)?;
                Ok(out)
            })
            .await
    }
}

/// Sorts driver errors into "could not get the database in time" and "the database said no".
pub(crate) fn map_error(error: sqlx::Error) -> StoreError {
    driver_error::classify(error, lock_not_granted)
}

fn map_insert_error(error: sqlx::Error, what: &'static str) -> StoreError {
    driver_error::classify_insert(error, what, lock_not_granted)
}

/// Another connection held the lock past the busy timeout: the database is there but could not
/// be had in time.
fn lock_not_granted(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if is_busy(db.code().as_deref()))
}

/// SQLITE_BUSY (5) and SQLITE_LOCKED (6), in any extended form: the lock was not granted
/// within the busy timeout.
fn is_busy(code: Option<&str>) -> bool {
    code.and_then(|code| code.parse::<i32>().ok())
        .is_some_and(|code| matches!(code & 0xff, 5 | 6))
}

/// Now, at the stored precision (microseconds), so a returned time equals its re-read.
fn now_micros() -> i64 {
    Utc::now().timestamp_micros()
}

fn to_micros(time: DateTime<Utc>) -> i64 {
    time.timestamp_micros()
}

impl Store for SqliteStore {
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
            .time(tenant::token_for_validation(&self.pool, token_id))
            .await
    }

    async fn token_with_agent(
        &self,
        token_id: Uuid,
        agent_id: Uuid,
    ) -> Result<Option<(TokenRecord, Option<Agent>)>, StoreError> {
        let Some(mut token) = self.token_for_validation(token_id).await? else {
            return Ok(None);
        };
        let agent = self.agent(token.org_id, agent_id).await?;
        // The budgets are the agent's the call acts as, when it is in the org.
        if let Some(agent) = &agent {
            token.budgets =
                tenant::budgets_for_call(&self.pool, &token, Some(agent.agent_id)).await?;
        }
        Ok(Some((token, agent)))
    }

    async fn agent(&self, org_id: Uuid, agent_id: Uuid) -> Result<Option<Agent>, StoreError> {
        self.timer
            .time(async {
                let mut tx = self.read().await?;
                let agent = tenant::agent(&mut tx, org_id, agent_id).await?;
                tx.commit().await.map_err(map_error)?;
                Ok(agent)
            })
            .await
    }

    async fn ensure_organization(&self, org_id: Uuid) -> Result<Organization, StoreError> {
        self.in_write(|tx| Box::pin(admin::ensure_organization(tx, org_id)))
            .await
    }

    async fn bootstrap(
        &self,
        org: BootstrapOrg,
        token: NewToken,
        audit: AuditEntry,
    ) -> Result<Option<(Organization, TokenMetadata)>, StoreError> {
        self.in_write(|tx| {
            Box::pin(async move {
                let Some(organization) = admin::bootstrap_org(tx, &org).await? else {
                    return Ok(None);
                };
                let token = tenant::create_token(tx, organization.org_id, &token).await?;
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
        self.in_write(|tx| {
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
        self.in_read(|tx| Box::pin(admin::list_users(tx, org_id, after, limit)))
            .await
    }

    async fn is_member(&self, org_id: Uuid, user_id: Uuid) -> Result<bool, StoreError> {
        self.in_read(|tx| Box::pin(tx.user_in_org(org_id, user_id)))
            .await
    }

    async fn create_agent(
        &self,
        org_id: Uuid,
        agent: NewAgent,
        audit: Option<AuditEntry>,
    ) -> Result<AgentDetail, StoreError> {
        self.in_write(|tx| {
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
        self.in_read(|tx| Box::pin(tx.agent_detail(org_id, agent_id, false)))
            .await
    }

    async fn list_agents(
        &self,
        org_id: Uuid,
        status: Option<AgentStatus>,
        after: Option<Cursor>,
        limit: u32,
    ) -> Result<Vec<AgentDetail>, StoreError> {
        self.in_read(|tx| Box::pin(admin::list_agents(tx, org_id, status, after, limit)))
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
        self.in_write(|tx| Box::pin(move_agent(tx, org_id, agent_id, status, reason, audit)))
            .await
    }

    async fn set_agent_tools(
        &self,
        org_id: Uuid,
        agent_id: Uuid,
        tools: Vec<String>,
        audit: AuditEntry,
    ) -> Result<Option<AgentDetail>, StoreError> {
        self.in_write(|tx| Box::pin(set_tools(tx, org_id, agent_id, tools, audit)))
            .await
    }

    async fn create_token(
        &self,
        org_id: Uuid,
        token: NewToken,
        audit: Option<AuditEntry>,
    ) -> Result<TokenMetadata, StoreError> {
        self.in_write(|tx| {
            Box::pin(async move {
                let created = tenant::create_token(tx, org_id, &token).await?;
                tx.maybe_audit(org_id, audit.as_ref()).await?;
                Ok(created)
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
        self.in_write(|tx| Box::pin(revocation::revoke(tx, org_id, revocation, audit)))
            .await
    }

    async fn list_tokens(
        &self,
        org_id: Uuid,
        after: Option<Cursor>,
        limit: u32,
    ) -> Result<Vec<TokenMetadata>, StoreError> {
        self.in_read(|tx| Box::pin(tenant::list_tokens(tx, org_id, after, limit)))
            .await
    }

    async fn record_audit(&self, org_id: Uuid, audit: AuditEntry) -> Result<(), StoreError> {
        self.in_write(|tx| Box::pin(async move { tx.insert_audit(org_id, &audit).await }))
            .await
    }

    async fn audit_events(
        &self,
        org_id: Uuid,
        query: &AuditQuery,
    ) -> Result<Vec<AuditEvent>, StoreError> {
        let query = query.clone();
        self.in_read(|tx| Box::pin(async move { admin::audit_events(tx, org_id, &query).await }))
            .await
    }

    async fn usage(
        &self,
        org_id: Uuid,
        query: &UsageQuery,
    ) -> Result<Vec<UsageTotals>, StoreError> {
        self.usage_totals(org_id, query).await
    }

    async fn set_budget(
        &self,
        org_id: Uuid,
        budget: Budget,
        audit: AuditEntry,
    ) -> Result<Budget, StoreError> {
        self.in_write(|tx| Box::pin(budget_flows::set(tx, org_id, budget, audit)))
            .await
    }

    async fn delete_budget(
        &self,
        org_id: Uuid,
        target: BudgetTarget,
        audit: AuditEntry,
    ) -> Result<bool, StoreError> {
        self.in_write(|tx| Box::pin(budget_flows::delete(tx, org_id, target, audit)))
            .await
    }

    async fn list_budgets(
        &self,
        org_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Vec<BudgetSpend>, StoreError> {
        self.in_read(|tx| Box::pin(budget_flows::list(tx, org_id, now)))
            .await
    }

    async fn budget_spend(
        &self,
        org_id: Uuid,
        budgets: Vec<Budget>,
        now: DateTime<Utc>,
    ) -> Result<Vec<BudgetSpend>, StoreError> {
        self.in_read(|tx| Box::pin(budget_flows::spend(tx, org_id, budgets, now)))
            .await
    }
}

#[cfg(test)]
mod tests;
