//! The PostgreSQL pool both services use: every connection runs as a non-owner role (the
//! application role unless told otherwise), with bounded waits, and tenant work runs in
//! transactions scoped to one org.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, Executor, PgConnection, PgPool, Postgres, Transaction};
use uuid::Uuid;

use crate::config::ConfigError;

/// The non-owner role migrations create; row-level security applies to it.
pub const APP_ROLE: &str = "svc_app";
crate::variables! {
    /// PostgreSQL connection string.
    POSTGRES_DSN;
}

/// Default pool size.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 16;
/// Default bound on opening one connection outside the pool (startup checks, migrate, seed).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Default bound on getting a pooled connection, opening it included. sqlx's default of 30 s is
/// useless to a caller with a 50 ms budget.
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(1);

/// Pool sizing and timeouts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSettings {
    /// Most connections open at once.
    pub max_connections: u32,
    /// Bound on opening a standalone connection.
    pub connect_timeout: Duration,
    /// Bound on [`PgPool::acquire`], connecting included.
    pub acquire_timeout: Duration,
}

impl Default for PoolSettings {
    fn default() -> Self {
        PoolSettings {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            acquire_timeout: DEFAULT_ACQUIRE_TIMEOUT,
        }
    }
}

/// Parses a DSN without echoing it in the error, which names [`POSTGRES_DSN`].
pub fn connect_options(dsn: &str) -> Result<PgConnectOptions, ConfigError> {
    let invalid = || ConfigError::new(POSTGRES_DSN, "not a valid PostgreSQL connection string");
    if !(dsn.starts_with("postgres://") || dsn.starts_with("postgresql://")) {
        return Err(invalid());
    }
    PgConnectOptions::from_str(dsn)
        .map(|options| options.disable_statement_logging())
        .map_err(|_| invalid())
}

/// A lazily connecting pool whose connections all `SET ROLE` to [`APP_ROLE`] unless the DSN's
/// user is that role already. The driver sets TCP_NODELAY on every socket it opens.
pub fn app_pool(options: PgConnectOptions, settings: &PoolSettings) -> PgPool {
    role_pool(options, settings, APP_ROLE)
}

/// [`app_pool`] for another non-owner role: every connection runs as `role` (a fixed SQL
/// identifier, never user input).
pub fn role_pool(options: PgConnectOptions, settings: &PoolSettings, role: &'static str) -> PgPool {
    let set_role = options.get_username() != role;
    PgPoolOptions::new()
        .max_connections(settings.max_connections)
        .acquire_timeout(settings.acquire_timeout)
        // sqlx already pings every connection when it returns to the pool, off the caller's
        // path; pinging again on acquire would add a round trip to every ValidateToken.
        .test_before_acquire(false)
        .after_connect(move |conn, _meta| {
            Box::pin(async move {
                if set_role {
                    set_role_on(conn, role).await?;
                }
                Ok(())
            })
        })
        .connect_lazy_with(options)
}

/// Makes `conn` run as `role` (a fixed SQL identifier, never user input); every pool of
/// application connections does this once per connection.
pub async fn set_role_on(conn: &mut PgConnection, role: &'static str) -> Result<(), sqlx::Error> {
    conn.execute(format!("SET ROLE {role}").as_str()).await?;
    Ok(())
}

/// A transaction on `pool` in which row-level security sees `org_id` only.
///
/// The setting is local to the transaction (`set_config(.., true)`), never set on the pooled
/// session, so a connection handed back to the pool carries no org into its next use. Queries
/// inside still name `org_id` in their `WHERE`: the policies are the second line, not the only one.
pub async fn begin_tenant(
    pool: &PgPool,
    org_id: Uuid,
) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT set_config('svc.org_id', $1, true)")
        .bind(org_id.to_string())
        .execute(&mut *tx)
        .await?;
    Ok(tx)
}

/// Why [`connect_owner`] got no connection.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The bound passed first.
    #[error("connecting timed out")]
    Timeout,
    /// The driver failed (unreachable, refused, authentication).
    #[error(transparent)]
    Driver(sqlx::Error),
}

/// One connection as the DSN's own user (migrations need the owner), within `timeout`.
pub async fn connect_owner(
    options: &PgConnectOptions,
    timeout: Duration,
) -> Result<PgConnection, ConnectError> {
    match tokio::time::timeout(timeout, PgConnection::connect_with(options)).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(error)) => Err(ConnectError::Driver(error)),
        Err(_) => Err(ConnectError::Timeout),
    }
}
