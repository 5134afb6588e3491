//! The single-server backend: a bb8 pool of multiplexed connections.

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisError};

use super::StoreError;

/// Dials one server with the pool's connection settings (`TCP_NODELAY`, timeouts).
pub(super) struct Manager {
    pub(super) client: redis::Client,
    pub(super) config: AsyncConnectionConfig,
}

pub(super) struct Connection {
    pub(super) inner: MultiplexedConnection,
    broken: bool,
}

impl Connection {
    pub(super) fn new(inner: MultiplexedConnection) -> Connection {
        Connection {
            inner,
            broken: false,
        }
    }

    /// Flags the connection when the error means its socket is gone, so the pool replaces it.
    pub(super) fn check<T>(
        &mut self,
        result: Result<T, RedisError>,
        context: &'static str,
    ) -> Result<T, StoreError> {
        result.map_err(|e| {
            if e.is_unrecoverable_error() {
                self.broken = true;
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
        conn.broken
    }
}
