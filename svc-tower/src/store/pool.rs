use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt, Shared};
use redis::{ConnectionInfo, FromRedisValue, IntoConnectionInfo, RedisError, ScriptInvocation};

use super::StoreError;
use super::dial::{self, Backend, Settings};
use super::single::{Connection, Manager};

/// A pool of Redis connections, shared by every Redis store of a process.
///
/// Build one from `REDIS_URL` and hand clones to
/// [`RedisRateLimitStore`](crate::rate_limit::RedisRateLimitStore) and
/// [`RedisIdempotencyStore`](crate::idempotency::RedisIdempotencyStore). The URL names one
/// server, or one or several comma-separated nodes of a Redis Cluster: the first connect asks
/// `INFO cluster` and, on a cluster, routes every command by its key's slot, follows `MOVED`
/// redirections and picks up a promoted replica after a failover. Building never connects:
/// the pool dials in the background, so a gateway starts (and fails open) while Redis is down,
/// and recovers by itself when Redis returns. Every socket sets `TCP_NODELAY`.
///
/// ```no_run
/// # async fn demo() -> Result<(), svc_tower::store::StoreError> {
/// use svc_tower::store::RedisPool;
///
/// let single = RedisPool::new("redis://127.0.0.1:6379")?;
/// single.ping().await?;
/// let cluster = RedisPool::new("redis://10.0.0.1:6379,redis://10.0.0.2:6379")?;
/// cluster.ping().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisPool {
    state: Arc<State>,
}

/// One dial in flight, awaited by every request that needs the backend meanwhile.
type Dial = Shared<BoxFuture<'static, Result<(), Arc<StoreError>>>>;

struct State {
    nodes: Vec<ConnectionInfo>,
    settings: Settings,
    backend: OnceLock<Backend>,
    dial: Mutex<Option<Dial>>,
}

impl fmt::Debug for RedisPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may hold a password: never print it.
        let mut debug = f.debug_struct("RedisPool");
        debug.field("nodes", &self.state.nodes.len());
        match self.state.backend.get() {
            None => debug.field("mode", &"not connected yet"),
            Some(Backend::Cluster(_)) => debug.field("mode", &"cluster"),
            Some(Backend::Single(pool)) => {
                let state = pool.state();
                debug
                    .field("mode", &"single")
                    .field("connections", &state.connections)
                    .field("idle_connections", &state.idle_connections)
            }
        };
        debug.finish()
    }
}

/// Settings of a [`RedisPool`].
#[derive(Clone)]
pub struct RedisPoolBuilder {
    url: String,
    settings: Settings,
}

impl fmt::Debug for RedisPoolBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisPoolBuilder")
            .field("url", &"<omitted>")
            .field("settings", &self.settings)
            .finish()
    }
}

impl RedisPoolBuilder {
    /// Connections open to a single server at most (default 4). Each is multiplexed and
    /// commands share one until it breaks, so one carries the load. A cluster connection keeps
    /// one multiplexed socket per node instead.
    pub fn max_size(mut self, max_size: u32) -> RedisPoolBuilder {
        self.settings.max_size = max_size.max(1);
        self
    }

    /// How long dialing one connection may take (default 1 s). The layers' own, much shorter,
    /// budgets bound what a request waits; this bounds the background dial.
    pub fn connect_timeout(mut self, timeout: Duration) -> RedisPoolBuilder {
        self.settings.connect_timeout = timeout;
        self
    }

    /// How long one command may wait for its reply before it fails (default 1 s).
    pub fn response_timeout(mut self, timeout: Duration) -> RedisPoolBuilder {
        self.settings.response_timeout = timeout;
        self
    }

    /// Builds the pool and starts dialing in the background. Fails on a malformed or empty
    /// URL, or when called outside a Tokio runtime (the dial is a background task).
    pub fn build(self) -> Result<RedisPool, StoreError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(StoreError::new(
                "a Redis pool must be built inside a Tokio runtime",
            ));
        }
        let nodes = self
            .url
            .split(',')
            .map(str::trim)
            .filter(|url| !url.is_empty())
            .map(|url| {
                url.into_connection_info()
                    .map_err(|e| StoreError::with_source("invalid Redis URL", e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if nodes.is_empty() {
            return Err(StoreError::new("the Redis URL names no node"));
        }
        let pool = RedisPool {
            state: Arc::new(State {
                nodes,
                settings: self.settings,
                backend: OnceLock::new(),
                dial: Mutex::new(None),
            }),
        };
        // Dial now so the first request finds a connection; a failure only means the next
        // request dials again.
        drop(pool.state.dial());
        Ok(pool)
    }
}

impl RedisPool {
    /// A pool with the default settings.
    pub fn new(url: &str) -> Result<RedisPool, StoreError> {
        RedisPool::builder(url).build()
    }

    /// A builder for a pool connecting to `url`: `redis://[:password@]host:port[/db]`, or
    /// several such URLs separated by commas for the nodes of one Redis Cluster.
    pub fn builder(url: &str) -> RedisPoolBuilder {
        RedisPoolBuilder {
            url: url.to_owned(),
            settings: Settings {
                max_size: 4,
                connect_timeout: Duration::from_secs(1),
                response_timeout: Duration::from_secs(1),
            },
        }
    }

    /// `PING` (on a cluster, every primary): the readiness check.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let reply: String = self.query(&redis::cmd("PING")).await?;
        if reply == "PONG" {
            Ok(())
        } else {
            Err(StoreError::new("unexpected PING reply"))
        }
    }

    /// `SET key value PX ttl`: a plain value for a caller's own records (the gateway's MCP
    /// sessions), under a key the caller prefixes.
    pub async fn set_with_ttl(
        &self,
        key: &str,
        value: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let millis = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        self.query::<()>(redis::cmd("SET").arg(key).arg(value).arg("PX").arg(millis))
            .await
    }

    /// `GETEX key PX ttl`: the value, its time to live renewed, or `None` when absent.
    pub async fn get_renewed(
        &self,
        key: &str,
        ttl: Duration,
    ) -> Result<Option<String>, StoreError> {
        let millis = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        self.query(redis::cmd("GETEX").arg(key).arg("PX").arg(millis))
            .await
    }

    /// `DEL key`; deleting an absent key is not an error.
    pub async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.query::<()>(redis::cmd("DEL").arg(key)).await
    }

    /// Runs a script (EVALSHA, falling back to loading it once). On a cluster it runs on the
    /// primary of its keys' slot, so every key of one invocation must share a hash tag.
    pub(crate) async fn invoke<T: FromRedisValue>(
        &self,
        invocation: &ScriptInvocation<'_>,
    ) -> Result<T, StoreError> {
        const CONTEXT: &str = "Redis script failed";
        match self.backend().await? {
            Backend::Single(pool) => {
                let mut conn = shared(pool).await?;
                let result = invocation.invoke_async(&mut conn.inner).await;
                conn.check(result, CONTEXT)
            }
            Backend::Cluster(cluster) => {
                cluster_result(invocation.invoke_async(&mut cluster.clone()).await, CONTEXT)
            }
        }
    }

    /// Runs one command (on a cluster, routed by its key, or fanned out when keyless).
    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, StoreError> {
        const CONTEXT: &str = "Redis command failed";
        match self.backend().await? {
            Backend::Single(pool) => {
                let mut conn = shared(pool).await?;
                let result = cmd.query_async(&mut conn.inner).await;
                conn.check(result, CONTEXT)
            }
            Backend::Cluster(cluster) => {
                cluster_result(cmd.query_async(&mut cluster.clone()).await, CONTEXT)
            }
        }
    }

    /// The backend, dialing (or joining the dial in flight) while there is none yet.
    async fn backend(&self) -> Result<&Backend, StoreError> {
        if let Some(backend) = self.state.backend.get() {
            return Ok(backend);
        }
        self.state
            .dial()
            .await
            .map_err(|e| StoreError::with_source("Redis unavailable", e))?;
        self.state
            .backend
            .get()
            .ok_or_else(|| StoreError::new("Redis unavailable"))
    }
}

impl State {
    /// The dial in flight, or a new one. It runs as its own task, so a request that gives up
    /// on its budget does not abandon it, and concurrent requests share one dial.
    fn dial(self: &Arc<State>) -> Dial {
        let mut slot = self.dial.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(dial) = slot.as_ref() {
            return dial.clone();
        }
        let state = Arc::clone(self);
        let task = tokio::spawn(async move {
            let result = match state.backend.get() {
                Some(_) => Ok(()),
                None => dial::connect(&state.nodes, &state.settings)
                    .await
                    .map(|backend| {
                        // Only this task sets it: dials never overlap.
                        let _ = state.backend.set(backend);
                    }),
            };
            *state.dial.lock().unwrap_or_else(PoisonError::into_inner) = None;
            result
        });
        let dial = async move {
            task.await
                .unwrap_or_else(|_| Err(Arc::new(StoreError::new("the Redis dial panicked"))))
        }
        .boxed()
        .shared();
        *slot = Some(dial.clone());
        dial
    }
}

/// A clone of a connection that has not broken; the pool has it back at once (see
/// [`single`](super::single)). A broken one handed back is dropped, and the pool dials anew.
async fn shared(pool: &bb8::Pool<Manager>) -> Result<Connection, StoreError> {
    loop {
        let conn = pool.get().await.map_err(|e| match e {
            bb8::RunError::User(e) => StoreError::with_source("Redis connection failed", e),
            bb8::RunError::TimedOut => StoreError::new("timed out waiting for a Redis connection"),
        })?;
        if !conn.is_broken() {
            return Ok(conn.clone());
        }
    }
}

/// A cluster connection reconnects and re-reads the slot map by itself: nothing to retire.
fn cluster_result<T>(
    result: Result<T, RedisError>,
    context: &'static str,
) -> Result<T, StoreError> {
    result.map_err(|e| StoreError::with_source(context, e))
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
        let error = RedisPool::new("redis://127.0.0.1:1,redis://user:hunter2@[::1").unwrap_err();
        assert!(!format!("{error} {error:?}").contains("hunter2"));
        assert!(RedisPool::new(" , ").is_err());
    }

    #[tokio::test]
    async fn ping_reaches_the_server() {
        let pool = RedisPool::new(&svc_testkit::redis_url()).unwrap();
        pool.ping().await.unwrap();
        let debug = format!("{pool:?}");
        assert!(!debug.contains("redis://"));
        assert!(debug.contains("single"), "{debug}");
    }

    #[tokio::test]
    async fn concurrent_commands_share_one_connection() {
        let pool = RedisPool::builder(&svc_testkit::redis_url())
            .max_size(16)
            .build()
            .unwrap();
        pool.ping().await.unwrap();
        let pings = (0..64).map(|_| pool.ping());
        for result in futures_util::future::join_all(pings).await {
            result.unwrap();
        }
        // Held for the length of each command, connections would have been dialed up to the
        // most allowed. The dial's own and the pool's first are all there are.
        let Some(Backend::Single(single)) = pool.state.backend.get() else {
            panic!("a single server");
        };
        let connections = single.state().connections;
        assert!(connections <= 2, "{connections} connections");
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

    #[tokio::test]
    async fn several_urls_for_one_server_are_refused_at_connect() {
        let url = svc_testkit::redis_url();
        let pool = RedisPool::new(&format!("{url},{url}")).unwrap();
        let error = pool.ping().await.unwrap_err();
        assert!(error.to_string().contains("not a cluster"), "{error}");
    }
}
