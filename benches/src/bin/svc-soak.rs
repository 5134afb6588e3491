//! `svc-soak`: steady load through two gateways and two auth servers while Redis, one auth
//! server, PostgreSQL and the upstream fail one after the other; see [`svc_benches::soak`].
//!
//! ```sh
//! cargo build -p svc-benches -p svc-gateway -p svc-auth-server --bins
//! target/debug/svc-soak [--seconds 60] [--rate 100] [--provider-timeout-ms 1000] [--rss-tolerance-mib 16] [--outcomes FILE.csv]
//! ```
//!
//! Needs PostgreSQL (`SVC_TEST_POSTGRES_URL`, default
//! `postgres://postgres@127.0.0.1:5432/postgres`, a maintenance database) and Redis
//! (`REDIS_URL`, default `redis://127.0.0.1:6379`) on this machine. The service binaries are
//! taken from this binary's own directory (`--bin-dir` to change it). Exit status 0 when every
//! property held, 1 when one failed, 2 when the stack did not start, an argument is wrong, or Ctrl-C or
//! SIGTERM stopped the run (which still removes its database and Redis keys).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use svc_benches::harness::{self, check_bin_dir};
use svc_benches::soak::{self, SoakConfig};
use svc_runtime::cli::HELP_TEMPLATE;

/// The shortest run: below it the four faults and the quiet gaps between them leave the faults
/// under a second or no time at all.
const MIN_SECONDS: u64 = 10;

/// `svc-soak`.
#[derive(Debug, Parser)]
#[command(
    name = "svc-soak",
    version,
    about = "Steady load through two gateways and two auth servers while Redis, one auth \
             server, PostgreSQL and the upstream fail one after the other.",
    help_template = HELP_TEMPLATE,
    after_help = "Exit status 0 when every property held, 1 when one failed, 2 when the stack \
                  did not start, an argument is wrong, or Ctrl-C or SIGTERM stopped the run \
                  (which still removes its database and Redis keys)."
)]
struct Cli {
    /// Length of the run, at least 10 so that every fault gets some time
    #[arg(long, value_name = "S", default_value_t = 60, value_parser = seconds)]
    seconds: u64,
    /// Requests per second
    #[arg(long, value_name = "R", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    rate: u32,
    /// The gateways' provider deadline, in milliseconds
    #[arg(long, value_name = "MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    provider_timeout_ms: u64,
    /// Resident memory the gateways may grow by
    #[arg(long, value_name = "MIB", default_value_t = 16)]
    rss_tolerance_mib: u64,
    /// Write every request's outcome to this CSV file
    #[arg(long, value_name = "FILE.csv")]
    outcomes: Option<PathBuf>,
    /// Where the service binaries are (default: this binary's directory)
    #[arg(long, value_name = "DIR")]
    bin_dir: Option<PathBuf>,
    #[command(flatten)]
    servers: harness::Servers,
}

fn seconds(value: &str) -> Result<u64, String> {
    match value.parse::<u64>() {
        Ok(seconds) if seconds >= MIN_SECONDS => Ok(seconds),
        Ok(_) => Err(format!(
            "at least {MIN_SECONDS}, so every fault gets some time"
        )),
        Err(_) => Err("a count".to_owned()),
    }
}

fn main() -> ExitCode {
    let config = match config(svc_runtime::cli::parse::<Cli>()) {
        Ok(config) => config,
        Err(problem) => {
            eprintln!("error: {problem}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the runtime: {error}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(soak::run(&config)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(problem) => {
            eprintln!("error: {problem}");
            ExitCode::from(2)
        }
    }
}

fn config(cli: Cli) -> Result<SoakConfig, String> {
    let bin_dir = match cli.bin_dir {
        Some(dir) => dir,
        None => {
            let own = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
            own.parent().map(PathBuf::from).unwrap_or_default()
        }
    };
    check_bin_dir(&bin_dir)?;
    Ok(SoakConfig {
        bin_dir,
        postgres_url: cli.servers.postgres_url,
        redis_url: cli.servers.redis_url,
        seconds: cli.seconds,
        rate: cli.rate,
        provider_timeout: Duration::from_millis(cli.provider_timeout_ms),
        rss_tolerance_kib: cli.rss_tolerance_mib * 1024,
        log_dir: std::env::temp_dir(),
        outcomes: cli.outcomes,
    })
}
