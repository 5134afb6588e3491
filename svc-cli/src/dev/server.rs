//! Starting the whole dev stack in this process: the SQLite store, the auth plane on a loopback
//! gRPC port, and the gateway in front of it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::future::BoxFuture;
use svc_auth_server::metrics::AuthMetrics;
use svc_auth_server::server::{RunningServer, StartError as AuthStartError};
use svc_auth_server::store::{SqliteStore, Store, StoreError};
use svc_auth_server::verify::{HashError, Hasher};
use svc_runtime::health::{Checker, Readiness};
use svc_tower::rate_limit::{MemoryRateLimitStore, MemoryTokenBudgetStore};

use super::config::DevConfig;
use super::identity::{self, DevIdentity, IdentityError};
use svc_gateway::ledger::{LedgerSink, SinkError, UsageRecord};
use svc_gateway::readiness::AuthGrpcChecker;
use svc_gateway::{Gateway, Running, StartError};

/// Why the dev stack did not start.
#[derive(Debug, thiserror::Error)]
pub enum DevStartError {
    /// The data directory could not be created.
    #[error("{path}: cannot create the data directory")]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The embedded store could not be opened.
    #[error("{path}: cannot open the embedded identity store")]
    Store {
        /// The database file.
        path: PathBuf,
        /// Why.
        #[source]
        source: StoreError,
    },
    /// The hasher could not be built.
    #[error(transparent)]
    Hasher(#[from] HashError),
    /// The dev identity could not be prepared.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// The auth plane did not start.
    #[error("the embedded auth service did not start")]
    Auth(#[source] AuthStartError),
    /// The gateway did not start.
    #[error(transparent)]
    Gateway(#[from] StartError),
}

/// The running dev stack.
#[derive(Debug)]
pub struct DevServer {
    /// Where the gateway serves HTTP.
    pub http_addr: SocketAddr,
    /// Where the auth plane serves gRPC.
    pub grpc_addr: SocketAddr,
    /// The dev org, agent and tokens.
    pub identity: DevIdentity,
    /// The model the printed examples use.
    pub model: String,
    /// The identity database file.
    pub database: PathBuf,
    gateway: Running,
    auth: RunningServer,
    store: SqliteStore,
}

impl DevServer {
    /// Opens (or creates) the data directory and its store, prepares the identity, and starts
    /// the auth plane and the gateway.
    pub async fn start(mut config: DevConfig) -> Result<DevServer, DevStartError> {
        create_data_dir(&config.data_dir)?;
        let database = config.database_path();
        let metrics = AuthMetrics::new();
        let store = SqliteStore::open(&database)
            .await
            .map_err(|source| DevStartError::Store {
                path: database.clone(),
                source,
            })?
            .with_query_histogram(metrics.db_query_duration.clone());

        let mut auth_config = svc_auth_server::Config::local("");
        auth_config.grpc_addr = config.grpc_addr;
        let hasher = Hasher::new(auth_config.argon2, auth_config.hash_concurrency)?;
        let identity = identity::prepare(&store, &hasher, &config.state_path()).await?;

        let auth = svc_auth_server::Server::start_with_store(auth_config, store.clone(), metrics)
            .await
            .map_err(DevStartError::Auth)?;
        config.connect_to(auth.grpc_addr);

        let model = config
            .gateway
            .provider
            .models
            .first()
            .cloned()
            .unwrap_or_else(|| svc_gateway::config::DEFAULT_MOCK_MODEL.to_owned());
        let gateway = match start_gateway(config, store.clone()).await {
            Ok(gateway) => gateway,
            Err(error) => {
                let _ = auth.shutdown().await;
                return Err(error.into());
            }
        };
        Ok(DevServer {
            http_addr: gateway.addr(),
            grpc_addr: auth.grpc_addr,
            identity,
            model,
            database,
            gateway,
            auth,
            store,
        })
    }

    /// Stops the gateway, then the auth plane, then closes the store (checkpointing its WAL).
    pub async fn shutdown(self) {
        self.gateway.shutdown().await;
        if let Err(error) = self.auth.shutdown().await {
            tracing::warn!(error = %error, "embedded auth service stopped with an error");
        }
        self.store.close().await;
    }
}

/// The gateway over the embedded auth plane, with dev mode's readiness (see the module docs).
async fn start_gateway(config: DevConfig, store: SqliteStore) -> Result<Running, StartError> {
    let channel = svc_gateway::auth::channel(&config.gateway.auth)?;
    let readiness = Readiness::new(vec![
        Box::new(AuthGrpcChecker::from_channel(channel)),
        Box::new(SqliteChecker(store.clone())),
    ]);
    Gateway::new(config.gateway)?
        // One process, one replica: an in-process limiter is exact, and idempotency already
        // falls back to its in-process store without REDIS_URL.
        .with_rate_limit_store(Arc::new(MemoryRateLimitStore::new()))
        .with_token_budget_store(Arc::new(MemoryTokenBudgetStore::new()))
        .with_readiness(readiness)
        // No PostgreSQL: the usage ledger goes to the embedded store, where GetUsage reads it.
        .with_ledger_sink(Arc::new(SqliteLedger(store)))
        .start()
        .await
}

/// The usage ledger in the embedded store.
struct SqliteLedger(SqliteStore);

impl LedgerSink for SqliteLedger {
    fn write<'a>(&'a self, batch: &'a [UsageRecord]) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move { Ok(self.0.record_usage(batch).await?) })
    }
}

/// `sqlite`: the embedded identity store answers a trivial query.
#[derive(Debug, Clone)]
struct SqliteChecker(SqliteStore);

impl Checker for SqliteChecker {
    fn name(&self) -> &str {
        "sqlite"
    }

    fn check(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            match self.0.ping().await {
                Ok(()) => Ok(()),
                Err(StoreError::Unavailable(_)) => Err("embedded store busy or closed".to_owned()),
                Err(_) => Err("embedded store query failed".to_owned()),
            }
        })
    }
}

/// Creates the directory (owner-only on unix when it is new) with a `.gitignore` that keeps
/// the database and the admin token out of version control.
fn create_data_dir(path: &Path) -> Result<(), DevStartError> {
    let io = |source| DevStartError::DataDir {
        path: path.to_owned(),
        source,
    };
    if !path.exists() {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(path).map_err(io)?;
    }
    let ignore = path.join(".gitignore");
    if !ignore.exists() {
        std::fs::write(&ignore, "*\n").map_err(io)?;
    }
    Ok(())
}
