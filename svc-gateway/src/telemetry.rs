//! Logging setup. JSON lines by default; only metadata is ever logged (org_id, request_id,
//! model, message_count, stream), never a token, a key or message content.
//!
//! OTLP trace export (`OTEL_*`) and Sentry (`SENTRY_DSN`) are parsed and validated by
//! [`crate::config`]; exporting is not wired in yet, so with an endpoint set the gateway logs
//! one line saying so and carries on.

use tracing_subscriber::EnvFilter;

use crate::config::{Config, LogFormat};

/// Dependencies stay at `warn` whatever `SVC_LOG_LEVEL` says: their debug output describes
/// frames and connections in terms this service does not control, and must never be the way a
/// header or a body reaches the logs.
pub const QUIET_DEPENDENCIES: &str =
    "h2=warn,hyper=warn,hyper_util=warn,tonic=warn,tower=warn,rustls=warn,sqlx=warn,redis=warn";

/// The filter for `level`: the level for this service, [`QUIET_DEPENDENCIES`] for the rest.
pub fn filter(level: &str) -> EnvFilter {
    EnvFilter::new(format!("{level},{QUIET_DEPENDENCIES}"))
}

/// Installs the global subscriber. Safe to call twice (the second call changes nothing).
pub fn init(config: &Config) {
    let filter = filter(config.log_level);
    let installed = match config.log_format {
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .with_current_span(false)
            .try_init(),
        LogFormat::Text => tracing_subscriber::fmt().with_env_filter(filter).try_init(),
    };
    if installed.is_err() {
        return;
    }
    if config.otel.endpoint.is_some() {
        tracing::info!(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set; trace export is not available in this build"
        );
    }
    if config.sentry_dsn.is_some() {
        tracing::info!("SENTRY_DSN is set; error reporting is not available in this build");
    }
}
