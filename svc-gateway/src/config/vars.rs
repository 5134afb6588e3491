//! The name of every variable the gateway reads.

pub use svc_runtime::auth_client::{
    SVC_AUTH_GRPC_ADDR, SVC_AUTH_GRPC_TLS_CA, SVC_AUTH_GRPC_TLS_CERT, SVC_AUTH_GRPC_TLS_KEY,
    SVC_AUTH_VALIDATE_TIMEOUT, SVC_GRPC_ALLOW_PLAINTEXT,
};
pub use svc_runtime::http_server::{
    SVC_BODY_READ_TIMEOUT, SVC_HTTP_HEADER_READ_TIMEOUT, SVC_HTTP_IDLE_TIMEOUT,
    SVC_HTTP_MAX_CONNECTIONS, SVC_MAX_CONNECTIONS_PER_ADDRESS, SVC_SHUTDOWN_GRACE,
    SVC_WRITE_TIMEOUT,
};

/// HTTP port.
pub const SVC_PORT: &str = "SVC_PORT";
/// Redis URL for rate limits and idempotency; empty means no-op limiter, in-process store.
pub const REDIS_URL: &str = "REDIS_URL";
/// Prefix of every Redis key (empty by default; lets deployments or tests share a server).
pub const SVC_REDIS_KEY_PREFIX: &str = "SVC_REDIS_KEY_PREFIX";
/// Requests per minute per org.
pub const SVC_RATE_LIMIT_RPM: &str = "SVC_RATE_LIMIT_RPM";
/// Tokens (prompt and completion) per minute per org; unset means no token limit.
pub const SVC_RATE_LIMIT_TPM: &str = "SVC_RATE_LIMIT_TPM";
/// Completion tokens a request that names no maximum reserves against the tokens limit.
pub const SVC_RATE_LIMIT_DEFAULT_COMPLETION_TOKENS: &str =
    "SVC_RATE_LIMIT_DEFAULT_COMPLETION_TOKENS";
/// How long a tokens-per-minute reservation may wait on the store before failing open.
pub const SVC_RATE_LIMIT_TPM_TIMEOUT: &str = "SVC_RATE_LIMIT_TPM_TIMEOUT";
/// Rejected tokens per client address per minute before 429 (0 disables).
pub const SVC_AUTH_FAILURES_PER_MINUTE: &str = "SVC_AUTH_FAILURES_PER_MINUTE";
/// How long after its arrival a refused request (401, 429 of the failure limit, 503) is
/// answered; 0 answers at once.
pub const SVC_AUTH_REFUSAL_DELAY: &str = "SVC_AUTH_REFUSAL_DELAY";
/// Header a trusted proxy sets to the client address (unset: the socket's address).
pub const SVC_TRUSTED_PROXY_HEADER: &str = "SVC_TRUSTED_PROXY_HEADER";
/// `mock` or `live`.
pub const SVC_LLM_MODE: &str = "SVC_LLM_MODE";
/// OpenAI-compatible base URL, e.g. `https://api.openai.com/v1`.
pub const SVC_PROVIDER_BASE_URL: &str = "SVC_PROVIDER_BASE_URL";
/// The provider's API key.
pub const SVC_PROVIDER_API_KEY: &str = "SVC_PROVIDER_API_KEY";
/// Deadline of one provider call (duration).
pub const SVC_PROVIDER_TIMEOUT: &str = "SVC_PROVIDER_TIMEOUT";
/// Follow the sampled flag of a client's `traceparent` (default false: the edge decides).
pub const SVC_TRUST_INBOUND_SAMPLING: &str = "SVC_TRUST_INBOUND_SAMPLING";
/// Production accepts an `http://` provider base URL only when true.
pub const SVC_PROVIDER_ALLOW_HTTP: &str = "SVC_PROVIDER_ALLOW_HTTP";
/// A TOML provider registry; replaces the single-provider variables.
pub const SVC_PROVIDERS_FILE: &str = "SVC_PROVIDERS_FILE";
/// Comma-separated model registry.
pub const SVC_PROVIDER_MODELS: &str = "SVC_PROVIDER_MODELS";
/// Maximum request body in bytes.
pub const SVC_MAX_REQUEST_BODY_BYTES: &str = "SVC_MAX_REQUEST_BODY_BYTES";
/// Base URL of the error documentation; envelopes carry `docs_url` when set.
pub const SVC_ERROR_DOCS_BASE: &str = "SVC_ERROR_DOCS_BASE";
/// Name of the request-id response header.
pub const SVC_REQUEST_ID_HEADER: &str = "SVC_REQUEST_ID_HEADER";
/// Name of the trace-id response header.
pub const SVC_TRACE_ID_HEADER: &str = "SVC_TRACE_ID_HEADER";
/// Usage ledger records queued at most while the database is away; past it they are dropped.
pub const SVC_LEDGER_BUFFER: &str = "SVC_LEDGER_BUFFER";
/// Usage ledger records per batch write.
pub const SVC_LEDGER_BATCH: &str = "SVC_LEDGER_BATCH";
/// PostgreSQL DSN for durable sessions.
pub const POSTGRES_DSN: &str = "POSTGRES_DSN";
/// `development`, `staging` or `production`.
pub const SVC_ENV: &str = "SVC_ENV";
/// `DEBUG`, `INFO`, `WARN` or `ERROR`.
pub const SVC_LOG_LEVEL: &str = "SVC_LOG_LEVEL";
/// `true` (default) or `false`: one access-log line per request at INFO.
pub const SVC_ACCESS_LOG: &str = "SVC_ACCESS_LOG";
/// `json` or `text`.
pub const SVC_LOG_FORMAT: &str = "SVC_LOG_FORMAT";
/// Fallback service name.
pub const SVC_SERVICE_NAME: &str = "SVC_SERVICE_NAME";
/// OTLP gRPC collector, `host:port`, or `https://host:port` over TLS; empty means no export.
pub const OTEL_EXPORTER_OTLP_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// PEM CA certificates also trusted for an `https://` collector.
pub const OTEL_EXPORTER_OTLP_CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_CERTIFICATE";
/// Root sampling ratio.
pub const OTEL_SAMPLE_RATIO: &str = "OTEL_SAMPLE_RATIO";
/// Service name on traces.
pub const OTEL_SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
/// Deployment environment on traces.
pub const OTEL_DEPLOYMENT_ENVIRONMENT: &str = "OTEL_DEPLOYMENT_ENVIRONMENT";
/// Sentry DSN.
pub const SENTRY_DSN: &str = "SENTRY_DSN";
