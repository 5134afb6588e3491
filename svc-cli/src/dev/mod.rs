//! `svc dev`: the whole service in one process, with no PostgreSQL and no Redis.
//!
//! ```sh
//! cargo run -p svc-cli -- dev
//! ```
//!
//! | part | in dev mode |
//! |---|---|
//! | identity | svc-auth-server's AuthService over the embedded SQLite store (`identity.db`, WAL) |
//! | auth gRPC | loopback, an ephemeral port (or `SVC_GRPC_PORT`), plaintext |
//! | gateway | the normal stack on `SVC_PORT` (default 8080), bound to 127.0.0.1 (`SVC_BIND_ADDR`) |
//! | rate limit | in process, exact for one replica (`SVC_RATE_LIMIT_RPM`) |
//! | idempotency | in process |
//! | provider | the mock (`svc-mock-1`) unless `SVC_LLM_MODE` / `SVC_PROVIDER_BASE_URL` say otherwise |
//! | ValidateToken budget | 2 s (SPEC Limits: local hashing may need about 2 s); `SVC_AUTH_VALIDATE_TIMEOUT` overrides |
//! | logs | text on stderr (`SVC_LOG_LEVEL`, `SVC_LOG_FORMAT`); stdout carries only the banner |
//!
//! Data lives in `SVC_DEV_DATA_DIR` (default `.svc-dev/` in the current directory): the database
//! and `dev-state.json`, which names the dev org, its owner, an active agent and an admin token
//! so a restart reuses them. Each start mints a fresh chat token bound to that agent and prints
//! it with the agent id, a curl command and an OpenAI Python SDK snippet. `REDIS_URL` and
//! `POSTGRES_DSN` are ignored (with a warning). `SVC_ENV=production` is refused with one line
//! and exit code 2.
//!
//! Readiness: SPEC's proxy `/ready` checks `auth_grpc` and `redis`, and an empty `REDIS_URL`
//! makes it 503. Dev mode has no Redis to reach: its rate-limit and idempotency state lives in
//! this process and cannot be unreachable. So `/ready` here runs `auth_grpc` (ValidateToken over
//! the loopback channel, as in production) and `sqlite` (a trivial query on the embedded store),
//! and answers 200 when both pass.

mod banner;
mod config;
mod identity;
mod server;

use std::io::Write;

pub use banner::{CURL_PREFIX, banner, curl, python};
pub use config::{
    DEFAULT_DATA_DIR, DEV_VALIDATE_TIMEOUT, DevConfig, DevConfigError, SVC_BIND_ADDR,
    SVC_DEV_DATA_DIR, SVC_GRPC_PORT,
};
pub use identity::{DevIdentity, IdentityError, prepare};
pub use server::{DevServer, DevStartError};

use svc_gateway::config::EXIT_CONFIG;

/// The exit code when the stack fails to start.
pub const EXIT_START: i32 = 1;

/// Runs `svc dev` until SIGINT or SIGTERM; returns the process exit code.
pub async fn main() -> i32 {
    // Variables that are not UTF-8 are none of ours.
    let vars: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let config = match DevConfig::from_map(vars.clone()) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("error: {error}");
            return EXIT_CONFIG;
        }
    };
    if let Err(error) = init_logs(vars) {
        eprintln!("error: {error}");
        return EXIT_CONFIG;
    }
    for variable in &config.ignored {
        tracing::warn!(variable, "ignored by svc dev, which runs without it");
    }

    let server = match DevServer::start(config).await {
        Ok(server) => server,
        Err(error) => {
            eprintln!("error: svc dev: {}", one_line(&error));
            return EXIT_START;
        }
    };
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(banner(&server).as_bytes());
    let _ = stdout.flush();
    drop(stdout);
    tracing::info!(
        http = %server.http_addr,
        grpc = %server.grpc_addr,
        org_id = %server.identity.org_id,
        agent_id = %server.identity.agent_id,
        reused = server.identity.reused,
        "svc dev serving"
    );

    svc_runtime::shutdown::shutdown_signal().await;
    tracing::info!("shutting down");
    server.shutdown().await;
    0
}

/// Text lines on stderr unless `SVC_LOG_FORMAT` asks otherwise: stdout is the banner's.
fn init_logs(mut vars: Vec<(String, String)>) -> Result<(), String> {
    use svc_runtime::config::Vars;
    use svc_runtime::telemetry::{LogSettings, SVC_LOG_FORMAT, subscriber};

    if !vars
        .iter()
        .any(|(k, v)| k == SVC_LOG_FORMAT && !v.trim().is_empty())
    {
        vars.push((SVC_LOG_FORMAT.to_owned(), "text".to_owned()));
    }
    let settings = LogSettings::from_vars(&Vars::from_pairs(vars)).map_err(|e| e.to_string())?;
    // A subscriber installed already (an embedding program's) stays.
    let _ = tracing::subscriber::set_global_default(subscriber(&settings, std::io::stderr));
    Ok(())
}

/// An error and its causes on one line.
fn one_line(error: &dyn std::error::Error) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        line.push_str(": ");
        line.push_str(&cause.to_string());
        source = cause.source();
    }
    line
}
