//! The harness's settings: command-line flags, and the two variables naming the servers.

use std::collections::HashMap;
use std::time::Duration;

use super::report::OVERHEAD_BUDGET;

/// The PostgreSQL server's maintenance-database URL (a fresh database is created beside it).
pub const SVC_TEST_POSTGRES_URL: &str = "SVC_TEST_POSTGRES_URL";
/// The Redis server of the PostgreSQL mode.
pub const REDIS_URL: &str = "REDIS_URL";
/// Used when [`SVC_TEST_POSTGRES_URL`] is unset.
pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";
/// Used when [`REDIS_URL`] is unset.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";

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

/// The `--help` text.
pub const USAGE: &str = "\
usage: svc-load [--embedded] [--requests N] [--concurrency C] [--warmup W]
                [--max-seconds S] [--idempotency] [--sessions]

Starts a fake upstream, the auth server and the gateway in this process, sends the same chat
completion to the upstream directly and through the gateway, and prints latency percentiles,
throughput and the added latency against SPEC's 20 ms budget at p99.

  --embedded       embedded SQLite identity store, in-process rate limit and idempotency
                   (default: a fresh PostgreSQL database and Redis under a random key prefix)
  --requests N     measured requests per target (default 2000)
  --concurrency C  connections, each with one request in flight (default 8)
  --warmup W       unmeasured requests per target first (default 100)
  --max-seconds S  bound on the load, half for each target (default 60)
  --idempotency    a fresh Idempotency-Key on every request
  --sessions       the gateway records durable sessions in the database (PostgreSQL mode)

environment: SVC_TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/postgres),
REDIS_URL (default redis://127.0.0.1:6379); both must be on this machine.
exit status: 0 PASS, 1 FAIL (a failed request, or the added p99 not under 20 ms),
2 bad arguments, the stack did not start, or Ctrl-C (the run's database and keys
are still removed).
";

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

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Run with this configuration.
    Run(LoadConfig),
    /// Print [`USAGE`].
    Help,
}

/// A refused command line; the message is the one line printed before the usage.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ArgsError(String);

impl Command {
    /// Parses the arguments after the program name, with `env` for the server URLs.
    pub fn parse(args: &[String], env: &HashMap<String, String>) -> Result<Command, ArgsError> {
        let mut config = LoadConfig::default();
        if let Some(url) = non_empty(env, SVC_TEST_POSTGRES_URL) {
            config.postgres_url = url;
        }
        if let Some(url) = non_empty(env, REDIS_URL) {
            config.redis_url = url;
        }
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag, Some(value.to_owned())),
                None => (arg.as_str(), None),
            };
            let mut value = |name: &str| {
                inline
                    .clone()
                    .or_else(|| args.next().cloned())
                    .ok_or_else(|| ArgsError(format!("{name} needs a value")))
            };
            match flag {
                "-h" | "--help" => return Ok(Command::Help),
                "--embedded" => config.mode = Mode::Embedded,
                "--idempotency" => config.idempotency = true,
                "--sessions" => config.sessions = true,
                "--requests" => config.requests = number(flag, &value(flag)?, 1, MAX_REQUESTS)?,
                "--concurrency" => {
                    config.concurrency = number(flag, &value(flag)?, 1, MAX_CONCURRENCY)?;
                }
                "--warmup" => config.warmup = number(flag, &value(flag)?, 0, MAX_REQUESTS)?,
                "--max-seconds" => {
                    let seconds = number(flag, &value(flag)?, 1, MAX_SECONDS as usize)?;
                    config.max_time = Duration::from_secs(seconds as u64);
                }
                _ => return Err(ArgsError(format!("unknown argument {arg:?}"))),
            }
        }
        if config.sessions && config.mode == Mode::Embedded {
            return Err(ArgsError(
                "--sessions needs PostgreSQL; the embedded mode has no session store".to_owned(),
            ));
        }
        Ok(Command::Run(config))
    }
}

fn non_empty(env: &HashMap<String, String>, name: &str) -> Option<String> {
    env.get(name)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

fn number(flag: &str, value: &str, min: usize, max: usize) -> Result<usize, ArgsError> {
    value
        .parse::<usize>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| {
            ArgsError(format!(
                "{flag}: {value:?} is not a number in {min}..={max}"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Command, ArgsError> {
        parse_with(args, &[])
    }

    fn parse_with(args: &[&str], env: &[(&str, &str)]) -> Result<Command, ArgsError> {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let env = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Command::parse(&args, &env)
    }

    fn run(args: &[&str]) -> LoadConfig {
        match parse(args) {
            Ok(Command::Run(config)) => config,
            other => panic!("{args:?}: {other:?}"),
        }
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
        assert_eq!(config.postgres_url, DEFAULT_POSTGRES_URL);
        assert_eq!(config.redis_url, DEFAULT_REDIS_URL);
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
        assert_eq!(parse(&["--requests", "1", "-h"]), Ok(Command::Help));
    }

    #[test]
    fn servers_come_from_the_environment() {
        let env = [
            (
                SVC_TEST_POSTGRES_URL,
                "postgres://u@localhost:5433/postgres",
            ),
            (REDIS_URL, "redis://127.0.0.1:6380"),
        ];
        let Ok(Command::Run(config)) = parse_with(&["--sessions"], &env) else {
            panic!("parses");
        };
        assert_eq!(config.postgres_url, env[0].1);
        assert_eq!(config.redis_url, env[1].1);
        assert!(config.sessions);
        let Ok(Command::Run(config)) = parse_with(&[], &[(REDIS_URL, " ")]) else {
            panic!("parses");
        };
        assert_eq!(config.redis_url, DEFAULT_REDIS_URL);
        let secret = [(REDIS_URL, "redis://:hunter2@127.0.0.1")];
        let Ok(Command::Run(config)) = parse_with(&[], &secret) else {
            panic!("parses");
        };
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
            assert!(error.to_string().contains(expected), "{args:?}: {error}");
        }
    }
}
