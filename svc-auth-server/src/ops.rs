//! The unauthenticated HTTP operational routes: `/health`, `/ready`, `/metrics`.
//!
//! `/ready` runs the `postgres` and `grpc` checks in parallel (500 ms each, 750 ms overall);
//! check messages are fixed words, never a driver error that could carry a host or a DSN.
//! Once the shutdown has begun it answers 503 without checking, while the gRPC calls in flight
//! drain.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::future::BoxFuture;
use prometheus_client::registry::Registry;
use svc_runtime::health::{Checker, Readiness, ReadinessReport};
use svc_runtime::shutdown::Drain;
use tokio::net::TcpStream;

use crate::store::{Store, StoreError};

/// The `Content-Type` of `/metrics` (prometheus-client writes OpenMetrics text).
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone)]
struct OpsState {
    readiness: Arc<Readiness>,
    serving: Drain,
    registry: Arc<Registry>,
}

/// The ops router; `/ready` fails once `serving` drains.
pub fn router(readiness: Readiness, serving: Drain, registry: Arc<Registry>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics))
        .with_state(OpsState {
            readiness: Arc::new(readiness),
            serving,
            registry,
        })
}

async fn health() -> Response {
    axum::Json(ReadinessReport::alive()).into_response()
}

async fn ready(State(state): State<OpsState>) -> Response {
    let report = state.readiness.run_while_serving(&state.serving).await;
    (report.http_status(), axum::Json(report)).into_response()
}

async fn metrics(State(state): State<OpsState>) -> Response {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &state.registry) {
        Ok(()) => ([(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)], body).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// `postgres`: a trivial query through the service's own pool.
#[derive(Debug, Clone)]
pub struct StoreChecker<S> {
    store: S,
}

impl<S> StoreChecker<S> {
    /// Checks `store`.
    pub fn new(store: S) -> StoreChecker<S> {
        StoreChecker { store }
    }
}

impl<S: Store> Checker for StoreChecker<S> {
    fn name(&self) -> &str {
        "postgres"
    }

    fn check(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            match self.store.ping().await {
                Ok(()) => Ok(()),
                Err(StoreError::Unavailable(_)) => Err("unreachable".to_owned()),
                Err(_) => Err("query failed".to_owned()),
            }
        })
    }
}

/// A TCP connect to an address (`grpc`: the gRPC listener).
#[derive(Debug, Clone)]
pub struct TcpChecker {
    name: &'static str,
    addr: SocketAddr,
}

impl TcpChecker {
    /// Checks that `addr` accepts connections. An unspecified address (0.0.0.0) is checked on
    /// loopback, where the listener also answers.
    pub fn new(name: &'static str, mut addr: SocketAddr) -> TcpChecker {
        if addr.ip().is_unspecified() {
            addr.set_ip(match addr {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        TcpChecker { name, addr }
    }
}

impl Checker for TcpChecker {
    fn name(&self) -> &str {
        self.name
    }

    fn check(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            TcpStream::connect(self.addr)
                .await
                .map(drop)
                .map_err(|_| "connection refused".to_owned())
        })
    }
}
