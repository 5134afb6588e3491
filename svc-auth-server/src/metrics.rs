//! The auth server's metrics, served as Prometheus text on `GET /metrics`.
//!
//! Labels stay bounded: `result` takes a handful of fixed words; nothing is labelled by org,
//! agent or token.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// A `result` label: `ok`, `invalid`, `error`, `timeout`, ...
#[derive(Debug, Clone, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct ResultLabel {
    /// A word from a small fixed set.
    pub result: &'static str,
}

/// A histogram with the latency buckets every svc service uses.
pub fn latency_histogram() -> Histogram {
    Histogram::new(svc_core::LATENCY_BUCKETS)
}

/// Every metric the auth server records.
#[derive(Debug, Clone)]
pub struct AuthMetrics {
    /// `svc_auth_validate_token_duration_seconds{result}`: ok, unauthenticated, error.
    pub validate_token_duration: Family<ResultLabel, Histogram>,
    /// `svc_auth_validate_agent_duration_seconds{result}`: ok, denied, invalid, error.
    pub validate_agent_duration: Family<ResultLabel, Histogram>,
    /// `svc_auth_grpc_requests_total`: every AuthService call.
    pub grpc_requests_total: Counter,
    /// `svc_db_query_duration_seconds`: every identity store call.
    pub db_query_duration: Histogram,
    /// `svc_process_up`: 1 while serving.
    pub process_up: Gauge,
}

impl Default for AuthMetrics {
    fn default() -> Self {
        AuthMetrics::new()
    }
}

impl AuthMetrics {
    /// Fresh, unregistered handles.
    pub fn new() -> AuthMetrics {
        AuthMetrics {
            validate_token_duration: Family::new_with_constructor(latency_histogram),
            validate_agent_duration: Family::new_with_constructor(latency_histogram),
            grpc_requests_total: Counter::default(),
            db_query_duration: latency_histogram(),
            process_up: Gauge::default(),
        }
    }

    /// Registers every handle, plus `argon2_runs` as `svc_auth_argon2_runs_total`.
    pub fn register(&self, registry: &mut Registry, argon2_runs: Counter) {
        registry.register(
            "svc_auth_validate_token_duration_seconds",
            "ValidateToken duration by result",
            self.validate_token_duration.clone(),
        );
        registry.register(
            "svc_auth_validate_agent_duration_seconds",
            "ValidateAgent duration by result",
            self.validate_agent_duration.clone(),
        );
        registry.register(
            "svc_auth_grpc_requests",
            "AuthService calls",
            self.grpc_requests_total.clone(),
        );
        registry.register(
            "svc_db_query_duration_seconds",
            "Identity store call duration",
            self.db_query_duration.clone(),
        );
        registry.register(
            "svc_process_up",
            "1 while the process serves",
            self.process_up.clone(),
        );
        registry.register(
            "svc_auth_argon2_runs",
            "Argon2id computations (hashes and verifications)",
            argon2_runs,
        );
    }

    /// Records one ValidateToken.
    pub fn observe_validate_token(&self, result: &'static str, seconds: f64) {
        self.validate_token_duration
            .get_or_create(&ResultLabel { result })
            .observe(seconds);
    }

    /// Records one ValidateAgent.
    pub fn observe_validate_agent(&self, result: &'static str, seconds: f64) {
        self.validate_agent_duration
            .get_or_create(&ResultLabel { result })
            .observe(seconds);
    }
}
