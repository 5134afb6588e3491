//! Trace export: OpenTelemetry spans over OTLP gRPC, for both svc binaries.
//!
//! Off unless `OTEL_EXPORTER_OTLP_ENDPOINT` names a collector; then a
//! `tracing-opentelemetry` layer sits beside the log layer and a batch exporter ships sampled
//! spans. An `https://` collector is reached over TLS (rustls on ring), trusting the Mozilla
//! roots plus the PEM CA file `OTEL_EXPORTER_OTLP_CERTIFICATE` names, when set.
//!
//! Sampling is parent-based: a caller's sampling decision in `traceparent` stands, and a trace
//! that starts here is kept with probability `OTEL_SAMPLE_RATIO` by its trace id, so every
//! service that sees the same trace id with the same ratio decides alike.
//!
//! ```
//! use svc_runtime::config::{Environment, Vars};
//! use svc_runtime::telemetry::otel::OtelSettings;
//!
//! let vars = Vars::from_pairs([("OTEL_SAMPLE_RATIO", "2")]);
//! let error = OtelSettings::from_vars(&vars, "svc-auth-server", Environment::Staging).unwrap_err();
//! assert_eq!(error.variable, "OTEL_SAMPLE_RATIO");
//!
//! let vars = Vars::from_pairs([("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317"), ("SVC_SERVICE_NAME", "auth")]);
//! let settings = OtelSettings::from_vars(&vars, "svc-auth-server", Environment::Staging).unwrap();
//! assert_eq!(settings.endpoint.as_deref(), Some("http://collector:4317"));
//! assert_eq!(settings.service_name, "auth");
//! assert_eq!(settings.deployment_environment, "staging");
//! assert_eq!(settings.sample_ratio, 0.01);
//!
//! let vars = Vars::from_pairs([("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4317")]);
//! let settings = OtelSettings::from_vars(&vars, "svc-gateway", Environment::Production).unwrap();
//! assert_eq!(settings.endpoint.as_deref(), Some("https://collector:4317"));
//!
//! // A CA file is for a TLS collector only, and must hold certificates.
//! let vars = Vars::from_pairs([
//!     ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317"),
//!     ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/ssl/collector-ca.pem"),
//! ]);
//! let error = OtelSettings::from_vars(&vars, "svc-gateway", Environment::Staging).unwrap_err();
//! assert_eq!(error.variable, "OTEL_EXPORTER_OTLP_CERTIFICATE");
//! ```

use std::cell::Cell;
use std::time::Duration;

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId as OtelTraceId, TraceState,
    TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::tonic_types::transport::{Certificate, ClientTlsConfig};
use opentelemetry_otlp::{SpanExporter, WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, Sampler, SdkTracerProvider};
use svc_core::trace::TraceId;
use tracing::{Span, Subscriber};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::{ConfigError, Environment, Vars};

/// `OTEL_EXPORTER_OTLP_ENDPOINT`: `host:port` (or `http://host:port`) of an OTLP gRPC
/// collector, `https://host:port` for one served over TLS; empty means no export.
pub const OTEL_EXPORTER_OTLP_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_CERTIFICATE`: a PEM file of CA certificates trusted for an `https://`
/// collector, beside the Mozilla roots.
pub const OTEL_EXPORTER_OTLP_CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_CERTIFICATE";
/// `OTEL_SAMPLE_RATIO`: the share of traces started here that are kept, 0..=1.
pub const OTEL_SAMPLE_RATIO: &str = "OTEL_SAMPLE_RATIO";
/// `OTEL_SERVICE_NAME`: the exported `service.name`.
pub const OTEL_SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
/// `SVC_SERVICE_NAME`: the service name when `OTEL_SERVICE_NAME` is unset.
pub const SVC_SERVICE_NAME: &str = "SVC_SERVICE_NAME";
/// `OTEL_DEPLOYMENT_ENVIRONMENT`: the exported `deployment.environment`; else `SVC_ENV`.
pub const OTEL_DEPLOYMENT_ENVIRONMENT: &str = "OTEL_DEPLOYMENT_ENVIRONMENT";
/// Default `OTEL_SAMPLE_RATIO`.
pub const DEFAULT_SAMPLE_RATIO: f64 = 0.01;
/// How long a shutdown waits for the last spans to reach the collector.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
/// Deadline of one export call.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// Trace export settings, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct OtelSettings {
    /// The collector as `http://host:port` or `https://host:port`; `None` means no export.
    pub endpoint: Option<String>,
    /// The PEM CA certificates of `OTEL_EXPORTER_OTLP_CERTIFICATE`, read and checked at start.
    pub ca_certificate: Option<Vec<u8>>,
    /// Root sampling ratio, 0..=1.
    pub sample_ratio: f64,
    /// `service.name`.
    pub service_name: String,
    /// `deployment.environment`.
    pub deployment_environment: String,
}

impl OtelSettings {
    /// No export.
    pub fn disabled(service_name: &str, environment: Environment) -> OtelSettings {
        OtelSettings {
            endpoint: None,
            ca_certificate: None,
            sample_ratio: DEFAULT_SAMPLE_RATIO,
            service_name: service_name.to_owned(),
            deployment_environment: environment.as_str().to_owned(),
        }
    }

    /// Reads the `OTEL_*` variables; `default_service_name` is the binary's name.
    pub fn from_vars(
        vars: &Vars,
        default_service_name: &str,
        environment: Environment,
    ) -> Result<OtelSettings, ConfigError> {
        let endpoint = vars.parse_or(OTEL_EXPORTER_OTLP_ENDPOINT, None, |v| {
            parse_endpoint(v).map(Some)
        })?;
        let ca_certificate = vars.parse_or(OTEL_EXPORTER_OTLP_CERTIFICATE, None, |path| {
            if !endpoint
                .as_deref()
                .is_some_and(|e| e.starts_with("https://"))
            {
                return Err(format!("needs an https:// {OTEL_EXPORTER_OTLP_ENDPOINT}"));
            }
            read_ca_file(path).map(Some)
        })?;
        Ok(OtelSettings {
            endpoint,
            ca_certificate,
            sample_ratio: vars.parse_or(OTEL_SAMPLE_RATIO, DEFAULT_SAMPLE_RATIO, parse_ratio)?,
            service_name: vars
                .get(OTEL_SERVICE_NAME)
                .or_else(|| vars.get(SVC_SERVICE_NAME))
                .unwrap_or(default_service_name)
                .to_owned(),
            deployment_environment: vars
                .get(OTEL_DEPLOYMENT_ENVIRONMENT)
                .unwrap_or(environment.as_str())
                .to_owned(),
        })
    }
}

/// A collector address: `host:port` or `http://host:port`, returned as `http://host:port`;
/// or `https://host:port`, returned as is (export over TLS).
pub fn parse_endpoint(value: &str) -> Result<String, String> {
    let invalid = || format!("invalid collector address {value:?} (expected host:port)");
    let (scheme, rest) = match value.split_once("://") {
        Some((scheme @ ("http" | "https"), rest)) => (scheme, rest),
        Some(_) => return Err(invalid()),
        None => ("http", value),
    };
    let host_port = rest.trim_end_matches('/');
    let (host, port) = host_port.rsplit_once(':').ok_or_else(invalid)?;
    let host_ok = !host.is_empty()
        && !host
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '/' | '@' | '?' | '#'));
    match port.parse::<u16>() {
        Ok(port) if port > 0 && host_ok => Ok(format!("{scheme}://{host}:{port}")),
        _ => Err(invalid()),
    }
}

/// Reads a PEM file of CA certificates; a file that cannot be read, holds no certificate, or
/// holds one that does not parse is refused, so a typo stops the start rather than every
/// export failing its handshake later.
pub fn read_ca_file(path: &str) -> Result<Vec<u8>, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;

    let pem = std::fs::read(path).map_err(|e| format!("cannot read {path:?}: {e}"))?;
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(&pem) {
        let certificate =
            certificate.map_err(|e| format!("{path:?} is not a PEM certificate file: {e}"))?;
        roots
            .add(certificate)
            .map_err(|e| format!("{path:?} holds an invalid certificate: {e}"))?;
    }
    if roots.is_empty() {
        return Err(format!("{path:?} holds no PEM certificate"));
    }
    Ok(pem)
}

/// A ratio in 0..=1.
pub fn parse_ratio(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(ratio) if (0.0..=1.0).contains(&ratio) => Ok(ratio),
        _ => Err(format!(
            "invalid ratio {value:?} (expected a number from 0 to 1)"
        )),
    }
}

/// Why export could not start.
#[derive(Debug, thiserror::Error)]
#[error("{OTEL_EXPORTER_OTLP_ENDPOINT}: cannot build the trace exporter")]
pub struct ExportError(#[source] opentelemetry_otlp::ExporterBuildError);

/// The running exporter. Call [`TraceExport::shutdown`] on the way out, or the last batch of
/// spans is lost.
#[derive(Debug)]
pub struct TraceExport {
    provider: SdkTracerProvider,
    service_name: String,
}

impl TraceExport {
    /// Starts exporting when `settings` names a collector; `None` otherwise. Call it inside a
    /// Tokio runtime: the gRPC channel spawns its worker there and connects lazily, so a
    /// collector that is down costs dropped spans, never a failed start.
    pub fn start(settings: &OtelSettings) -> Result<Option<TraceExport>, ExportError> {
        let Some(endpoint) = &settings.endpoint else {
            return Ok(None);
        };
        let mut builder = SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint.clone())
            .with_timeout(EXPORT_TIMEOUT);
        if endpoint.starts_with("https://") {
            let mut tls = ClientTlsConfig::new().with_webpki_roots();
            if let Some(pem) = &settings.ca_certificate {
                tls = tls.ca_certificate(Certificate::from_pem(pem));
            }
            builder = builder.with_tls_config(tls);
        }
        let exporter = builder.build().map_err(ExportError)?;
        let resource = Resource::builder_empty()
            .with_service_name(settings.service_name.clone())
            .with_attribute(KeyValue::new(
                "deployment.environment",
                settings.deployment_environment.clone(),
            ))
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                settings.sample_ratio,
            ))))
            .with_id_generator(RootIds::default())
            .with_resource(resource)
            .build();
        Ok(Some(TraceExport {
            provider,
            service_name: settings.service_name.clone(),
        }))
    }

    /// The layer that turns `tracing` spans into exported spans. It sees INFO spans of every
    /// crate but the transport ones, whatever the log level, so quieter logs keep the traces.
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: Subscriber + for<'span> LookupSpan<'span>,
    {
        let tracer = self.provider.tracer(self.service_name.clone());
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(span_filter())
    }

    /// Flushes the spans still queued and stops the exporter.
    pub async fn shutdown(self) {
        let provider = self.provider;
        let flushed =
            tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT))
                .await;
        if !matches!(flushed, Ok(Ok(()))) {
            tracing::warn!("trace export did not flush before shutdown");
        }
    }
}

fn span_filter() -> EnvFilter {
    let mut filter = EnvFilter::new("info");
    for noisy in super::TRANSPORT_CRATES {
        if let Ok(directive) = format!("{noisy}=off").parse() {
            filter = filter.add_directive(directive);
        }
    }
    filter
}

/// A W3C `traceparent` as a remote parent: trace id, parent span id and sampled flag. `None`
/// for anything [`TraceId::from_traceparent`] rejects.
pub fn remote_parent(traceparent: &[u8]) -> Option<SpanContext> {
    let trace = TraceId::from_traceparent(traceparent)?;
    let text = std::str::from_utf8(traceparent).ok()?;
    let span_id = u64::from_str_radix(text.get(36..52)?, 16).ok()?;
    let flags = u8::from_str_radix(text.get(53..55)?, 16).ok()?;
    Some(SpanContext::new(
        OtelTraceId::from(trace.as_u128()),
        SpanId::from(span_id),
        TraceFlags::new(flags & TraceFlags::SAMPLED.to_u8()),
        true,
        TraceState::NONE,
    ))
}

/// Makes `span` (not yet entered) a child of the caller's `traceparent`, so the exported trace
/// continues across the hop. Returns whether `traceparent` was valid. Without export, nothing.
pub fn continue_trace(span: &Span, traceparent: &[u8]) -> bool {
    let Some(parent) = remote_parent(traceparent) else {
        return false;
    };
    // An error means export is off or the span is disabled: there is nothing to link.
    let _ = span.set_parent(Context::new().with_remote_span_context(parent));
    true
}

/// Starts `span` (not yet entered) as the root of trace `trace`, so the exported trace id is
/// the one the service already reports (`X-Trace-ID`). The root sampling decision is taken on
/// that id. Without export, nothing.
pub fn start_root(span: &Span, trace: TraceId) {
    ROOT_TRACE_ID.with(|next| next.set(Some(trace.as_u128())));
    // Starting the span asks the id generator for a trace id, which takes the one set above.
    let _ = span.context();
    ROOT_TRACE_ID.with(|next| next.set(None));
}

thread_local! {
    /// The trace id the next root span on this thread takes; set only inside [`start_root`].
    static ROOT_TRACE_ID: Cell<Option<u128>> = const { Cell::new(None) };
}

/// Random ids, except a root trace id chosen by [`start_root`].
#[derive(Debug, Default)]
struct RootIds(RandomIdGenerator);

impl IdGenerator for RootIds {
    fn new_trace_id(&self) -> OtelTraceId {
        match ROOT_TRACE_ID.with(Cell::take) {
            Some(trace) => OtelTraceId::from(trace),
            None => self.0.new_trace_id(),
        }
    }

    fn new_span_id(&self) -> SpanId {
        self.0.new_span_id()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_host_port_with_an_optional_http_or_https_scheme() {
        assert_eq!(
            parse_endpoint("collector:4317").as_deref(),
            Ok("http://collector:4317")
        );
        assert_eq!(
            parse_endpoint("http://127.0.0.1:4317/").as_deref(),
            Ok("http://127.0.0.1:4317")
        );
        assert_eq!(
            parse_endpoint("[::1]:4317").as_deref(),
            Ok("http://[::1]:4317")
        );
        assert_eq!(
            parse_endpoint("https://collector.example.com:443/").as_deref(),
            Ok("https://collector.example.com:443")
        );
        for bad in [
            "collector",
            "collector:",
            ":4317",
            "collector:0",
            "collector:99999",
            "https://collector",
            "ftp://collector:4317",
            "user@collector:4317",
        ] {
            assert!(parse_endpoint(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ratios_are_between_zero_and_one() {
        assert_eq!(parse_ratio("0"), Ok(0.0));
        assert_eq!(parse_ratio("1"), Ok(1.0));
        assert_eq!(parse_ratio("0.25"), Ok(0.25));
        for bad in ["-0.1", "1.01", "NaN", "half", ""] {
            assert!(parse_ratio(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn settings_fall_back_to_the_svc_names() {
        let vars = Vars::from_pairs([
            ("OTEL_SERVICE_NAME", "traces-name"),
            ("SVC_SERVICE_NAME", "svc-name"),
            ("OTEL_DEPLOYMENT_ENVIRONMENT", "eu-prod"),
        ]);
        let settings = OtelSettings::from_vars(&vars, "bin", Environment::Production).unwrap();
        assert_eq!(settings.endpoint, None);
        assert_eq!(settings.service_name, "traces-name");
        assert_eq!(settings.deployment_environment, "eu-prod");
        let settings =
            OtelSettings::from_vars(&Vars::default(), "bin", Environment::Staging).unwrap();
        assert_eq!(
            settings,
            OtelSettings::disabled("bin", Environment::Staging)
        );
        let vars = Vars::from_pairs([("OTEL_EXPORTER_OTLP_ENDPOINT", "nope")]);
        assert_eq!(
            OtelSettings::from_vars(&vars, "bin", Environment::Staging)
                .unwrap_err()
                .variable,
            OTEL_EXPORTER_OTLP_ENDPOINT
        );
    }

    #[test]
    fn a_traceparent_becomes_a_remote_parent_with_its_sampled_flag() {
        let sampled = remote_parent(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
            .expect("valid");
        assert_eq!(
            sampled.trace_id(),
            OtelTraceId::from(0x4bf92f3577b34da6a3ce929d0e0e4736_u128)
        );
        assert_eq!(sampled.span_id(), SpanId::from(0x00f067aa0ba902b7_u64));
        assert!(sampled.is_sampled() && sampled.is_remote());
        let dropped = remote_parent(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
            .expect("valid");
        assert!(!dropped.is_sampled());
        assert!(remote_parent(b"00-garbage").is_none());
    }
}
