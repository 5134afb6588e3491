//! Opening an embedded database: connection options, the pool, and the schema.

use std::path::Path;
use std::time::Duration;

use sqlx::Connection;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use super::map_error;
use crate::store::StoreError;

/// The schema, run at every open: each statement is idempotent.
const SCHEMA: &str = include_str!("schema.sql");

/// The `user_version` this build writes. A database stamped with a higher one was written by a
/// newer build, whose schema this one may misread, so opening it is refused.
pub const SCHEMA_VERSION: i64 = 6;

/// Default pool size for a file. SQLite has one writer at a time; a few connections let
/// validation reads proceed while a token is written (WAL readers never wait for the writer).
pub const DEFAULT_MAX_CONNECTIONS: u32 = 4;
/// Default wait on a database another connection holds locked, before answering busy.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Default bound on getting a pooled connection, opening it included.
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

/// Pool sizing and waits for an embedded database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteSettings {
    /// Most connections open at once (an in-memory database always uses one).
    pub max_connections: u32,
    /// How long a statement waits on another connection's lock.
    pub busy_timeout: Duration,
    /// Bound on getting a pooled connection.
    pub acquire_timeout: Duration,
}

impl Default for SqliteSettings {
    fn default() -> Self {
        SqliteSettings {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            acquire_timeout: DEFAULT_ACQUIRE_TIMEOUT,
        }
    }
}

/// Opens (creating when missing) the database file at `path` in WAL mode.
pub(super) async fn file_pool(
    path: &Path,
    settings: &SqliteSettings,
) -> Result<SqlitePool, StoreError> {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        // With WAL, NORMAL loses at most the last commits on power loss, never integrity.
        .synchronous(SqliteSynchronous::Normal)
        .foreign_keys(true)
        .busy_timeout(settings.busy_timeout);
    let pool = SqlitePoolOptions::new()
        .max_connections(settings.max_connections.max(1))
        .acquire_timeout(settings.acquire_timeout)
        .connect_with(options)
        .await
        .map_err(map_error)?;
    create_schema(&pool).await?;
    Ok(pool)
}

/// A private in-memory database. It lives in its one connection, so the pool holds exactly one
/// and never closes it for idleness or age: closing it would drop every row.
pub(super) async fn memory_pool(settings: &SqliteSettings) -> Result<SqlitePool, StoreError> {
    let options = SqliteConnectOptions::new()
        .in_memory(true)
        .foreign_keys(true)
        .busy_timeout(settings.busy_timeout);
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .min_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .acquire_timeout(settings.acquire_timeout)
        .connect_with(options)
        .await
        .map_err(map_error)?;
    create_schema(&pool).await?;
    Ok(pool)
}

/// Columns later schema versions added, which `CREATE TABLE IF NOT EXISTS` does not add to a
/// table an older build created: version 2 the issuer, version 3 the limits, version 4 the
/// agents' change time and status reason, version 5 the agents' tool grants and the ledger's
/// tool calls, version 6 the ledger's cost (its `budgets` table is new, which the schema's
/// `CREATE TABLE IF NOT EXISTS` creates). `(table, column, definition)`.
const ADDED_COLUMNS: [(&str, &str, &str); 9] = [
    (
        "tokens",
        "issuer_token_id",
        "issuer_token_id BLOB CHECK (length(issuer_token_id) = 16)",
    ),
    (
        "tokens",
        "rpm_limit",
        "rpm_limit INTEGER CHECK (rpm_limit > 0)",
    ),
    (
        "tokens",
        "tpm_limit",
        "tpm_limit INTEGER CHECK (tpm_limit > 0)",
    ),
    (
        "agents",
        "updated_at",
        "updated_at INTEGER NOT NULL DEFAULT 0",
    ),
    (
        "agents",
        "status_reason",
        "status_reason TEXT CHECK (length(status_reason) <= 256)",
    ),
    (
        "agents",
        "tools",
        "tools TEXT NOT NULL DEFAULT '' CHECK (length(tools) <= 65536)",
    ),
    (
        "usage_ledger",
        "tool",
        "tool TEXT CHECK (length(tool) <= 200)",
    ),
    (
        "usage_ledger",
        "outcome",
        "outcome TEXT CHECK (outcome IN ('ok', 'error', 'denied'))",
    ),
    (
        "usage_ledger",
        "cost_usd_micros",
        "cost_usd_micros INTEGER NOT NULL DEFAULT 0 CHECK (cost_usd_micros >= 0)",
    ),
];

async fn add_columns(tx: &mut sqlx::SqliteConnection) -> Result<(), StoreError> {
    for (table, name, definition) in ADDED_COLUMNS {
        let present: i64 =
            sqlx::query_scalar("SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2")
                .bind(table)
                .bind(name)
                .fetch_one(&mut *tx)
                .await
                .map_err(map_error)?;
        if present == 0 {
            // The table and definition are constants above, never input.
            sqlx::raw_sql(&format!("ALTER TABLE {table} ADD COLUMN {definition}"))
                .execute(&mut *tx)
                .await
                .map_err(map_error)?;
        }
    }
    // An agent of an older build has not changed since it was created.
    sqlx::query("UPDATE agents SET updated_at = created_at WHERE updated_at = 0")
        .execute(&mut *tx)
        .await
        .map_err(map_error)?;
    Ok(())
}

async fn create_schema(pool: &SqlitePool) -> Result<(), StoreError> {
    let mut conn = pool.acquire().await.map_err(map_error)?;
    let mut tx = conn
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(map_error)?;
    let version: i64 = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(&mut *tx)
        .await
        .map_err(map_error)?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::Query(
            format!(
                "the embedded database has schema version {version}, newer than this build's \
                 {SCHEMA_VERSION}"
            )
            .into(),
        ));
    }
    sqlx::raw_sql(SCHEMA)
        .execute(&mut *tx)
        .await
        .map_err(map_error)?;
    add_columns(&mut tx).await?;
    // PRAGMA takes no bind parameters; the value is a constant.
    sqlx::raw_sql(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))
        .execute(&mut *tx)
        .await
        .map_err(map_error)?;
    tx.commit().await.map_err(map_error)
}
