//! The typed pieces of [`Config`](super::Config).

use std::fmt;
use std::time::Duration;

/// A value that must never be printed: DSNs, API keys, URLs with passwords.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value, for the one place that must use it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(omitted)")
    }
}

/// `SVC_ENV`: one meaning for every svc binary.
pub use svc_auth_server::config::vars::Environment;

/// `SVC_LLM_MODE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmMode {
    /// The deterministic in-process provider.
    Mock,
    /// An OpenAI-compatible upstream at `SVC_PROVIDER_BASE_URL`.
    Live,
}

/// `SVC_LOG_FORMAT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object per line; the default and the only format production accepts.
    Json,
    /// Human-readable lines for a terminal.
    Text,
}

/// How the gateway reaches the auth service.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthConfig {
    /// The gRPC endpoint as a URI: `http://host:port` or `https://host:port`.
    pub endpoint: String,
    /// The ValidateToken deadline.
    pub validate_timeout: Duration,
    /// Client TLS material (`SVC_AUTH_GRPC_TLS_*`), paths as given.
    pub tls_ca: Option<String>,
    /// Client certificate for mutual TLS.
    pub tls_cert: Option<String>,
    /// Client key for mutual TLS.
    pub tls_key: Option<String>,
}

/// The provider registry and how to reach a live provider.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderConfig {
    /// Mock or live.
    pub mode: LlmMode,
    /// The live provider's base URL, e.g. `https://api.openai.com/v1`.
    pub base_url: Option<String>,
    /// The live provider's key, sent as `Authorization: Bearer`.
    pub api_key: Option<Secret>,
    /// The deadline of one provider call (the response head, then each streamed chunk).
    pub timeout: Duration,
    /// The registered models. Empty only in live mode without `SVC_PROVIDER_MODELS`, where
    /// every model is forwarded and the provider's own registry decides.
    pub models: Vec<String>,
    /// `SVC_PROVIDERS_FILE`, checked; when set it is the whole registry.
    pub file: Option<super::providers::RegistryFile>,
}

/// Trace export settings, parsed and validated (see [`crate::telemetry`]).
#[derive(Debug, Clone, PartialEq)]
pub struct OtelConfig {
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` as `http://host:port`; `None` means no export.
    pub endpoint: Option<String>,
    /// `OTEL_SAMPLE_RATIO`, in 0..=1.
    pub sample_ratio: f64,
    /// `OTEL_SERVICE_NAME`, else `SVC_SERVICE_NAME`, else `svc-gateway`.
    pub service_name: String,
    /// `OTEL_DEPLOYMENT_ENVIRONMENT`, else `SVC_ENV`.
    pub deployment_environment: String,
}
