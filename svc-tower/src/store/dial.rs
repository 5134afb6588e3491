//! The first connect: which kind of Redis `REDIS_URL` names, and the backend for it.

use std::sync::Arc;
use std::time::Duration;

use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::io::tcp::TcpSettings;
use redis::{AsyncConnectionConfig, ConnectionInfo};

use super::StoreError;
use super::single::{Connection, Manager};

/// What a [`RedisPool`](super::RedisPool) talks to, decided at its first connect.
pub(super) enum Backend {
    /// One server (or a primary whose replicas only follow it): a pool of multiplexed
    /// connections.
    Single(bb8::Pool<Manager>),
    /// A Redis Cluster: one connection per node, routed by key slot, following `MOVED` and
    /// failovers by itself. Cloning it is cheap and every clone shares the nodes' sockets.
    Cluster(ClusterConnection),
}

/// The settings a backend is built with.
#[derive(Debug, Clone)]
pub(super) struct Settings {
    pub(super) max_size: u32,
    pub(super) connect_timeout: Duration,
    pub(super) response_timeout: Duration,
}

impl Settings {
    fn tcp(&self) -> TcpSettings {
        TcpSettings::default().set_nodelay(true)
    }

    fn connection_config(&self) -> AsyncConnectionConfig {
        AsyncConnectionConfig::new()
            .set_connection_timeout(self.connect_timeout)
            .set_response_timeout(self.response_timeout)
            .set_tcp_settings(self.tcp())
    }
}

/// Dials the nodes in order until one answers, asks it `INFO cluster`, and builds the backend
/// that fits: a cluster connection seeded with every node, or a pool on the single server.
pub(super) async fn connect(
    nodes: &[ConnectionInfo],
    settings: &Settings,
) -> Result<Backend, Arc<StoreError>> {
    let config = settings.connection_config();
    let mut last_error = None;
    for node in nodes {
        let client = redis::Client::open(node.clone())
            .map_err(|e| StoreError::with_source("invalid Redis URL", e))?;
        let mut conn = match client
            .get_multiplexed_async_connection_with_config(&config)
            .await
        {
            Ok(conn) => conn,
            Err(e) => {
                last_error = Some(e);
                continue;
            }
        };
        let info: String = redis::cmd("INFO")
            .arg("cluster")
            .query_async(&mut conn)
            .await
            .map_err(|e| StoreError::with_source("INFO cluster failed", e))?;
        if cluster_enabled(&info) {
            return cluster(nodes, settings).await;
        }
        if nodes.len() > 1 {
            return Err(Arc::new(StoreError::new(
                "REDIS_URL names several nodes, but Redis is not a cluster",
            )));
        }
        return Ok(Backend::Single(single(client, config, settings, conn)));
    }
    Err(Arc::new(match last_error {
        Some(e) => StoreError::with_source("no Redis node answered", e),
        None => StoreError::new("no Redis node to dial"),
    }))
}

/// Whether an `INFO cluster` reply says the server runs in cluster mode.
fn cluster_enabled(info: &str) -> bool {
    info.lines().any(|line| line.trim() == "cluster_enabled:1")
}

async fn cluster(
    nodes: &[ConnectionInfo],
    settings: &Settings,
) -> Result<Backend, Arc<StoreError>> {
    let client = ClusterClientBuilder::new(nodes.iter().cloned())
        .connection_timeout(settings.connect_timeout)
        .response_timeout(settings.response_timeout)
        .tcp_settings(settings.tcp())
        .build()
        .map_err(|e| StoreError::with_source("invalid Redis Cluster settings", e))?;
    let conn = client
        .get_async_connection()
        .await
        .map_err(|e| StoreError::with_source("Redis Cluster connect failed", e))?;
    Ok(Backend::Cluster(conn))
}

fn single(
    client: redis::Client,
    config: AsyncConnectionConfig,
    settings: &Settings,
    first: redis::aio::MultiplexedConnection,
) -> bb8::Pool<Manager> {
    let pool = bb8::Pool::builder()
        .max_size(settings.max_size)
        .min_idle(Some(1))
        .connection_timeout(settings.connect_timeout)
        // A PING before every checkout would double the round trips; broken connections
        // are flagged when a command fails instead.
        .test_on_check_out(false)
        .build_unchecked(Manager { client, config });
    // The connection that answered INFO serves as the pool's first; a full pool drops it.
    let _ = pool.add(Connection::new(first));
    pool
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_enabled_cluster_counts() {
        assert!(cluster_enabled("# Cluster\r\ncluster_enabled:1\r\n"));
        assert!(!cluster_enabled("# Cluster\r\ncluster_enabled:0\r\n"));
        assert!(!cluster_enabled(""));
    }
}
