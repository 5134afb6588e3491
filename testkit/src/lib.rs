//! Test support shared by the workspace's integration tests.
//!
//! Every test owns its data: [`TestDb`] is a fresh PostgreSQL database dropped afterwards,
//! [`redis_prefix`] a random key prefix. The servers come from `SVC_TEST_POSTGRES_URL` and
//! `SVC_TEST_REDIS_URL` (the test script sets them when it starts its own), else this
//! machine's defaults on 127.0.0.1.
//!
//! [`RedisCluster`] starts a real Redis Cluster on loopback for the tests that need one.
//!
//! With the `fake-auth` feature, the `fake_auth` module serves a scripted `svc.auth.v1.AuthService` on
//! loopback for tests of its clients; with `sentry-sink`, `sentry_sink` records the error reports
//! a service sends.

#[cfg(feature = "fake-auth")]
pub mod fake_auth;
pub mod redis_cluster;
#[cfg(feature = "sentry-sink")]
pub mod sentry_sink;

pub use redis_cluster::RedisCluster;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::Connection;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The maintenance-database URL of the test PostgreSQL server.
pub fn postgres_admin_url() -> String {
    std::env::var("SVC_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// The URL of the test Redis server.
pub fn redis_url() -> String {
    std::env::var("SVC_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// A random Redis key prefix, so tests sharing one server never see each other's keys.
pub fn redis_prefix() -> String {
    format!("svctest:{}:", uuid::Uuid::new_v4().simple())
}

/// A fresh, empty PostgreSQL database, dropped (forcibly) when this value is dropped.
#[derive(Debug)]
pub struct TestDb {
    name: String,
    url: String,
}

impl TestDb {
    /// Creates a database with a random name.
    pub async fn create() -> TestDb {
        let admin = postgres_admin_url();
        let name = format!("svc_test_{}", uuid::Uuid::new_v4().simple());
        let mut conn = sqlx::PgConnection::connect(&admin)
            .await
            .unwrap_or_else(|e| panic!("test PostgreSQL unreachable: {e}"));
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut conn)
            .await
            .expect("create test database");
        let _ = conn.close().await;
        let url = replace_database(&admin, &name);
        TestDb { name, url }
    }

    /// The owner (superuser) URL of this database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let admin = postgres_admin_url();
        let name = self.name.clone();
        // Drop may run inside or outside a runtime; a thread with its own runtime works in both.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                if let Ok(mut conn) = sqlx::PgConnection::connect(&admin).await {
                    let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .execute(&mut conn)
                        .await;
                    let _ = conn.close().await;
                }
            });
        })
        .join();
    }
}

/// `url` with its database path replaced by `db`.
pub fn replace_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let host_end = base[scheme_end..]
        .find('/')
        .map(|i| scheme_end + i)
        .unwrap_or(base.len());
    let mut out = format!("{}/{}", &base[..host_end], db);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

/// Polls `check` until it returns true or `within` passes; returns whether it became true.
pub async fn eventually<F, Fut>(within: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    try_free_port().expect("bind an ephemeral port")
}

/// [`free_port`], for a caller that reports the failure instead of panicking (the harness).
pub fn try_free_port() -> std::io::Result<u16> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
}

/// A loopback TCP proxy a test can cut and restore, to make a dependency unreachable without
/// touching the shared server behind it.
#[derive(Debug, Clone)]
pub struct FaultProxy {
    addr: SocketAddr,
    blocked: Arc<AtomicBool>,
    cut: watch::Sender<u64>,
}

impl FaultProxy {
    /// Starts a proxy on 127.0.0.1 forwarding to `target`.
    pub async fn start(target: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let blocked = Arc::new(AtomicBool::new(false));
        let (cut, _) = watch::channel(0u64);
        let proxy = FaultProxy {
            addr,
            blocked: blocked.clone(),
            cut: cut.clone(),
        };
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if blocked.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let mut cut_rx = cut.subscribe();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    let _ = inbound.set_nodelay(true);
                    let _ = outbound.set_nodelay(true);
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut_rx.changed() => {}
                    }
                });
            }
        });
        proxy
    }

    /// The address clients should use instead of the target's.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Drops every open connection and refuses new ones until [`FaultProxy::restore`].
    pub fn cut(&self) {
        self.blocked.store(true, Ordering::SeqCst);
        self.cut.send_modify(|n| *n += 1);
    }

    /// A proxy in front of the PostgreSQL server of `dsn`, and the DSN that goes through it.
    pub async fn for_postgres(dsn: &str) -> (FaultProxy, String) {
        let mut url = url::Url::parse(dsn).expect("a PostgreSQL URL");
        let host = url.host_str().unwrap_or("127.0.0.1").to_owned();
        let port = url.port().unwrap_or(5432);
        let target = tokio::net::lookup_host((host.as_str(), port))
            .await
            .expect("the database host resolves")
            .next()
            .expect("an address");
        let proxy = FaultProxy::start(target).await;
        url.set_host(Some("127.0.0.1")).expect("a host");
        url.set_port(Some(proxy.addr().port())).expect("a port");
        (proxy, url.to_string())
    }

    /// Forwards new connections again.
    pub fn restore(&self) {
        self.blocked.store(false, Ordering::SeqCst);
    }
}

/// The path of a test certificate or key (`ca.pem`, `server.pem`, `server.key`, `client.pem`,
/// `client.key`): a CA and the certificates it signed, the server's for `localhost` and
/// `127.0.0.1` (svc-auth-server's `tests/fixtures/tls`, see the README there).
pub fn tls_fixture(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../svc-auth-server/tests/fixtures/tls")
        .join(name);
    path.to_str().expect("a UTF-8 fixture path").to_owned()
}

/// A fresh directory under the system temp dir, removed with its contents on drop.
#[derive(Debug)]
pub struct TempDir {
    path: std::path::PathBuf,
}

impl TempDir {
    /// Creates an empty directory with a random name.
    pub fn create() -> TempDir {
        let path = std::env::temp_dir().join(format!("svc-test-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&path).expect("create a temp dir");
        TempDir { path }
    }

    /// Its path.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_database_path() {
        assert_eq!(
            replace_database("postgres://postgres@127.0.0.1:5432/postgres", "x"),
            "postgres://postgres@127.0.0.1:5432/x"
        );
        assert_eq!(
            replace_database("postgres://u@h:1/db?sslmode=disable", "x"),
            "postgres://u@h:1/x?sslmode=disable"
        );
        assert_eq!(
            replace_database("postgres://u@h:1", "x"),
            "postgres://u@h:1/x"
        );
    }
}
