//! `svc-harness`: the real binaries as separate processes, open and closed loop, CPU per
//! request of every process, the gateway's memory, and a real token's latency under a flood of
//! wrong ones.
//!
//! ```sh
//! cargo build --release --bins
//! target/release/svc-harness [--requests N] [--seconds S] [--rates 250,500,1000,...] [--env NAME=VALUE]...
//!     [--syscall-requests N] [--closed-only]
//! ```
//!
//! Needs PostgreSQL (`SVC_TEST_POSTGRES_URL`, default
//! `postgres://postgres@127.0.0.1:5432/postgres`, a maintenance database) and Redis
//! (`REDIS_URL`, default `redis://127.0.0.1:6379`) on this machine. The service binaries are
//! taken from this binary's own directory (`--bin-dir` to change it). See
//! [`svc_benches::harness`] for what is measured. Exit status 0, or 2 when the stack did not
//! start, an argument is wrong, or Ctrl-C or SIGTERM stopped the run (which still removes its
//! database and Redis keys).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use svc_benches::harness::{self, HarnessConfig};
use svc_runtime::cli::HELP_TEMPLATE;

/// `svc-harness`.
#[derive(Debug, Parser)]
#[command(
    name = "svc-harness",
    version,
    about = "The real binaries as separate processes, open and closed loop: CPU per request, \
             the gateway's memory, and a real token's latency under a flood of wrong ones.",
    help_template = HELP_TEMPLATE,
    args_conflicts_with_subcommands = true,
    after_help = "Exit status 0, or 2 when the stack did not start, an argument is wrong, or \
                  Ctrl-C or SIGTERM stopped the run (which still removes its database and Redis \
                  keys)."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Closed-loop requests per concurrency level
    #[arg(long, value_name = "N", default_value_t = 5000)]
    requests: usize,
    /// Seconds of each open-loop rate
    #[arg(long, value_name = "S", default_value_t = 5)]
    seconds: u64,
    /// Open-loop rates, requests per second
    #[arg(
        long,
        value_name = "R1,R2,...",
        value_delimiter = ',',
        default_value = "250,500,1000,1500,2000,3000,4000,6000"
    )]
    rates: Vec<u32>,
    /// Where the service binaries are (default: this binary's directory)
    #[arg(long, value_name = "DIR")]
    bin_dir: Option<PathBuf>,
    /// A variable set for both services; repeatable
    #[arg(long = "env", value_name = "NAME=VALUE", value_parser = name_value)]
    service_env: Vec<(String, String)>,
    /// Requests of the traced phase after each closed-loop one, counting the system calls of
    /// the gateway and the auth server with strace or perf (0: no traced phase)
    #[arg(long, value_name = "N", default_value_t = 2000)]
    syscall_requests: usize,
    /// Only the closed-loop phases and their counts: no open loop, no flood
    #[arg(long)]
    closed_only: bool,
    #[command(flatten)]
    servers: harness::Servers,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The fake upstream the harness starts (its own process)
    Upstream {
        /// The port; 0 for any
        #[arg(long, default_value_t = 0)]
        port: u16,
    },
}

fn name_value(pair: &str) -> Result<(String, String), String> {
    let (name, value) = pair
        .split_once('=')
        .ok_or("NAME=VALUE, set for both services")?;
    Ok((name.to_owned(), value.to_owned()))
}

fn main() -> ExitCode {
    let cli = svc_runtime::cli::parse::<Cli>();
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
    if let Some(Command::Upstream { port }) = cli.command {
        return match runtime.block_on(harness::serve_upstream(port)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: upstream: {error}");
                ExitCode::from(2)
            }
        };
    }
    let config = match config(cli) {
        Ok(config) => config,
        Err(problem) => {
            eprintln!("error: {problem}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(harness::run(&config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(problem) => {
            eprintln!("error: {problem}");
            ExitCode::from(2)
        }
    }
}

fn config(cli: Cli) -> Result<HarnessConfig, String> {
    let harness_bin = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let bin_dir = match cli.bin_dir {
        Some(dir) => dir,
        None => harness_bin.parent().map(PathBuf::from).unwrap_or_default(),
    };
    harness::check_bin_dir(&bin_dir)?;
    Ok(HarnessConfig {
        bin_dir,
        harness_bin,
        postgres_url: cli.servers.postgres_url,
        redis_url: cli.servers.redis_url,
        requests: cli.requests,
        seconds: cli.seconds,
        rates: cli.rates,
        log_dir: std::env::temp_dir(),
        service_env: cli.service_env,
        syscall_requests: cli.syscall_requests,
        closed_only: cli.closed_only,
    })
}
