//! Logging and trace export. JSON lines by default; only metadata is ever logged (org_id,
//! request_id, model, message_count, stream), never a token, a key or message content.
//!
//! With `OTEL_EXPORTER_OTLP_ENDPOINT` set, spans go to that OTLP gRPC collector through the
//! exporter the auth server uses ([`svc_auth_server::telemetry::otel`]); each request's span
//! is made by [`crate::request_span`]. Sentry (`SENTRY_DSN`) is parsed and validated by
//! [`crate::config`] but not wired in: with a DSN set the gateway logs one line saying so.

use svc_auth_server::telemetry::otel::{ExportError, OtelSettings, TraceExport};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::{Config, LogFormat, OtelConfig};

/// Dependencies stay at `warn` whatever `SVC_LOG_LEVEL` says: their debug output describes
/// frames and connections in terms this service does not control, and must never be the way a
/// header or a body reaches the logs.
pub const QUIET_DEPENDENCIES: &str =
    "h2=warn,hyper=warn,hyper_util=warn,tonic=warn,tower=warn,rustls=warn,sqlx=warn,redis=warn";

/// The filter for `level`: the level for this service, [`QUIET_DEPENDENCIES`] for the rest.
pub fn filter(level: &str) -> EnvFilter {
    EnvFilter::new(format!("{level},{QUIET_DEPENDENCIES}"))
}

/// The exporter's settings for the gateway's [`OtelConfig`].
pub fn otel_settings(otel: &OtelConfig) -> OtelSettings {
    OtelSettings {
        endpoint: otel.endpoint.clone(),
        sample_ratio: otel.sample_ratio,
        service_name: otel.service_name.clone(),
        deployment_environment: otel.deployment_environment.clone(),
    }
}

/// Installs the global subscriber and, with an endpoint configured, starts trace export; call
/// it inside the Tokio runtime and [`TraceExport::shutdown`] the result on the way out. A
/// second call changes nothing and exports nothing.
pub fn init(config: &Config) -> Result<Option<TraceExport>, ExportError> {
    let traces = TraceExport::start(&otel_settings(&config.otel))?;
    let logs = tracing_subscriber::fmt::layer();
    let logs = match config.log_format {
        LogFormat::Json => logs
            .json()
            .with_current_span(false)
            .with_filter(filter(config.log_level))
            .boxed(),
        LogFormat::Text => logs.with_filter(filter(config.log_level)).boxed(),
    };
    let installed = tracing_subscriber::registry()
        .with(logs)
        .with(traces.as_ref().map(TraceExport::layer))
        .try_init();
    if installed.is_err() {
        return Ok(None);
    }
    if config.sentry_dsn.is_some() {
        tracing::info!("SENTRY_DSN is set; error reporting is not available in this build");
    }
    Ok(traces)
}
