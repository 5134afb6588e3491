//! Logging for the svc binaries: `tracing` to stdout, JSON by default, and trace export
//! ([`otel`]).
//!
//! Log lines carry ids (token id, org id, request id), never a token, a secret or message
//! content; call sites are written that way and the tests read the output to check it. The
//! noisy transport crates (h2, hyper, tower, sqlx) are held at WARN even when the service logs
//! at DEBUG, so their internals never flood, or leak into, the logs.
//!
//! ```
//! use svc_runtime::telemetry::{LogFormat, LogLevel, LogSettings};
//! use svc_runtime::config::Vars;
//!
//! let vars = Vars::from_pairs([("SVC_LOG_LEVEL", "debug"), ("SVC_LOG_FORMAT", "text")]);
//! let settings = LogSettings::from_vars(&vars).unwrap();
//! assert_eq!(settings.level, LogLevel::Debug);
//! assert_eq!(settings.format, LogFormat::Text);
//! ```

use tracing::Subscriber;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use crate::config::{ConfigError, Vars};

pub mod batched;
pub mod otel;

crate::variables! {
    /// `SVC_LOG_LEVEL`: DEBUG, INFO, WARN or ERROR, any case.
    SVC_LOG_LEVEL;
    /// `SVC_LOG_FORMAT`: json or text.
    SVC_LOG_FORMAT;
}

/// The transport crates held at WARN in the logs and left out of exported traces: their
/// internals describe frames and connections, and must never be how a header reaches a log.
const TRANSPORT_CRATES: [&str; 9] = [
    "h2",
    "hyper",
    "hyper_util",
    "tower",
    "tonic",
    "sqlx",
    "axum",
    "rustls",
    "redis",
];
/// Default level.
pub const DEFAULT_LOG_LEVEL: LogLevel = LogLevel::Info;
/// Default format.
pub const DEFAULT_LOG_FORMAT: LogFormat = LogFormat::Json;

/// How much to log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// Everything down to per-request decisions.
    Debug,
    /// Lifecycle events.
    Info,
    /// Degradations.
    Warn,
    /// Failures.
    Error,
}

impl LogLevel {
    /// Parses DEBUG, INFO, WARN or ERROR in any case.
    pub fn parse(value: &str) -> Result<LogLevel, String> {
        match value.to_ascii_uppercase().as_str() {
            "DEBUG" => Ok(LogLevel::Debug),
            "INFO" => Ok(LogLevel::Info),
            "WARN" | "WARNING" => Ok(LogLevel::Warn),
            "ERROR" => Ok(LogLevel::Error),
            _ => Err(format!(
                "invalid log level {value:?} (expected DEBUG, INFO, WARN or ERROR)"
            )),
        }
    }

    fn directive(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }
}

/// How log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object per line (production's only format).
    Json,
    /// Human-readable lines.
    Text,
}

impl LogFormat {
    /// Parses `json` or `text`, any case.
    pub fn parse(value: &str) -> Result<LogFormat, String> {
        match value.to_ascii_lowercase().as_str() {
            "json" => Ok(LogFormat::Json),
            "text" | "pretty" | "console" => Ok(LogFormat::Text),
            _ => Err(format!(
                "invalid log format {value:?} (expected json or text)"
            )),
        }
    }
}

/// Level and format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogSettings {
    /// The level for the service's own crates.
    pub level: LogLevel,
    /// The line format.
    pub format: LogFormat,
}

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings {
            level: DEFAULT_LOG_LEVEL,
            format: DEFAULT_LOG_FORMAT,
        }
    }
}

impl LogSettings {
    /// Reads `SVC_LOG_LEVEL` and `SVC_LOG_FORMAT`.
    pub fn from_vars(vars: &Vars) -> Result<LogSettings, ConfigError> {
        Ok(LogSettings {
            level: vars.parse_or(SVC_LOG_LEVEL, DEFAULT_LOG_LEVEL, LogLevel::parse)?,
            format: vars.parse_or(SVC_LOG_FORMAT, DEFAULT_LOG_FORMAT, LogFormat::parse)?,
        })
    }

    fn filter(&self) -> EnvFilter {
        let level = self.level.directive();
        let quiet = match self.level {
            LogLevel::Error => "error",
            _ => "warn",
        };
        let mut filter = EnvFilter::new(level);
        for noisy in TRANSPORT_CRATES {
            if let Ok(directive) = format!("{noisy}={quiet}").parse() {
                filter = filter.add_directive(directive);
            }
        }
        filter
    }
}

/// A subscriber writing to `writer` (tests pass a buffer; [`init`] passes stdout).
pub fn subscriber<W>(settings: &LogSettings, writer: W) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    subscriber_with_traces(settings, writer, None)
}

/// Where a JSON line puts an event's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JsonFields {
    /// Beside `message`, `level` and `target` (the auth server's lines).
    #[default]
    Flat,
    /// Under a `fields` object (the gateway's lines).
    Nested,
}

/// [`subscriber`], exporting spans through `traces` when given.
///
/// The log level filters the log lines only: spans reach the exporter at INFO whatever
/// `SVC_LOG_LEVEL` says, so quieter logs never cost traces.
pub fn subscriber_with_traces<W>(
    settings: &LogSettings,
    writer: W,
    traces: Option<&otel::TraceExport>,
) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    subscriber_with(settings, writer, traces, JsonFields::Flat)
}

/// [`subscriber_with_traces`], with JSON fields laid out as `fields` says.
pub fn subscriber_with<W>(
    settings: &LogSettings,
    writer: W,
    traces: Option<&otel::TraceExport>,
    fields: JsonFields,
) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_target(true);
    match settings.format {
        LogFormat::Json => with_traces(
            logs.json()
                .flatten_event(fields == JsonFields::Flat)
                .with_current_span(false)
                .with_filter(settings.filter()),
            traces,
        ),
        LogFormat::Text => {
            with_traces(logs.with_ansi(false).with_filter(settings.filter()), traces)
        }
    }
}

fn with_traces<L>(logs: L, traces: Option<&otel::TraceExport>) -> Box<dyn Subscriber + Send + Sync>
where
    L: Layer<Registry> + Send + Sync + 'static,
{
    let logged = tracing_subscriber::registry().with(logs);
    Box::new(logged.with(traces.map(otel::TraceExport::layer)))
}

/// Installs the process-wide subscriber writing to stdout. Fails if one is installed already.
pub fn init(settings: &LogSettings) -> Result<(), tracing::subscriber::SetGlobalDefaultError> {
    tracing::subscriber::set_global_default(subscriber(settings, std::io::stdout))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'w self) -> Buffer {
            self.clone()
        }
    }

    #[test]
    fn json_lines_respect_the_level_and_quiet_noisy_crates() {
        let buffer = Buffer::default();
        let settings = LogSettings {
            level: LogLevel::Debug,
            format: LogFormat::Json,
        };
        tracing::subscriber::with_default(subscriber(&settings, buffer.clone()), || {
            tracing::debug!(token_id = "abc", "validated");
            tracing::info!(target: "h2::codec", "frame");
            tracing::warn!(target: "sqlx::pool", "slow");
        });
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0]["message"], "validated");
        assert_eq!(lines[0]["token_id"], "abc");
        assert_eq!(lines[0]["level"], "DEBUG");
        assert_eq!(lines[1]["target"], "sqlx::pool");
    }

    #[test]
    fn levels_and_formats_parse_in_any_case() {
        assert_eq!(LogLevel::parse("warn"), Ok(LogLevel::Warn));
        assert_eq!(LogLevel::parse("Error"), Ok(LogLevel::Error));
        assert!(LogLevel::parse("trace").is_err());
        assert_eq!(LogFormat::parse("JSON"), Ok(LogFormat::Json));
        assert!(LogFormat::parse("xml").is_err());
        let vars = Vars::from_pairs([("SVC_LOG_LEVEL", "loud")]);
        assert_eq!(
            LogSettings::from_vars(&vars).unwrap_err().variable,
            SVC_LOG_LEVEL
        );
    }
}
