//! The single-server backend: a bb8 pool of multiplexed connections.
//!
//! A multiplexed connection carries any number of commands at once, and its driver writes
//! every command queued since its last turn in one write. So a command takes a clone of an
//! idle connection and hands the connection straight back to the pool: concurrent commands
//! share one socket and leave together, and Redis reads them in one read and answers them in
//! one write. The pool dials another connection only when it has none (at the start, or when
//! one broke).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisError};

use super::StoreError;

/// Dials one server with the pool's connection settings (`TCP_NODELAY`, timeouts).
pub(super) struct Manager {
    pub(super) client: redis::Client,
    pub(super) config: AsyncConnectionConfig,
}

/// A multiplexed connection; clones share its socket and whether it broke.
#[derive(Clone)]
pub(super) struct Connection {
    pub(super) inner: MultiplexedConnection,
    broken: Arc<AtomicBool>,
}

impl Connection {
    pub(super) fn new(inner: MultiplexedConnection) -> Connection {
        Connection {
            inner,
            broken: Arc::default(),
        }
    }

    /// Whether a command on this connection found its socket gone.
    pub(super) fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Relaxed)
    }

    /// Flags the connection when the error means its socket is gone, so the pool replaces it
    /// the next time it is handed back.
    pub(super) fn check<T>(
        &self,
        result: Result<T, RedisError>,
        context: &'static str,
    ) -> Result<T, StoreError> {
        result.map_err(|e| {
            if e.is_unrecoverable_error() {
                self.broken.store(true, Ordering::Relaxed);
            }
            StoreError::with_source(context, e)
        })
    }
}

impl bb8::ManageConnection for Manager {
    type Connection = Connection;
    type Error = RedisError;

    async fn connect(&self) -> Result<Connection, RedisError> {
        let inner = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        Ok(Connection::new(inner))
    }

    async fn is_valid(&self, conn: &mut Connection) -> Result<(), RedisError> {
        redis::cmd("PING").query_async::<()>(&mut conn.inner).await
    }

    fn has_broken(&self, conn: &mut Connection) -> bool {
        conn.is_broken()
    }
}
