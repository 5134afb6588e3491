use std::fmt;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::io::tcp::TcpSettings;
use redis::{AsyncConnectionConfig, FromRedisValue, RedisError, ScriptInvocation};

use super::StoreError;

/// A pool of Redis connections, shared by every Redis store of a process.
///
/// Build one from `REDIS_URL` and hand clones to
/// [`RedisRateLimitStore`](crate::rate_limit::RedisRateLimitStore) and
/// [`RedisIdempotencyStore`](crate::idempotency::RedisIdempotencyStore). Building never
/// connects: the pool dials lazily, so a gateway starts (and fails open) while Redis is down,
/// and recovers by itself when Redis returns. Every socket sets `TCP_NODELAY`.
///
/// ```no_run
/// # async fn demo() -> Result<(), svc_tower::store::StoreError> {
/// use svc_tower::store::RedisPool;
///
/// let pool = RedisPool::new("redis://127.0.0.1:6379")?;
/// pool.ping().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisPool {
    pool: bb8::Pool<Manager>,
}

impl fmt::Debug for RedisPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may hold a password: never print it.
        let state = self.pool.state();
        f.debug_struct("RedisPool")
            .field("connections", &state.connections)
            .field("idle_connections", &state.idle_connections)
            .finish()
    }
}

/// Settings of a [`RedisPool`].
#[derive(Clone)]
pub struct RedisPoolBuilder {
    url: String,
    max_size: u32,
    connect_timeout: Duration,
    response_timeout: Duration,
}

impl fmt::Debug for RedisPoolBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisPoolBuilder")
            .field("url", &"<omitted>")
            .field("max_size", &self.max_size)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .finish()
    }
}

impl RedisPoolBuilder {
    /// Connections kept open (default 4). Each is multiplexed, so a few carry any load.
    pub fn max_size(mut self, max_size: u32) -> RedisPoolBuilder {
        self.max_size = max_size.max(1);
        self
    }

    /// How long dialing one connection may take (default 1 s). The layers' own, much shorter,
    /// budgets bound what a request waits; this bounds the background dial.
    pub fn connect_timeout(mut self, timeout: Duration) -> RedisPoolBuilder {
        self.connect_timeout = timeout;
        self
    }

    /// How long one command may wait for its reply before it fails (default 1 s).
    pub fn response_timeout(mut self, timeout: Duration) -> RedisPoolBuilder {
        self.response_timeout = timeout;
        self
    }

    /// Builds the pool without connecting. Fails on a malformed URL, or when called outside
    /// a Tokio runtime (the pool keeps its connections with a background task).
    pub fn build(self) -> Result<RedisPool, StoreError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(StoreError::new(
                "a Redis pool must be built inside a Tokio runtime",
            ));
        }
        let client = redis::Client::open(self.url.as_str())
            .map_err(|e| StoreError::with_source("invalid Redis URL", e))?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(self.connect_timeout)
            .set_response_timeout(self.response_timeout)
            .set_tcp_settings(TcpSettings::default().set_nodelay(true));
        let manager = Manager { client, config };
        let pool = bb8::Pool::builder()
            .max_size(self.max_size)
            .min_idle(Some(1))
            .connection_timeout(self.connect_timeout)
            // A PING before every checkout would double the round trips; broken connections
            // are flagged when a command fails instead.
            .test_on_check_out(false)
            .build_unchecked(manager);
        Ok(RedisPool { pool })
    }
}

impl RedisPool {
    /// A pool with the default settings.
    pub fn new(url: &str) -> Result<RedisPool, StoreError> {
        RedisPool::builder(url).build()
    }

    /// A builder for a pool connecting to `url` (`redis://[:password@]host:port[/db]`).
    pub fn builder(url: &str) -> RedisPoolBuilder {
        RedisPoolBuilder {
            url: url.to_owned(),
            max_size: 4,
            connect_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(1),
        }
    }

    /// `PING` over one pooled connection: the readiness check.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let reply: String = self.query(&redis::cmd("PING")).await?;
        if reply == "PONG" {
            Ok(())
        } else {
            Err(StoreError::new("unexpected PING reply"))
        }
    }

    /// Runs a script (EVALSHA, falling back to loading it once) on a pooled connection.
    pub(crate) async fn invoke<T: FromRedisValue>(
        &self,
        invocation: &ScriptInvocation<'_>,
    ) -> Result<T, StoreError> {
        let mut conn = self.get().await?;
        let result = invocation.invoke_async(&mut conn.inner).await;
        conn.check(result, "Redis script failed")
    }

    /// Runs one command on a pooled connection.
    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, StoreError> {
        let mut conn = self.get().await?;
        let result = cmd.query_async(&mut conn.inner).await;
        conn.check(result, "Redis command failed")
    }

    async fn get(&self) -> Result<bb8::PooledConnection<'_, Manager>, StoreError> {
        self.pool.get().await.map_err(|e| match e {
            bb8::RunError::User(e) => StoreError::with_source("Redis connection failed", e),
            bb8::RunError::TimedOut => StoreError::new("timed out waiting for a Redis connection"),
        })
    }
}

struct Manager {
    client: redis::Client,
    config: AsyncConnectionConfig,
}

struct Connection {
    inner: MultiplexedConnection,
    broken: bool,
}

impl Connection {
    /// Flags the connection when the error means its socket is gone, so the pool replaces it.
    fn check<T>(
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
        Ok(Connection {
            inner,
            broken: false,
        })
    }

    async fn is_valid(&self, conn: &mut Connection) -> Result<(), RedisError> {
        redis::cmd("PING").query_async::<()>(&mut conn.inner).await
    }

    fn has_broken(&self, conn: &mut Connection) -> bool {
        conn.broken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_a_runtime_building_fails_instead_of_panicking() {
        let error = RedisPool::new("redis://127.0.0.1:6379").unwrap_err();
        assert!(error.to_string().contains("Tokio runtime"));
    }

    #[tokio::test]
    async fn a_malformed_url_is_refused_without_echoing_it() {
        let error = RedisPool::new("redis://user:hunter2@[::1").unwrap_err();
        assert!(!format!("{error} {error:?}").contains("hunter2"));
    }

    #[tokio::test]
    async fn ping_reaches_the_server() {
        let pool = RedisPool::new(&svc_testkit::redis_url()).unwrap();
        pool.ping().await.unwrap();
        assert!(!format!("{pool:?}").contains("redis://"));
    }

    #[tokio::test]
    async fn ping_fails_when_nothing_listens() {
        let url = format!("redis://127.0.0.1:{}", svc_testkit::free_port());
        let pool = RedisPool::builder(&url)
            .connect_timeout(Duration::from_millis(200))
            .build()
            .unwrap();
        assert!(pool.ping().await.is_err());
    }
}
