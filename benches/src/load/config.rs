//! The harness's settings: command-line flags, and the two variables naming the servers
//! (or their flags).

use std::time::Duration;

use clap::Parser;
use svc_runtime::cli::{HELP_TEMPLATE, environment_help};

use super::report::OVERHEAD_BUDGET;

/// The PostgreSQL server's maintenance-database URL (a fresh database is created beside it).
pub const SVC_TEST_POSTGRES_URL: &str = "SVC_TEST_POSTGRES_URL";
/// The Redis server of the PostgreSQL mode.
pub const REDIS_URL: &str = "REDIS_URL";
pub use crate::harness::{DEFAULT_POSTGRES_URL, DEFAULT_REDIS_URL};

/// Default `--requests`.
pub const DEFAULT_REQUESTS: usize = 2000;
/// Default `--concurrency`.
pub const DEFAULT_CONCURRENCY: usize = 8;
/// Default `--warmup`.
pub const DEFAULT_WARMUP: usize = 100;
/// Default `--max-seconds`.
pub const DEFAULT_MAX_SECONDS: u64 = 60;

const MAX_REQUESTS: usize = 1_000_000;
const MAX_CONCURRENCY: usize = 256;
const MAX_SECONDS: u64 = 3600;

/// Which identity plane and shared stores the gateway runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// svc-auth-server over a fresh PostgreSQL database; rate limit and idempotency in Redis.
    Postgres,
    /// `svc-gateway dev`'s stack: SQLite identity, rate limit and idempotency in process.
    Embedded,
}

impl Mode {
    /// A short name for the report.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Postgres => "postgres",
            Mode::Embedded => "embedded",
        }
    }

    /// What runs in this mode, for the report.
    pub fn describe(self) -> &'static str {
        match self {
            Mode::Postgres => "auth server on a fresh PostgreSQL database, Redis stores",
            Mode::Embedded => "auth server on embedded SQLite, in-process stores",
        }
    }
}

/// Everything a run needs. Its `Debug` omits the server URLs, which may carry passwords.
#[derive(Clone, PartialEq, Eq)]
pub struct LoadConfig {
    /// Which stack runs.
    pub mode: Mode,
    /// Measured requests per target.
    pub requests: usize,
    /// Connections per target, each with one request in flight.
    pub concurrency: usize,
    /// Unmeasured requests per target before the measured ones.
    pub warmup: usize,
    /// The load's bound in time: each target stops sending new requests after half of it.
    pub max_time: Duration,
    /// A fresh `Idempotency-Key` on every request.
    pub idempotency: bool,
    /// The gateway records durable sessions (PostgreSQL mode only).
    pub sessions: bool,
    /// The p99 budget for the added latency.
    pub budget: Duration,
    /// PostgreSQL maintenance-database URL (PostgreSQL mode).
    pub postgres_url: String,
    /// Redis URL (PostgreSQL mode).
    pub redis_url: String,
}

impl std::fmt::Debug for LoadConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadConfig")
            .field("mode", &self.mode)
            .field("requests", &self.requests)
            .field("concurrency", &self.concurrency)
            .field("warmup", &self.warmup)
            .field("max_time", &self.max_time)
            .field("idempotency", &self.idempotency)
            .field("sessions", &self.sessions)
            .field("budget", &self.budget)
            .field("postgres_url", &"<omitted>")
            .field("redis_url", &"<omitted>")
            .finish()
    }
}

impl Default for LoadConfig {
    fn default() -> Self {
        LoadConfig {
            mode: Mode::Postgres,
            requests: DEFAULT_REQUESTS,
            concurrency: DEFAULT_CONCURRENCY,
            warmup: DEFAULT_WARMUP,
            max_time: Duration::from_secs(DEFAULT_MAX_SECONDS),
            idempotency: false,
            sessions: false,
            budget: OVERHEAD_BUDGET,
            postgres_url: DEFAULT_POSTGRES_URL.to_owned(),
            redis_url: DEFAULT_REDIS_URL.to_owned(),
        }
    }
}

/// `svc-load`'s command line.
#[derive(Debug, Clone, PartialEq, Eq, Parser)]
#[command(
    name = "svc-load",
    version,
    about = "Starts a fake upstream, the auth server and the gateway in this process, sends the \
             same chat completion to the upstream directly and through the gateway, and prints \
             latency percentiles, throughput and the added latency against SPEC's 20 ms budget \
             at p99.",
    help_template = HELP_TEMPLATE,
    after_help = after_help(),
)]
pub struct LoadArgs {
    /// Embedded SQLite identity store, in-process rate limit and idempotency (default: a fresh
    /// PostgreSQL database and Redis under a random key prefix)
    #[arg(long)]
    embedded: bool,
    /// Measured requests per target
    #[arg(long, value_name = "N", default_value_t = DEFAULT_REQUESTS,
          value_parser = in_range(1, MAX_REQUESTS))]
    requests: usize,
    /// Connections, each with one request in flight
    #[arg(long, value_name = "C", default_value_t = DEFAULT_CONCURRENCY,
          value_parser = in_range(1, MAX_CONCURRENCY))]
    concurrency: usize,
    /// Unmeasured requests per target first
    #[arg(long, value_name = "W", default_value_t = DEFAULT_WARMUP,
          value_parser = in_range(0, MAX_REQUESTS))]
    warmup: usize,
    /// Bound on the load, half for each target
    #[arg(long, value_name = "S", default_value_t = DEFAULT_MAX_SECONDS as usize,
          value_parser = in_range(1, MAX_SECONDS as usize))]
    max_seconds: usize,
    /// A fresh Idempotency-Key on every request
    #[arg(long)]
    idempotency: bool,
    /// The gateway records durable sessions in the database (PostgreSQL mode)
    #[arg(long, conflicts_with = "embedded")]
    sessions: bool,
    /// The PostgreSQL maintenance database; must be on this machine
    #[arg(long, env = SVC_TEST_POSTGRES_URL, value_name = "URL", hide_env_values = true)]
    postgres_url: Option<String>,
    /// The Redis server; must be on this machine
    #[arg(long, env = REDIS_URL, value_name = "URL", hide_env_values = true)]
    redis_url: Option<String>,
}

fn after_help() -> String {
    format!(
        "{}\nExit status: 0 PASS, 1 FAIL (a failed request, or the added p99 not under 20 ms), \
         2 bad arguments, the stack did not start, or Ctrl-C (the run's database and keys are \
         still removed).",
        environment_help(&[svc_runtime::telemetry::VARIABLES])
    )
}

/// A parser of a count in `min..=max`.
fn in_range(min: usize, max: usize) -> impl Fn(&str) -> Result<usize, String> + Clone {
    move |value| {
        value
            .parse::<usize>()
            .ok()
            .filter(|n| (min..=max).contains(n))
            .ok_or_else(|| format!("{value:?} is not a number in {min}..={max}"))
    }
}

impl LoadArgs {
    /// The run these arguments ask for.
    pub fn config(self) -> LoadConfig {
        LoadConfig {
            mode: if self.embedded {
                Mode::Embedded
            } else {
                Mode::Postgres
            },
            requests: self.requests,
            concurrency: self.concurrency,
            warmup: self.warmup,
            max_time: Duration::from_secs(self.max_seconds as u64),
            idempotency: self.idempotency,
            sessions: self.sessions,
            budget: OVERHEAD_BUDGET,
            postgres_url: non_empty(self.postgres_url, DEFAULT_POSTGRES_URL),
            redis_url: non_empty(self.redis_url, DEFAULT_REDIS_URL),
        }
    }
}

/// A blank value counts as unset.
fn non_empty(value: Option<String>, default: &str) -> String {
    value
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<LoadConfig, clap::Error> {
        LoadArgs::try_parse_from(std::iter::once("svc-load").chain(args.iter().copied()))
            .map(LoadArgs::config)
    }

    fn run(args: &[&str]) -> LoadConfig {
        parse(args).unwrap_or_else(|error| panic!("{args:?}: {error}"))
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let config = run(&[]);
        assert_eq!(config.mode, Mode::Postgres);
        assert_eq!((config.requests, config.concurrency), (2000, 8));
        assert_eq!(config.warmup, 100);
        assert_eq!(config.max_time, Duration::from_secs(60));
        assert!(!config.idempotency && !config.sessions);
        assert_eq!(config.budget, Duration::from_millis(20));
    }

    #[test]
    fn flags_take_separate_or_inline_values() {
        let config = run(&[
            "--embedded",
            "--requests",
            "50",
            "--concurrency=4",
            "--warmup",
            "0",
            "--max-seconds=5",
            "--idempotency",
        ]);
        assert_eq!(config.mode, Mode::Embedded);
        assert_eq!(
            (config.requests, config.concurrency, config.warmup),
            (50, 4, 0)
        );
        assert_eq!(config.max_time, Duration::from_secs(5));
        assert!(config.idempotency);
        let help = parse(&["--requests", "1", "-h"]).unwrap_err();
        assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
    }

    #[test]
    fn servers_come_from_the_flags_and_blank_means_the_default() {
        let config = run(&[
            "--sessions",
            "--postgres-url",
            "postgres://u@localhost:5433/postgres",
            "--redis-url",
            "redis://127.0.0.1:6380",
        ]);
        assert_eq!(config.postgres_url, "postgres://u@localhost:5433/postgres");
        assert_eq!(config.redis_url, "redis://127.0.0.1:6380");
        assert!(config.sessions);
        assert_eq!(run(&["--redis-url", " "]).redis_url, DEFAULT_REDIS_URL);
        let config = run(&["--redis-url", "redis://:hunter2@127.0.0.1"]);
        assert!(!format!("{config:?}").contains("hunter2"));
    }

    #[test]
    fn bad_command_lines_say_what_is_wrong() {
        let cases: [(&[&str], &str); 6] = [
            (&["--requests", "0"], "--requests"),
            (&["--concurrency", "257"], "--concurrency"),
            (&["--max-seconds", "soon"], "--max-seconds"),
            (&["--warmup"], "needs a value"),
            (&["--fast"], "unknown argument"),
            (&["--embedded", "--sessions"], "--sessions"),
        ];
        for (args, expected) in cases {
            let error = parse(args).expect_err("refused");
            let line = svc_runtime::cli::one_line(&error);
            assert!(line.contains(expected), "{args:?}: {line}");
        }
    }
}
