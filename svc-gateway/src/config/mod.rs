//! Gateway configuration: every variable read once, at start, from a map.
//!
//! [`Config::from_map`] takes the variables as a map so tests never touch the process
//! environment; [`Config::from_env`] is the thin wrapper `main` uses. A bad value yields a
//! [`ConfigError`] naming the variable, which `main` prints on one line before exiting with
//! [`EXIT_CONFIG`].

mod parse;
mod vars;

use std::collections::HashMap;
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use http::HeaderName;

pub use vars::*;

/// The process exit code for a configuration error.
pub const EXIT_CONFIG: i32 = 2;

/// Default `SVC_PORT`.
pub const DEFAULT_PORT: u16 = 8080;
/// Default `SVC_AUTH_VALIDATE_TIMEOUT`: the production budget of one ValidateToken call.
pub const DEFAULT_AUTH_VALIDATE_TIMEOUT: Duration = Duration::from_millis(50);
/// Default `SVC_RATE_LIMIT_RPM`.
pub const DEFAULT_RATE_LIMIT_RPM: u32 = 600;
/// Default `SVC_PROVIDER_TIMEOUT`.
pub const DEFAULT_PROVIDER_TIMEOUT: Duration = Duration::from_secs(60);
/// The mock provider's registry when `SVC_PROVIDER_MODELS` is unset.
pub const DEFAULT_MOCK_MODEL: &str = "svc-mock-1";
/// Default `SVC_MAX_REQUEST_BODY_BYTES`: 1 MiB.
pub const DEFAULT_MAX_REQUEST_BODY_BYTES: usize = 1024 * 1024;
/// Default `SVC_REQUEST_ID_HEADER`.
pub const DEFAULT_REQUEST_ID_HEADER: &str = "x-request-id";
/// Default `SVC_TRACE_ID_HEADER`.
pub const DEFAULT_TRACE_ID_HEADER: &str = "x-trace-id";
/// Default `OTEL_SAMPLE_RATIO`.
pub const DEFAULT_OTEL_SAMPLE_RATIO: f64 = 0.01;
/// Default service name for traces and logs.
pub const DEFAULT_SERVICE_NAME: &str = "svc-gateway";

/// A configuration value that is refused, naming the variable (never echoing a secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid configuration: {var}: {reason}")]
pub struct ConfigError {
    /// The variable at fault.
    pub var: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

impl ConfigError {
    fn new(var: &'static str, reason: impl Into<String>) -> ConfigError {
        ConfigError {
            var,
            reason: reason.into(),
        }
    }
}

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

/// `SVC_ENV`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Environment {
    /// Local work; the default.
    Development,
    /// Pre-production.
    Staging,
    /// Production: refuses an implicit mock provider, plaintext gRPC and text logs.
    Production,
}

impl Environment {
    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            Environment::Development => "development",
            Environment::Staging => "staging",
            Environment::Production => "production",
        }
    }
}

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
}

/// Tracing export settings, parsed and validated; export itself is off until a collector is
/// wired in (see the crate docs).
#[derive(Debug, Clone, PartialEq)]
pub struct OtelConfig {
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`; `None` means no export.
    pub endpoint: Option<String>,
    /// `OTEL_SAMPLE_RATIO`, in 0..=1.
    pub sample_ratio: f64,
    /// `OTEL_SERVICE_NAME`, else `SVC_SERVICE_NAME`, else `svc-gateway`.
    pub service_name: String,
    /// `OTEL_DEPLOYMENT_ENVIRONMENT`, else `SVC_ENV`.
    pub deployment_environment: String,
}

/// The whole gateway configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the HTTP server listens (`0.0.0.0:SVC_PORT`; tests use `127.0.0.1:0`).
    pub listen: SocketAddr,
    /// The auth service.
    pub auth: AuthConfig,
    /// `REDIS_URL`; `None` means a no-op limiter and an in-process idempotency store.
    pub redis_url: Option<Secret>,
    /// Prefix of every Redis key (`SVC_REDIS_KEY_PREFIX`, default empty).
    pub redis_key_prefix: String,
    /// Requests per minute per org.
    pub rate_limit_rpm: u32,
    /// Providers.
    pub provider: ProviderConfig,
    /// The largest accepted request body.
    pub max_request_body_bytes: usize,
    /// When set, error envelopes carry `docs_url` under this base.
    pub error_docs_base: Option<String>,
    /// The request-id response header.
    pub request_id_header: HeaderName,
    /// The trace-id response header.
    pub trace_id_header: HeaderName,
    /// `POSTGRES_DSN`: durable sessions when set.
    pub postgres_dsn: Option<Secret>,
    /// `SVC_ENV`.
    pub env: Environment,
    /// `SVC_LOG_LEVEL` as a tracing filter directive (`debug`, `info`, `warn`, `error`).
    pub log_level: &'static str,
    /// `SVC_LOG_FORMAT`.
    pub log_format: LogFormat,
    /// Tracing export.
    pub otel: OtelConfig,
    /// `SENTRY_DSN`; parsed and kept, reporting is not wired in yet.
    pub sentry_dsn: Option<Secret>,
}

/// Reads one variable; empty and blank values count as unset, as `FOO=` in a compose file means.
struct Vars<'a>(&'a HashMap<String, String>);

impl Vars<'_> {
    fn get(&self, name: &'static str) -> Option<&str> {
        self.0.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    fn parse<T>(
        &self,
        name: &'static str,
        default: T,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<T, ConfigError> {
        match self.get(name) {
            None => Ok(default),
            Some(value) => parse(value).map_err(|reason| ConfigError::new(name, reason)),
        }
    }
}

impl Config {
    /// Parses the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_map(std::env::vars())
    }

    /// Parses a map of variables, applying the defaults and every cross-variable rule.
    pub fn from_map<I, K, V>(vars: I) -> Result<Config, ConfigError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let map: HashMap<String, String> = vars
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        let vars = Vars(&map);

        let env = vars.parse(SVC_ENV, Environment::Development, |v| {
            match v.to_ascii_lowercase().as_str() {
                "development" | "dev" => Ok(Environment::Development),
                "staging" => Ok(Environment::Staging),
                "production" | "prod" => Ok(Environment::Production),
                _ => Err(format!("{v:?} is not development, staging or production")),
            }
        })?;
        let production = env == Environment::Production;

        let port = vars.parse(SVC_PORT, DEFAULT_PORT, parse::positive)?;
        let auth = auth_config(&vars, production)?;
        let redis_url = vars.get(REDIS_URL).map(Secret::new);
        if let Some(url) = &redis_url {
            let scheme_ok = ["redis://", "rediss://", "redis+unix://", "unix://"]
                .iter()
                .any(|s| url.expose().starts_with(s));
            if !scheme_ok {
                return Err(ConfigError::new(
                    REDIS_URL,
                    "must start with redis://, rediss:// or unix://",
                ));
            }
        }
        let rate_limit_rpm =
            vars.parse(SVC_RATE_LIMIT_RPM, DEFAULT_RATE_LIMIT_RPM, parse::positive)?;
        let provider = provider_config(&vars, production)?;
        let max_request_body_bytes = vars.parse(
            SVC_MAX_REQUEST_BODY_BYTES,
            DEFAULT_MAX_REQUEST_BODY_BYTES,
            parse::positive,
        )?;
        let error_docs_base = vars
            .parse(SVC_ERROR_DOCS_BASE, None, |v| http_url(v).map(Some))?
            .map(|v| v.trim_end_matches('/').to_owned());
        let request_id_header = vars.parse(
            SVC_REQUEST_ID_HEADER,
            HeaderName::from_static(DEFAULT_REQUEST_ID_HEADER),
            header_name,
        )?;
        let trace_id_header = vars.parse(
            SVC_TRACE_ID_HEADER,
            HeaderName::from_static(DEFAULT_TRACE_ID_HEADER),
            header_name,
        )?;
        let postgres_dsn = vars.parse(POSTGRES_DSN, None, |v| {
            if v.starts_with("postgres://") || v.starts_with("postgresql://") {
                Ok(Some(Secret::new(v)))
            } else {
                Err("must start with postgres:// or postgresql://".to_owned())
            }
        })?;
        let log_level = vars.parse(SVC_LOG_LEVEL, "info", |v| {
            match v.to_ascii_uppercase().as_str() {
                "DEBUG" => Ok("debug"),
                "INFO" => Ok("info"),
                "WARN" | "WARNING" => Ok("warn"),
                "ERROR" => Ok("error"),
                _ => Err(format!("{v:?} is not DEBUG, INFO, WARN or ERROR")),
            }
        })?;
        let log_format = vars.parse(SVC_LOG_FORMAT, LogFormat::Json, |v| {
            match v.to_ascii_lowercase().as_str() {
                "json" => Ok(LogFormat::Json),
                "text" | "pretty" | "console" => Ok(LogFormat::Text),
                _ => Err(format!("{v:?} is not json or text")),
            }
        })?;
        if production && log_format != LogFormat::Json {
            return Err(ConfigError::new(SVC_LOG_FORMAT, "production requires json"));
        }
        let otel = otel_config(&vars, env)?;
        let sentry_dsn = vars.parse(SENTRY_DSN, None, |v| {
            http_url(v)
                .map(|_| Some(Secret::new(v)))
                .map_err(|_| "must be an http(s) URL".to_owned())
        })?;

        Ok(Config {
            listen: SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)),
            auth,
            redis_url,
            redis_key_prefix: vars
                .get(SVC_REDIS_KEY_PREFIX)
                .unwrap_or_default()
                .to_owned(),
            rate_limit_rpm,
            provider,
            max_request_body_bytes,
            error_docs_base,
            request_id_header,
            trace_id_header,
            postgres_dsn,
            env,
            log_level,
            log_format,
            otel,
            sentry_dsn,
        })
    }
}

fn auth_config(vars: &Vars<'_>, production: bool) -> Result<AuthConfig, ConfigError> {
    let raw = vars
        .get(SVC_AUTH_GRPC_ADDR)
        .ok_or_else(|| ConfigError::new(SVC_AUTH_GRPC_ADDR, "is required (host:port)"))?;
    let (tls, host_port) = if let Some(rest) = raw.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = raw.strip_prefix("http://") {
        (false, rest)
    } else if raw.contains("://") {
        return Err(ConfigError::new(
            SVC_AUTH_GRPC_ADDR,
            "scheme must be http or https",
        ));
    } else {
        (false, raw)
    };
    let host_port = host_port.trim_end_matches('/');
    parse::host_port(host_port).map_err(|reason| ConfigError::new(SVC_AUTH_GRPC_ADDR, reason))?;
    let scheme = if tls { "https" } else { "http" };
    let allow_plaintext = vars.parse(SVC_GRPC_ALLOW_PLAINTEXT, false, parse::boolean)?;
    if production && !tls && !allow_plaintext {
        return Err(ConfigError::new(
            SVC_AUTH_GRPC_ADDR,
            "production requires https:// (or SVC_GRPC_ALLOW_PLAINTEXT=true)",
        ));
    }
    let tls_ca = vars.get(SVC_AUTH_GRPC_TLS_CA).map(str::to_owned);
    if tls && tls_ca.is_none() {
        return Err(ConfigError::new(
            SVC_AUTH_GRPC_TLS_CA,
            "is required with an https:// SVC_AUTH_GRPC_ADDR",
        ));
    }
    let tls_cert = vars.get(SVC_AUTH_GRPC_TLS_CERT).map(str::to_owned);
    let tls_key = vars.get(SVC_AUTH_GRPC_TLS_KEY).map(str::to_owned);
    if tls_cert.is_some() != tls_key.is_some() {
        let missing = if tls_cert.is_none() {
            SVC_AUTH_GRPC_TLS_CERT
        } else {
            SVC_AUTH_GRPC_TLS_KEY
        };
        return Err(ConfigError::new(
            missing,
            "client certificate and key go together",
        ));
    }
    Ok(AuthConfig {
        endpoint: format!("{scheme}://{host_port}"),
        validate_timeout: vars.parse(
            SVC_AUTH_VALIDATE_TIMEOUT,
            DEFAULT_AUTH_VALIDATE_TIMEOUT,
            parse::duration,
        )?,
        tls_ca,
        tls_cert,
        tls_key,
    })
}

fn provider_config(vars: &Vars<'_>, production: bool) -> Result<ProviderConfig, ConfigError> {
    let base_url = vars.parse(SVC_PROVIDER_BASE_URL, None, |v| http_url(v).map(Some))?;
    let explicit_mode = vars.parse(SVC_LLM_MODE, None, |v| {
        match v.to_ascii_lowercase().as_str() {
            "mock" => Ok(Some(LlmMode::Mock)),
            "live" => Ok(Some(LlmMode::Live)),
            _ => Err(format!("{v:?} is not mock or live")),
        }
    })?;
    let mode = match explicit_mode {
        Some(mode) => mode,
        None if base_url.is_some() => LlmMode::Live,
        None if production => {
            return Err(ConfigError::new(
                SVC_LLM_MODE,
                "production refuses an implicit mock provider: set SVC_PROVIDER_BASE_URL or SVC_LLM_MODE=mock",
            ));
        }
        None => LlmMode::Mock,
    };
    if mode == LlmMode::Live && base_url.is_none() {
        return Err(ConfigError::new(
            SVC_PROVIDER_BASE_URL,
            "is required when SVC_LLM_MODE=live",
        ));
    }
    let listed: Vec<String> = vars
        .get(SVC_PROVIDER_MODELS)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|m| !m.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if let Some(bad) = listed
        .iter()
        .find(|m| m.chars().count() > crate::validate::MAX_MODEL_CHARS)
    {
        return Err(ConfigError::new(
            SVC_PROVIDER_MODELS,
            format!("model name {bad:?} is longer than 256 characters"),
        ));
    }
    let models = match (mode, listed.is_empty()) {
        (LlmMode::Mock, true) => vec![DEFAULT_MOCK_MODEL.to_owned()],
        _ => listed,
    };
    Ok(ProviderConfig {
        mode,
        base_url: base_url.map(|u| u.trim_end_matches('/').to_owned()),
        api_key: vars.get(SVC_PROVIDER_API_KEY).map(Secret::new),
        timeout: vars.parse(
            SVC_PROVIDER_TIMEOUT,
            DEFAULT_PROVIDER_TIMEOUT,
            parse::duration,
        )?,
        models,
    })
}

fn otel_config(vars: &Vars<'_>, env: Environment) -> Result<OtelConfig, ConfigError> {
    let endpoint = vars.parse(OTEL_EXPORTER_OTLP_ENDPOINT, None, |v| {
        let host_port = v
            .strip_prefix("http://")
            .or_else(|| v.strip_prefix("https://"))
            .unwrap_or(v)
            .trim_end_matches('/');
        parse::host_port(host_port).map(|()| Some(v.to_owned()))
    })?;
    let sample_ratio = vars.parse(OTEL_SAMPLE_RATIO, DEFAULT_OTEL_SAMPLE_RATIO, |v| match v
        .parse::<f64>()
    {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("{v:?} is not a number between 0 and 1")),
    })?;
    let service_name = vars
        .get(OTEL_SERVICE_NAME)
        .or_else(|| vars.get(SVC_SERVICE_NAME))
        .unwrap_or(DEFAULT_SERVICE_NAME)
        .to_owned();
    let deployment_environment = vars
        .get(OTEL_DEPLOYMENT_ENVIRONMENT)
        .map(str::to_owned)
        .unwrap_or_else(|| env.as_str().to_owned());
    Ok(OtelConfig {
        endpoint,
        sample_ratio,
        service_name,
        deployment_environment,
    })
}

fn http_url(value: &str) -> Result<String, String> {
    let uri: http::Uri = value
        .parse()
        .map_err(|_| format!("{value:?} is not a URL"))?;
    match (uri.scheme_str(), uri.authority()) {
        (Some("http" | "https"), Some(_)) => Ok(value.to_owned()),
        _ => Err(format!("{value:?} is not an http(s) URL")),
    }
}

fn header_name(value: &str) -> Result<HeaderName, String> {
    HeaderName::from_bytes(value.as_bytes()).map_err(|_| format!("{value:?} is not a header name"))
}

#[cfg(test)]
mod tests;
