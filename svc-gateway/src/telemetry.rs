//! Logging, trace export and error reports. JSON lines by default; only metadata is ever
//! logged (org_id, request_id, model, message_count, stream), never a token, a key or message
//! content.
//!
//! The log layer and the OTLP exporter are [`svc_runtime::telemetry`], the ones the auth
//! server uses; the gateway keeps each event's fields under `fields` in its JSON lines. Each
//! request's span is made by [`crate::request_span`]. With `SENTRY_DSN`, 5xx answers and
//! panics go to Sentry ([`crate::error_report`], [`svc_runtime::error_report`]).

use svc_runtime::telemetry::batched::{BatchedStdout, FlushGuard};
use svc_runtime::telemetry::otel::{ExportError, TraceExport};
use svc_runtime::telemetry::{JsonFields, subscriber_with};

use crate::config::Config;
use svc_runtime::error_report::{self, ErrorReports};

/// What [`init`] started; [`Telemetry::shutdown`] it on the way out.
#[derive(Debug, Default)]
pub struct Telemetry {
    traces: Option<TraceExport>,
    errors: Option<ErrorReports>,
    /// The access log's lines leave in batches; what is pending is written on shutdown.
    logs: Option<FlushGuard>,
}

impl Telemetry {
    /// Flushes the queued spans and error reports, each within its own short bound.
    pub async fn shutdown(self) {
        if let Some(errors) = self.errors {
            errors.shutdown().await;
        }
        if let Some(traces) = self.traces {
            traces.shutdown().await;
        }
        if let Some(logs) = self.logs {
            logs.finish();
        }
    }
}

/// Installs the global subscriber, starts trace export with an endpoint configured and error
/// reporting with a DSN; call it inside the Tokio runtime. A second call changes nothing and
/// starts nothing.
pub fn init(config: &Config) -> Result<Telemetry, ExportError> {
    let traces = TraceExport::start(&config.otel)?;
    // One write per batch of lines rather than one per request's access log line.
    let (stdout, logs) = BatchedStdout::start();
    let subscriber = subscriber_with(&config.log, stdout, traces.as_ref(), JsonFields::Nested);
    if tracing::subscriber::set_global_default(subscriber).is_err() {
        return Ok(Telemetry::default());
    }
    let dsn = config.sentry_dsn.as_ref().map(|dsn| dsn.expose());
    let errors = error_report::init(
        dsn,
        concat!("svc-gateway@", env!("CARGO_PKG_VERSION")),
        config.env,
    );
    if errors.is_some() {
        tracing::info!("error reporting is on");
    }
    Ok(Telemetry {
        traces,
        errors,
        logs: Some(logs),
    })
}
