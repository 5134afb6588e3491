//! `svc-load`: checks SPEC's "Proxy overhead budget target: under 20ms" on this machine.
//!
//! ```sh
//! # svc-auth-server on a fresh PostgreSQL database, rate limit and idempotency in Redis:
//! cargo run --release -p svc-benches --bin svc-load
//! # No servers needed: the embedded SQLite identity store and in-process stores:
//! cargo run --release -p svc-benches --bin svc-load -- --embedded
//! # Every request with a fresh Idempotency-Key (claim and commit on each):
//! cargo run --release -p svc-benches --bin svc-load -- --idempotency
//! ```
//!
//! Everything runs in this process on 127.0.0.1: a fake OpenAI-compatible upstream that
//! answers a fixed completion at once, the real auth server and the real gateway in live mode
//! pointed at that upstream. The same small chat completion is sent `--requests` times (2000)
//! over `--concurrency` (8) keep-alive HTTP/1.1 connections, first straight to the upstream,
//! then through the gateway, after `--warmup` (100) unmeasured ones each; `--max-seconds` (60)
//! bounds the load in time, half for each target. The report gives p50, p90, p99, max and requests per second of
//! both, the added latency (gateway minus direct) at p50 and p99, and PASS or FAIL against
//! 20 ms at p99. Then everything is stopped and the database, Redis keys or temporary
//! directory of the run are removed.
//!
//! Options: `--embedded`, `--requests N`, `--concurrency C`, `--warmup W`, `--max-seconds S`,
//! `--idempotency`, `--sessions` (the gateway also records durable sessions; PostgreSQL mode),
//! `--help`. Environment: `SVC_TEST_POSTGRES_URL` (maintenance database, default
//! `postgres://postgres@127.0.0.1:5432/postgres`) and `REDIS_URL` (default
//! `redis://127.0.0.1:6379`), both refused unless on this machine; `SVC_LOG_LEVEL` (default
//! WARN) for the services' log lines on stderr.
//!
//! Exit status: 0 PASS; 1 FAIL (a request failed, or the added p99 is not under 20 ms);
//! 2 bad arguments, the stack did not start, or Ctrl-C or SIGTERM stopped the run (which still
//! removes its database and Redis keys).
//!
//! Build it in release: a debug build measures the compiler's unoptimised code, not the
//! gateway.

use std::collections::HashMap;
use std::process::ExitCode;

use svc_benches::load::{self, LoadArgs};
use svc_runtime::config::Vars;
use svc_runtime::telemetry::{LogSettings, SVC_LOG_FORMAT, SVC_LOG_LEVEL, subscriber};

const EXIT_FAIL: u8 = 1;
const EXIT_USAGE: u8 = 2;

#[tokio::main]
async fn main() -> ExitCode {
    let config = svc_runtime::cli::parse::<LoadArgs>().config();
    // Variables that are not UTF-8 are none of ours.
    let env: HashMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    if let Err(error) = init_logs(env) {
        eprintln!("svc-load: {error}");
        return ExitCode::from(EXIT_USAGE);
    }
    if cfg!(debug_assertions) {
        eprintln!("svc-load: a debug build; run with --release for figures worth comparing");
    }
    eprintln!(
        "svc-load: starting the {} stack, then {} requests per target",
        config.mode.name(),
        config.requests
    );
    match load::run(&config).await {
        Ok(report) => {
            print!("{report}");
            if report.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_FAIL)
            }
        }
        Err(error) => {
            eprintln!("svc-load: {}", one_line(&error));
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// The services' own log lines, as text on stderr, WARN unless `SVC_LOG_LEVEL` says otherwise:
/// stdout carries only the report.
fn init_logs(env: HashMap<String, String>) -> Result<(), String> {
    let mut vars: Vec<(String, String)> = env.into_iter().collect();
    for (name, default) in [(SVC_LOG_LEVEL, "WARN"), (SVC_LOG_FORMAT, "text")] {
        if !vars.iter().any(|(k, v)| k == name && !v.trim().is_empty()) {
            vars.push((name.to_owned(), default.to_owned()));
        }
    }
    let settings = LogSettings::from_vars(&Vars::from_pairs(vars)).map_err(|e| e.to_string())?;
    tracing::subscriber::set_global_default(subscriber(&settings, std::io::stderr))
        .map_err(|e| e.to_string())
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
