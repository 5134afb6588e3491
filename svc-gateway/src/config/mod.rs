//! Gateway configuration: every variable read once, at start, from a map.
//!
//! [`Config::from_vars`] takes the variables as a map ([`Vars`]) so tests never touch the
//! process environment; [`Config::from_env`] is the thin wrapper `main` uses (it skips values
//! that are not UTF-8 instead of panicking). A bad value yields the [`ConfigError`] every svc
//! binary uses, naming the variable, which `main` prints on one line before exiting with
//! [`EXIT_CONFIG`].

mod parse;
pub mod providers;
mod sections;
mod types;
mod vars;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use http::HeaderName;

pub use svc_runtime::Secret;
pub use svc_runtime::auth_client::AuthClientConfig as AuthConfig;
pub use svc_runtime::config::{ConfigError, Environment, Vars};
pub use svc_runtime::http_server::HttpSettings;
pub use svc_runtime::telemetry::otel::OtelSettings;
pub use svc_runtime::telemetry::{LogFormat, LogLevel, LogSettings};
pub use types::{LlmMode, ProviderConfig};
pub use vars::*;

use sections::{header_name, http_url, provider_config};

/// The process exit code for a configuration error.
pub const EXIT_CONFIG: i32 = svc_runtime::config::EXIT_CONFIG as i32;

/// Default `SVC_PORT`.
pub const DEFAULT_PORT: u16 = 8080;
/// Default `SVC_AUTH_VALIDATE_TIMEOUT`: the production budget of one ValidateToken call.
pub const DEFAULT_AUTH_VALIDATE_TIMEOUT: Duration = Duration::from_millis(50);
/// Default `SVC_RATE_LIMIT_RPM`.
pub const DEFAULT_RATE_LIMIT_RPM: u32 = 600;
/// Default `SVC_AUTH_REFUSAL_DELAY`.
pub const DEFAULT_AUTH_REFUSAL_DELAY: Duration = Duration::from_millis(100);
/// Default `SVC_AUTH_FAILURES_PER_MINUTE`.
pub const DEFAULT_AUTH_FAILURES_PER_MINUTE: u32 = 60;
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
/// Default service name for traces and logs.
pub const DEFAULT_SERVICE_NAME: &str = "svc-gateway";

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
    /// `SVC_RATE_LIMIT_TPM`: tokens per minute per org; `None` is no org token limit.
    pub rate_limit_tpm: Option<u64>,
    /// `SVC_RATE_LIMIT_DEFAULT_COMPLETION_TOKENS`: what a request without a maximum reserves.
    pub default_completion_tokens: u64,
    /// `SVC_RATE_LIMIT_TPM_TIMEOUT`: a reservation's wait on the store before failing open.
    pub rate_limit_tpm_timeout: Duration,
    /// `SVC_BUDGET_FAIL_OPEN`: let budgeted calls through when the store cannot be reached.
    pub budget_fail_open: bool,
    /// Rejected tokens per client address per minute; 0 disables the limit.
    pub auth_failures_per_minute: u32,
    /// `SVC_AUTH_REFUSAL_DELAY`: how long after its arrival a refused request is answered.
    pub auth_refusal_delay: Duration,
    /// Where the client address comes from when a trusted proxy sets it.
    pub trusted_proxy_header: Option<HeaderName>,
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
    /// `POSTGRES_DSN`: durable sessions and the usage ledger when set.
    pub postgres_dsn: Option<Secret>,
    /// `SVC_LEDGER_BUFFER`: usage records queued at most.
    pub ledger_buffer: usize,
    /// `SVC_LEDGER_BATCH`: usage records per write.
    pub ledger_batch: usize,
    /// `SVC_ENV`.
    pub env: Environment,
    /// `SVC_LOG_LEVEL` and `SVC_LOG_FORMAT`.
    pub log: LogSettings,
    /// `SVC_ACCESS_LOG`: one line per request at INFO (default true).
    pub access_log: bool,
    /// Tracing export.
    pub otel: OtelSettings,
    /// `SVC_TRUST_INBOUND_SAMPLING`: follow the sampled flag of a client's `traceparent`.
    /// Off by default: the gateway is the edge, and an internet client must not be able to
    /// force trace export through every service behind it.
    pub trust_inbound_sampling: bool,
    /// `SENTRY_DSN`: a checked Sentry DSN; 5xx answers and panics are reported there.
    pub sentry_dsn: Option<Secret>,
    /// `SVC_HTTP_*`, `SVC_WRITE_TIMEOUT`, `SVC_BODY_READ_TIMEOUT`,
    /// `SVC_MAX_CONNECTIONS_PER_ADDRESS` and `SVC_SHUTDOWN_GRACE`: the listener's timeouts,
    /// caps and drain.
    pub http: HttpSettings,
    /// `SVC_WORKER_THREADS`: the runtime's workers.
    pub worker_threads: usize,
}

impl Config {
    /// Parses the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_vars(&Vars::from_env())
    }

    /// Parses name/value pairs (see [`Config::from_vars`]).
    pub fn from_map<I, K, V>(vars: I) -> Result<Config, ConfigError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        Config::from_vars(&Vars::from_pairs(vars))
    }

    /// Parses a map of variables, applying the defaults and every cross-variable rule.
    pub fn from_vars(vars: &Vars) -> Result<Config, ConfigError> {
        let env = vars.parse_or(SVC_ENV, Environment::Development, Environment::parse)?;
        let production = env == Environment::Production;

        let port = vars.parse_or(SVC_PORT, DEFAULT_PORT, parse::positive)?;
        let auth = AuthConfig::from_vars(vars, production, DEFAULT_AUTH_VALIDATE_TIMEOUT)?;
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
            vars.parse_or(SVC_RATE_LIMIT_RPM, DEFAULT_RATE_LIMIT_RPM, parse::positive)?;
        let rate_limit_tpm =
            vars.parse_or(SVC_RATE_LIMIT_TPM, None, |v| parse::positive(v).map(Some))?;
        let default_completion_tokens = vars.parse_or(
            SVC_RATE_LIMIT_DEFAULT_COMPLETION_TOKENS,
            crate::accounting::hold::DEFAULT_COMPLETION_TOKENS,
            parse::positive,
        )?;
        let rate_limit_tpm_timeout = vars.parse_or(
            SVC_RATE_LIMIT_TPM_TIMEOUT,
            crate::accounting::hold::DEFAULT_TIMEOUT,
            parse::duration,
        )?;
        let budget_fail_open =
            vars.parse_or(SVC_BUDGET_FAIL_OPEN, false, svc_runtime::config::parse_bool)?;
        let auth_failures_per_minute = vars.parse_or(
            SVC_AUTH_FAILURES_PER_MINUTE,
            DEFAULT_AUTH_FAILURES_PER_MINUTE,
            |v| {
                v.parse()
                    .map_err(|_| format!("{v:?} is not a whole number"))
            },
        )?;
        let auth_refusal_delay =
            vars.parse_or(SVC_AUTH_REFUSAL_DELAY, DEFAULT_AUTH_REFUSAL_DELAY, |v| {
                match svc_runtime::config::parse_duration(v.trim())? {
                    delay if delay > Duration::from_secs(10) => {
                        Err(format!("{v:?} is more than 10s"))
                    }
                    delay => Ok(delay),
                }
            })?;
        let trusted_proxy_header =
            vars.parse_or(SVC_TRUSTED_PROXY_HEADER, None, |v| header_name(v).map(Some))?;
        let provider = provider_config(vars, production)?;
        let max_request_body_bytes = vars.parse_or(
            SVC_MAX_REQUEST_BODY_BYTES,
            DEFAULT_MAX_REQUEST_BODY_BYTES,
            parse::positive,
        )?;
        let error_docs_base = vars
            .parse_or(SVC_ERROR_DOCS_BASE, None, |v| http_url(v).map(Some))?
            .map(|v| v.trim_end_matches('/').to_owned());
        let request_id_header = vars.parse_or(
            SVC_REQUEST_ID_HEADER,
            HeaderName::from_static(DEFAULT_REQUEST_ID_HEADER),
            header_name,
        )?;
        let trace_id_header = vars.parse_or(
            SVC_TRACE_ID_HEADER,
            HeaderName::from_static(DEFAULT_TRACE_ID_HEADER),
            header_name,
        )?;
        let postgres_dsn = vars.parse_or(POSTGRES_DSN, None, |v| {
            if v.starts_with("postgres://") || v.starts_with("postgresql://") {
                Ok(Some(Secret::new(v)))
            } else {
                Err("must start with postgres:// or postgresql://".to_owned())
            }
        })?;
        let ledger_buffer = vars.parse_or(
            SVC_LEDGER_BUFFER,
            crate::ledger::DEFAULT_BUFFER,
            parse::positive,
        )?;
        let ledger_batch = vars.parse_or(
            SVC_LEDGER_BATCH,
            crate::ledger::DEFAULT_BATCH,
            parse::positive,
        )?;
        let log = LogSettings::from_vars(vars)?;
        if production && log.format != LogFormat::Json {
            return Err(ConfigError::new(SVC_LOG_FORMAT, "production requires json"));
        }
        let access_log = vars.parse_or(SVC_ACCESS_LOG, true, svc_runtime::config::parse_bool)?;
        let otel = OtelSettings::from_vars(vars, DEFAULT_SERVICE_NAME, env)?;
        let trust_inbound_sampling = vars.parse_or(
            SVC_TRUST_INBOUND_SAMPLING,
            false,
            svc_runtime::config::parse_bool,
        )?;
        let sentry_dsn = vars.parse_or(SENTRY_DSN, None, svc_runtime::error_report::parse_dsn)?;

        let http = HttpSettings::from_vars(vars)?;

        Ok(Config {
            listen: SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)),
            auth,
            redis_url,
            redis_key_prefix: vars
                .get(SVC_REDIS_KEY_PREFIX)
                .unwrap_or_default()
                .to_owned(),
            rate_limit_rpm,
            rate_limit_tpm,
            default_completion_tokens,
            rate_limit_tpm_timeout,
            budget_fail_open,
            auth_failures_per_minute,
            auth_refusal_delay,
            trusted_proxy_header,
            provider,
            max_request_body_bytes,
            error_docs_base,
            request_id_header,
            trace_id_header,
            postgres_dsn,
            ledger_buffer,
            ledger_batch,
            env,
            log,
            access_log,
            otel,
            trust_inbound_sampling,
            sentry_dsn,
            http,
            worker_threads: svc_runtime::runtime::worker_threads(vars)?,
        })
    }
}

#[cfg(test)]
mod tests;
