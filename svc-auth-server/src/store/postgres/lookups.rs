//! The connections of the hot path: the one-statement lookups every ValidateToken and
//! ValidateAgent runs, pooled by bb8 rather than sqlx's pool.
//!
//! sqlx's pool pings every connection it takes back, on a task of its own: one more round trip
//! to PostgreSQL and one more task for every lookup, which is most of what a lookup costs
//! beyond its statement. bb8 hands a connection back as it is. A lookup dropped half way (its
//! caller's deadline passed) leaves the connection mid-statement, and sqlx drains what is left
//! before the connection's next statement; a lookup that fails on the connection itself (I/O,
//! protocol) marks it broken, and bb8 drops it.
//!
//! Transactions (the admin calls) stay on sqlx's pool, which rolls back what a dropped caller
//! left open.

use std::time::Duration;

use sqlx::postgres::{PgArguments, PgConnectOptions, PgRow};
use sqlx::query::QueryAs;
use sqlx::{ConnectOptions, FromRow, PgConnection, Postgres};

use super::pool::PoolSettings;

/// A bb8 pool of connections, every one running as `role` unless the DSN's user is that role.
#[derive(Clone)]
pub(crate) struct Lookups {
    pool: bb8::Pool<Manager>,
    /// How long a statement may take before its connection is given up as broken.
    statement_timeout: Duration,
}

impl std::fmt::Debug for Lookups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lookups")
            .field("state", &self.pool.state())
            .finish()
    }
}

struct Manager {
    options: PgConnectOptions,
    set_role: Option<&'static str>,
}

struct Connection {
    conn: PgConnection,
    broken: bool,
}

impl bb8::ManageConnection for Manager {
    type Connection = Connection;
    type Error = sqlx::Error;

    async fn connect(&self) -> Result<Connection, sqlx::Error> {
        let mut conn = self.options.connect().await?;
        if let Some(role) = self.set_role {
            svc_runtime::postgres::set_role_on(&mut conn, role).await?;
        }
        Ok(Connection {
            conn,
            broken: false,
        })
    }

    async fn is_valid(&self, conn: &mut Connection) -> Result<(), sqlx::Error> {
        sqlx::Connection::ping(&mut conn.conn).await
    }

    fn has_broken(&self, conn: &mut Connection) -> bool {
        conn.broken
    }
}

impl Lookups {
    /// A lazily connecting pool of `max_connections` for `options`, as `role` (a fixed SQL
    /// identifier, never user input).
    pub(crate) fn new(
        options: PgConnectOptions,
        settings: &PoolSettings,
        role: &'static str,
    ) -> Lookups {
        let set_role = (options.get_username() != role).then_some(role);
        let pool = bb8::Pool::builder()
            .max_size(settings.max_connections)
            .connection_timeout(settings.acquire_timeout)
            // A connection is tried by its first statement; a failed one is dropped then.
            .test_on_check_out(false)
            .retry_connection(false)
            .build_unchecked(Manager { options, set_role });
        Lookups {
            pool,
            statement_timeout: settings.acquire_timeout,
        }
    }

    /// Runs `query` on a pooled connection: all its rows.
    pub(crate) async fn fetch_all<O>(
        &self,
        query: QueryAs<'_, Postgres, O, PgArguments>,
    ) -> Result<Vec<O>, sqlx::Error>
    where
        O: for<'r> FromRow<'r, PgRow> + Send + Unpin,
    {
        let mut conn = self.pool.get().await.map_err(|error| match error {
            bb8::RunError::User(error) => error,
            bb8::RunError::TimedOut => sqlx::Error::PoolTimedOut,
        })?;
        let result = self.bounded(query.fetch_all(&mut conn.conn)).await;
        conn.note(&result);
        result
    }

    /// `statement` within the statement timeout. A statement that outlasts it (a connection cut
    /// without a reset, say) fails as I/O, so its connection is dropped rather than handed to the
    /// next read, which would wait on it in turn.
    async fn bounded<T>(
        &self,
        statement: impl Future<Output = Result<T, sqlx::Error>>,
    ) -> Result<T, sqlx::Error> {
        tokio::time::timeout(self.statement_timeout, statement)
            .await
            .unwrap_or_else(|_| {
                Err(sqlx::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the validation lookup timed out",
                )))
            })
    }
}

impl Connection {
    /// Marks the connection broken when `result` failed on the connection itself.
    fn note<T>(&mut self, result: &Result<T, sqlx::Error>) {
        if let Err(error) = result {
            self.broken = matches!(
                error,
                sqlx::Error::Io(_)
                    | sqlx::Error::Protocol(_)
                    | sqlx::Error::Tls(_)
                    | sqlx::Error::WorkerCrashed
            );
        }
    }
}
