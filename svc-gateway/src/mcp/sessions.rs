//! MCP sessions the gateway owns: the id a server hands out (`Mcp-Session-Id`) never reaches
//! the client. The client gets an id the gateway mints, stored under its org with the server
//! and the server's id, in Redis (shared by every replica) or, without Redis, in this process.
//! Each use renews the session's idle time to live.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use svc_tower::store::{RedisPool, StoreError};
use tokio::time::Instant;
use uuid::Uuid;

/// How long an unused session is kept.
pub const SESSION_IDLE_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// What a gateway session id stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpSession {
    /// The registry name of the server that opened it.
    pub server: String,
    /// The server's own session id.
    pub upstream: String,
}

impl McpSession {
    fn encode(&self) -> String {
        format!("{}\n{}", self.server, self.upstream)
    }

    fn decode(stored: &str) -> Option<McpSession> {
        let (server, upstream) = stored.split_once('\n')?;
        Some(McpSession {
            server: server.to_owned(),
            upstream: upstream.to_owned(),
        })
    }
}

/// Sessions kept in this process: by org and gateway id, with when each expires.
type LocalSessions = Arc<Mutex<HashMap<(Uuid, String), (McpSession, Instant)>>>;

/// Where sessions live.
#[derive(Clone)]
pub enum SessionMap {
    /// Shared by every replica, under `{prefix}mcp:{org}:{id}`.
    Redis {
        /// The gateway's pool.
        pool: RedisPool,
        /// `SVC_REDIS_KEY_PREFIX`.
        prefix: String,
    },
    /// This process only (dev mode, or no `REDIS_URL`).
    Memory(LocalSessions),
}

impl std::fmt::Debug for SessionMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionMap::Redis { prefix, .. } => {
                f.debug_struct("Redis").field("prefix", prefix).finish()
            }
            SessionMap::Memory(_) => f.write_str("Memory"),
        }
    }
}

impl SessionMap {
    /// Sessions in this process.
    pub fn memory() -> SessionMap {
        SessionMap::Memory(Arc::default())
    }

    fn key(prefix: &str, org: Uuid, id: &str) -> String {
        format!("{prefix}mcp:{org}:{id}")
    }

    /// A fresh gateway id for `session` in `org`.
    pub async fn open(&self, org: Uuid, session: &McpSession) -> Result<String, StoreError> {
        let id = svc_core::id::uuid_v4().simple().to_string();
        match self {
            SessionMap::Redis { pool, prefix } => {
                let key = SessionMap::key(prefix, org, &id);
                pool.set_with_ttl(&key, &session.encode(), SESSION_IDLE_TTL)
                    .await?;
            }
            SessionMap::Memory(map) => {
                let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
                let now = Instant::now();
                map.retain(|_, (_, until)| *until > now);
                map.insert((org, id.clone()), (session.clone(), now + SESSION_IDLE_TTL));
            }
        }
        Ok(id)
    }

    /// The session `id` of `org`, its time to live renewed; `None` for an unknown id or
    /// another org's.
    pub async fn find(&self, org: Uuid, id: &str) -> Result<Option<McpSession>, StoreError> {
        match self {
            SessionMap::Redis { pool, prefix } => {
                let key = SessionMap::key(prefix, org, id);
                let stored = pool.get_renewed(&key, SESSION_IDLE_TTL).await?;
                Ok(stored.as_deref().and_then(McpSession::decode))
            }
            SessionMap::Memory(map) => {
                let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
                let now = Instant::now();
                match map.get_mut(&(org, id.to_owned())) {
                    Some((session, until)) if *until > now => {
                        *until = now + SESSION_IDLE_TTL;
                        Ok(Some(session.clone()))
                    }
                    _ => Ok(None),
                }
            }
        }
    }

    /// Forgets the session `id` of `org`.
    pub async fn close(&self, org: Uuid, id: &str) -> Result<(), StoreError> {
        match self {
            SessionMap::Redis { pool, prefix } => {
                pool.delete(&SessionMap::key(prefix, org, id)).await
            }
            SessionMap::Memory(map) => {
                let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
                map.remove(&(org, id.to_owned()));
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> McpSession {
        McpSession {
            server: "srv".to_owned(),
            upstream: "abc123".to_owned(),
        }
    }

    async fn keeps_sessions_per_org(map: SessionMap) {
        let org = Uuid::new_v4();
        let id = map.open(org, &session()).await.unwrap();
        assert_eq!(map.find(org, &id).await.unwrap(), Some(session()));
        assert_eq!(map.find(Uuid::new_v4(), &id).await.unwrap(), None);
        assert_eq!(map.find(org, "unknown").await.unwrap(), None);
        map.close(org, &id).await.unwrap();
        assert_eq!(map.find(org, &id).await.unwrap(), None);
    }

    #[tokio::test]
    async fn memory_sessions_belong_to_their_org() {
        keeps_sessions_per_org(SessionMap::memory()).await;
    }

    #[tokio::test]
    async fn redis_sessions_belong_to_their_org() {
        let pool = RedisPool::new(&svc_testkit::redis_url()).unwrap();
        keeps_sessions_per_org(SessionMap::Redis {
            pool,
            prefix: svc_testkit::redis_prefix(),
        })
        .await;
    }
}
