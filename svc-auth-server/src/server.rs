//! Starting and stopping the auth server: gRPC (AuthService, health, reflection) and the HTTP
//! ops routes, sharing one store and one metrics registry.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use svc_auth_server::{Config, Server};
//!
//! let config = Config::local("postgres://postgres@127.0.0.1:5432/svc");
//! svc_auth_server::migrate::run(config.postgres_dsn.expose(), &config.pool).await?;
//! let server = Server::start(config).await?;
//! println!("gRPC on {}, HTTP on {}", server.grpc_addr, server.http_addr);
//! server.shutdown().await?;
//! # Ok(())
//! # }
//! ```

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;
use svc_proto::v1::auth_service_server::{AuthServiceServer, SERVICE_NAME};
use svc_runtime::health::Readiness;
use svc_runtime::http_server::{self, Serving};
use svc_runtime::shutdown::Drain;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::service::interceptor::InterceptedService;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use crate::config::Config;
use crate::grpc::AuthApi;
use crate::grpc::direct::DirectValidateLayer;
use crate::grpc::reports::ReportLayer;
use crate::metrics::AuthMetrics;
use crate::migrate::{self, MigrateError};
use crate::ops::{self, StoreChecker, TcpChecker};
use crate::store::{PgStore, Store, StoreError};
use crate::verify::{DEFAULT_SUCCESS_CAPACITY, HashError, Hasher, Verifier};

/// How often gRPC pings a connection's peer: a gateway that vanished without a reset is
/// noticed within this plus [`GRPC_KEEPALIVE_TIMEOUT`].
pub const GRPC_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
/// How long a gRPC keepalive ping may go unanswered.
pub const GRPC_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The database is unreachable, not migrated, or refused the check.
    #[error(transparent)]
    Migrations(#[from] MigrateError),
    /// The DSN could not be used.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The Argon2 parameters are invalid.
    #[error(transparent)]
    Hasher(#[from] HashError),
    /// A listener could not bind.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The TLS files could not be loaded.
    #[error("gRPC TLS: {0}")]
    Tls(String),
    /// The reflection service rejected the descriptors.
    #[error("gRPC reflection: {0}")]
    Reflection(String),
}

/// Why a running server stopped on its own.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The gRPC server failed.
    #[error("gRPC server failed")]
    Grpc(#[source] tonic::transport::Error),
    /// A server task panicked or was cancelled.
    #[error("server task ended abnormally")]
    Task(#[source] tokio::task::JoinError),
}

/// The auth server.
#[derive(Debug)]
pub struct Server;

impl Server {
    /// Connects to PostgreSQL (refusing an unmigrated database) and starts serving.
    pub async fn start(config: Config) -> Result<RunningServer, StartError> {
        let dsn = config.postgres_dsn.expose();
        migrate::check(dsn, &config.pool).await?;
        let metrics = AuthMetrics::new();
        let store = PgStore::connect_lazy(dsn, &config.pool)?
            .with_query_histogram(metrics.db_query_duration.clone());
        Server::start_with_store(config, store, metrics).await
    }

    /// Starts serving over any [`Store`] backend.
    pub async fn start_with_store<S: Store>(
        config: Config,
        store: S,
        metrics: AuthMetrics,
    ) -> Result<RunningServer, StartError> {
        let hasher = Hasher::new(config.argon2, config.hash_concurrency)?;
        let verifier = Verifier::with_limits(
            store.clone(),
            hasher.clone(),
            DEFAULT_SUCCESS_CAPACITY,
            config.failure_limits,
        );
        let mut registry = Registry::default();
        metrics.register(&mut registry, hasher.runs_counter());

        // TLS files are read before anything binds, so a bad path fails without side effects.
        let mut builder = tonic::transport::Server::builder()
            .http2_keepalive_interval(Some(GRPC_KEEPALIVE_INTERVAL))
            .http2_keepalive_timeout(Some(GRPC_KEEPALIVE_TIMEOUT));
        if let Some(files) = &config.grpc_tls {
            let tls =
                crate::tls::server_config(files)?.timeout(config.grpc_listener.handshake_timeout);
            builder = builder
                .tls_config(tls)
                .map_err(|e| StartError::Tls(e.to_string()))?;
        }

        let grpc_listener = bind(config.grpc_addr).await?;
        let grpc_addr = local_addr(&grpc_listener, config.grpc_addr)?;
        let http_listener = bind(config.http_addr).await?;
        let http_addr = local_addr(&http_listener, config.http_addr)?;

        let (shutdown, _) = watch::channel(false);
        let stopped = |tx: &watch::Sender<bool>| {
            let mut rx = tx.subscribe();
            async move {
                let _ = rx.wait_for(|stop| *stop).await;
            }
        };

        let (health, health_service) = tonic_health::server::health_reporter();
        health
            .set_service_status(SERVICE_NAME, ServingStatus::Serving)
            .await;
        let reflection = || {
            tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(svc_proto::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        };
        let reflection_v1 = reflection()
            .build_v1()
            .map_err(|e| StartError::Reflection(e.to_string()))?;
        let reflection_v1alpha = reflection()
            .build_v1alpha()
            .map_err(|e| StartError::Reflection(e.to_string()))?;

        let api = Arc::new(AuthApi::new(verifier, metrics.clone()));
        let requests = metrics.grpc_requests_total.clone();
        let auth =
            InterceptedService::new(AuthServiceServer::from_arc(api.clone()), move |request| {
                requests.inc();
                Ok(request)
            });
        let incoming = crate::incoming::capped(
            grpc_listener,
            crate::incoming::Limits {
                max_connections: config.grpc_listener.max_connections,
                per_address: config.http.max_connections_per_address,
                handshake_timeout: config.grpc_listener.handshake_timeout,
                write_timeout: config.http.write_timeout,
            },
        );
        let grpc = tokio::spawn(
            builder
                // Outermost, so the bodies it watches are the ones hyper sees.
                .layer(crate::incoming::StallLayer)
                .layer(ReportLayer::new(config.sentry_dsn.is_some()))
                .layer(DirectValidateLayer::new(
                    api,
                    metrics.grpc_requests_total.clone(),
                ))
                .add_service(auth)
                .add_service(health_service)
                .add_service(reflection_v1)
                .add_service(reflection_v1alpha)
                .serve_with_incoming_shutdown(incoming, stopped(&shutdown)),
        );

        let readiness = Readiness::new(vec![
            Box::new(StoreChecker::new(store)),
            Box::new(TcpChecker::new("grpc", grpc_addr)),
        ]);
        // Readiness fails for the whole shutdown; the ops listener itself drains only after the
        // gRPC calls have, so a prober keeps getting its 503 meanwhile.
        let serving = Drain::new();
        let app = ops::router(readiness, serving.clone(), Arc::new(registry));
        let http = http_server::serve(http_listener, config.http, app, Drain::new()).map_err(
            |source| StartError::Bind {
                addr: http_addr,
                source,
            },
        )?;

        metrics.process_up.set(1);
        Ok(RunningServer {
            grpc_addr,
            http_addr,
            shutdown,
            serving,
            grace: config.http.shutdown_grace,
            grpc,
            http: Some(http),
            hasher,
            metrics,
            health,
        })
    }
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, StartError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Bind { addr, source })
}

fn local_addr(listener: &TcpListener, addr: SocketAddr) -> Result<SocketAddr, StartError> {
    listener
        .local_addr()
        .map_err(|source| StartError::Bind { addr, source })
}

/// A started server. Dropping it leaves the servers running until the runtime stops; call
/// [`RunningServer::shutdown`] to stop them gracefully.
#[derive(Debug)]
pub struct RunningServer {
    /// Where gRPC listens (the real port when 0 was asked for).
    pub grpc_addr: SocketAddr,
    /// Where the HTTP ops routes listen.
    pub http_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    serving: Drain,
    grace: Duration,
    grpc: JoinHandle<Result<(), tonic::transport::Error>>,
    http: Option<Serving>,
    hasher: Hasher,
    metrics: AuthMetrics,
    health: HealthReporter,
}

impl RunningServer {
    /// Argon2 computations run so far (hashes and verifications).
    pub fn argon2_runs(&self) -> u64 {
        self.hasher.runs()
    }

    /// Serves until `signal` completes or the gRPC server fails, then shuts down gracefully.
    pub async fn run_until(mut self, signal: impl Future<Output = ()>) -> Result<(), ServeError> {
        tokio::select! {
            () = signal => self.shutdown().await,
            joined = &mut self.grpc => {
                self.stop_now();
                flatten(joined, ServeError::Grpc)
            }
        }
    }

    /// Stops accepting, lets in-flight calls finish (up to `SVC_SHUTDOWN_GRACE`), and returns.
    pub async fn shutdown(mut self) -> Result<(), ServeError> {
        self.metrics.process_up.set(0);
        // Health watchers (load balancers, the gateways' balanced channels) see NOT_SERVING
        // before connections start closing.
        self.health
            .set_service_status(SERVICE_NAME, ServingStatus::NotServing)
            .await;
        self.serving.start();
        let _ = self.shutdown.send(true);
        let grace = tokio::time::sleep(self.grace);
        let grpc = tokio::select! {
            joined = &mut self.grpc => flatten(joined, ServeError::Grpc),
            () = grace => { self.grpc.abort(); Ok(()) }
        };
        if let Some(http) = self.http.take() {
            http.shutdown().await;
        }
        grpc
    }

    fn stop_now(&mut self) {
        self.metrics.process_up.set(0);
        self.serving.start();
        let _ = self.shutdown.send(true);
        self.grpc.abort();
        if let Some(http) = &self.http {
            http.drain().start();
        }
    }
}

fn flatten<E>(
    joined: Result<Result<(), E>, tokio::task::JoinError>,
    wrap: impl FnOnce(E) -> ServeError,
) -> Result<(), ServeError> {
    match joined {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(wrap(error)),
        Err(error) => Err(ServeError::Task(error)),
    }
}
