//! Logging and trace export. JSON lines by default; only metadata is ever logged (org_id,
//! request_id, model, message_count, stream), never a token, a key or message content.
//!
//! The log layer and the OTLP exporter are [`svc_runtime::telemetry`], the ones the auth
//! server uses; the gateway keeps each event's fields under `fields` in its JSON lines. Each
//! request's span is made by [`crate::request_span`]. Sentry (`SENTRY_DSN`) is parsed and
//! validated by [`crate::config`] but not wired in: with a DSN set the gateway logs one line
//! saying so.

use svc_runtime::telemetry::otel::{ExportError, TraceExport};
use svc_runtime::telemetry::{JsonFields, subscriber_with};

use crate::config::Config;

/// Installs the global subscriber and, with an endpoint configured, starts trace export; call
/// it inside the Tokio runtime and [`TraceExport::shutdown`] the result on the way out. A
/// second call changes nothing and exports nothing.
pub fn init(config: &Config) -> Result<Option<TraceExport>, ExportError> {
    let traces = TraceExport::start(&config.otel)?;
    let subscriber = subscriber_with(
        &config.log,
        std::io::stdout,
        traces.as_ref(),
        JsonFields::Nested,
    );
    if tracing::subscriber::set_global_default(subscriber).is_err() {
        return Ok(None);
    }
    if config.sentry_dsn.is_some() {
        tracing::info!("SENTRY_DSN is set; error reporting is not available in this build");
    }
    Ok(traces)
}
