//! The name of every variable the gateway reads; [`EVERY_VARIABLE`] is the list `--help`
//! prints.

pub use svc_runtime::auth_client::{
    SVC_AUTH_GRPC_ADDR, SVC_AUTH_GRPC_TLS_CA, SVC_AUTH_GRPC_TLS_CERT, SVC_AUTH_GRPC_TLS_KEY,
    SVC_AUTH_VALIDATE_TIMEOUT, SVC_GRPC_ALLOW_PLAINTEXT,
};
pub use svc_runtime::http_server::{
    SVC_BODY_READ_TIMEOUT, SVC_HTTP_HEADER_READ_TIMEOUT, SVC_HTTP_IDLE_TIMEOUT,
    SVC_HTTP_MAX_CONNECTIONS, SVC_MAX_CONNECTIONS_PER_ADDRESS, SVC_SHUTDOWN_GRACE,
    SVC_WRITE_TIMEOUT,
};

svc_runtime::variables! {
    /// Completion tokens a request that names no maximum reserves against the tokens limit.
    SVC_RATE_LIMIT_DEFAULT_COMPLETION_TOKENS;
    /// HTTP port.
    SVC_PORT;
    /// Redis URL for rate limits and idempotency; empty means no-op limiter, in-process store.
    REDIS_URL;
    /// Prefix of every Redis key (empty by default; lets deployments or tests share a server).
    SVC_REDIS_KEY_PREFIX;
    /// Requests per minute per org.
    SVC_RATE_LIMIT_RPM;
    /// Tokens (prompt and completion) per minute per org; unset means no token limit.
    SVC_RATE_LIMIT_TPM;
    /// How long a tokens-per-minute reservation may wait on the store before failing open.
    SVC_RATE_LIMIT_TPM_TIMEOUT;
    /// `true` lets a call a budget applies to through, unmetered, when Redis cannot be
    /// reached; `false` (default) refuses it with 503 BUDGET_UNAVAILABLE.
    SVC_BUDGET_FAIL_OPEN;
    /// Rejected tokens per client address per minute before 429 (0 disables).
    SVC_AUTH_FAILURES_PER_MINUTE;
    /// How long after its arrival a refused request (401, 429 of the failure limit, 503) is
    /// answered; 0 answers at once.
    SVC_AUTH_REFUSAL_DELAY;
    /// Header a trusted proxy sets to the client address (unset: the socket's address).
    SVC_TRUSTED_PROXY_HEADER;
    /// `mock` or `live`.
    SVC_LLM_MODE;
    /// OpenAI-compatible base URL, e.g. `https://api.openai.com/v1`.
    SVC_PROVIDER_BASE_URL;
    /// The provider's API key.
    SVC_PROVIDER_API_KEY;
    /// Deadline of one provider call (duration).
    SVC_PROVIDER_TIMEOUT;
    /// Follow the sampled flag of a client's `traceparent` (default false: the edge decides).
    SVC_TRUST_INBOUND_SAMPLING;
    /// Production accepts an `http://` provider base URL only when true.
    SVC_PROVIDER_ALLOW_HTTP;
    /// A TOML provider registry; replaces the single-provider variables.
    SVC_PROVIDERS_FILE;
    /// Comma-separated model registry.
    SVC_PROVIDER_MODELS;
    /// Maximum request body in bytes.
    SVC_MAX_REQUEST_BODY_BYTES;
    /// Base URL of the error documentation; envelopes carry `docs_url` when set.
    SVC_ERROR_DOCS_BASE;
    /// Name of the request-id response header.
    SVC_REQUEST_ID_HEADER;
    /// Name of the trace-id response header.
    SVC_TRACE_ID_HEADER;
    /// Usage ledger records queued at most while the database is away; past it they are dropped.
    SVC_LEDGER_BUFFER;
    /// Usage ledger records per batch write.
    SVC_LEDGER_BATCH;
    /// PostgreSQL DSN for durable sessions.
    POSTGRES_DSN;
    /// `development`, `staging` or `production`.
    SVC_ENV;
    /// `DEBUG`, `INFO`, `WARN` or `ERROR`.
    SVC_LOG_LEVEL;
    /// `true` (default) or `false`: one access-log line per request at INFO.
    SVC_ACCESS_LOG;
    /// `json` or `text`.
    SVC_LOG_FORMAT;
    /// Fallback service name.
    SVC_SERVICE_NAME;
    /// OTLP gRPC collector, `host:port`, or `https://host:port` over TLS; empty means no export.
    OTEL_EXPORTER_OTLP_ENDPOINT;
    /// PEM CA certificates also trusted for an `https://` collector.
    OTEL_EXPORTER_OTLP_CERTIFICATE;
    /// Root sampling ratio.
    OTEL_SAMPLE_RATIO;
    /// Service name on traces.
    OTEL_SERVICE_NAME;
    /// Deployment environment on traces.
    OTEL_DEPLOYMENT_ENVIRONMENT;
    /// Sentry DSN.
    SENTRY_DSN;
}

/// Every variable the gateway reads, by the modules that declare them: its `--help` lists them.
pub const EVERY_VARIABLE: &[&[svc_runtime::config::Variable]] = &[
    VARIABLES,
    svc_runtime::auth_client::VARIABLES,
    svc_runtime::http_server::VARIABLES,
    svc_runtime::runtime::VARIABLES,
];
