//! The PostgreSQL mode's Redis keys: all under a fresh random prefix, deleted afterwards. The
//! server must be on this machine: the harness loads only loopback.

use std::net::IpAddr;

use url::{Host, Url};
use uuid::Uuid;

use super::LoadError;
use super::postgres::{CONNECT_TIMEOUT, NAME_PREFIX};

/// One SCAN step while deleting the run's keys.
const SCAN_COUNT: usize = 1000;

/// The run's Redis keys: checked reachable before the run, deleted after it.
#[derive(Clone)]
pub struct RedisKeys {
    client: redis::Client,
    prefix: String,
}

impl std::fmt::Debug for RedisKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The client's connection info may carry a password.
        f.debug_struct("RedisKeys")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisKeys {
    /// Checks that `url` is on this machine and answers PING; keys will start with a fresh
    /// random prefix.
    pub async fn open(url: &str) -> Result<RedisKeys, LoadError> {
        refuse_remote_redis(url)?;
        let client = redis::Client::open(url)
            .map_err(|_| LoadError::NotLocal("REDIS_URL: not a Redis URL".to_owned()))?;
        let keys = RedisKeys {
            client,
            prefix: format!("{NAME_PREFIX}{}:", Uuid::new_v4().simple()),
        };
        let mut conn = keys.connection().await?;
        redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .map_err(LoadError::redis)?;
        Ok(keys)
    }

    /// The prefix the gateway puts before every key.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Deletes every key under the prefix; returns how many there were.
    pub async fn delete_all(&self) -> Result<usize, LoadError> {
        let mut conn = self.connection().await?;
        let pattern = format!("{}*", self.prefix);
        let mut cursor: u64 = 0;
        let mut deleted = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(SCAN_COUNT)
                .query_async(&mut conn)
                .await
                .map_err(LoadError::redis)?;
            if !keys.is_empty() {
                deleted += redis::cmd("DEL")
                    .arg(&keys)
                    .query_async::<usize>(&mut conn)
                    .await
                    .map_err(LoadError::redis)?;
            }
            if next == 0 {
                return Ok(deleted);
            }
            cursor = next;
        }
    }

    async fn connection(&self) -> Result<redis::aio::MultiplexedConnection, LoadError> {
        tokio::time::timeout(
            CONNECT_TIMEOUT,
            self.client.get_multiplexed_async_connection(),
        )
        .await
        .map_err(|_| LoadError::Redis("connecting timed out".to_owned()))?
        .map_err(LoadError::redis)
    }
}

/// Refuses a Redis host that is not loopback (unix sockets are local by nature).
fn refuse_remote_redis(url: &str) -> Result<(), LoadError> {
    let not_local = |what: String| LoadError::NotLocal(format!("REDIS_URL: {what}"));
    let parsed = Url::parse(url).map_err(|_| not_local("not a Redis URL".to_owned()))?;
    if matches!(parsed.scheme(), "unix" | "redis+unix") {
        return Ok(());
    }
    let local = match parsed.host() {
        // `redis:` is not a special scheme to the URL standard: an IPv4 host stays a name.
        Some(Host::Domain(name)) => {
            name.eq_ignore_ascii_case("localhost")
                || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
        }
        Some(Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => false,
    };
    if local {
        Ok(())
    } else {
        Err(not_local(format!(
            "host {:?} is not on this machine (use localhost, 127.0.0.1 or ::1)",
            parsed.host_str().unwrap_or_default()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_redis_is_loaded() {
        for url in [
            "redis://127.0.0.1:6379",
            "redis://localhost",
            "redis://[::1]:6380/2",
            "redis://:pw@127.0.0.2:6379",
            "unix:///run/redis.sock",
        ] {
            assert!(refuse_remote_redis(url).is_ok(), "{url}");
        }
        for url in [
            "redis://10.0.0.5:6379",
            "redis://cache.example.com",
            "rediss://:secret@192.168.1.2",
            "not a url",
        ] {
            let error = refuse_remote_redis(url).expect_err(url).to_string();
            assert!(error.starts_with("REDIS_URL: "), "{error}");
            assert!(!error.contains("secret"), "{error}");
        }
    }
}
