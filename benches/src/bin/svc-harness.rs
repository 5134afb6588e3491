//! `svc-harness`: the real binaries as separate processes, open and closed loop, CPU per
//! request of every process, the gateway's memory, and a real token's latency under a flood of
//! wrong ones.
//!
//! ```sh
//! cargo build --release --bins
//! target/release/svc-harness [--requests N] [--seconds S] [--rates 250,500,1000,...] [--env NAME=VALUE]...
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

use svc_benches::harness::{self, HarnessConfig};

const USAGE: &str = "usage: svc-harness [--requests N] [--seconds S] [--rates R1,R2,...] [--bin-dir DIR] [--env NAME=VALUE]...\n       svc-harness upstream --port P";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
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
    if args.first().map(String::as_str) == Some("upstream") {
        let port = args.get(2).and_then(|p| p.parse().ok()).unwrap_or(0);
        return match runtime.block_on(harness::serve_upstream(port)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: upstream: {error}");
                ExitCode::from(2)
            }
        };
    }
    let config = match parse(&args) {
        Ok(config) => config,
        Err(problem) => {
            eprintln!("error: {problem}\n{USAGE}");
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

fn parse(args: &[String]) -> Result<HarnessConfig, String> {
    let harness_bin = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let mut config = HarnessConfig {
        bin_dir: harness_bin.parent().map(PathBuf::from).unwrap_or_default(),
        harness_bin,
        postgres_url: harness::default_postgres_url(),
        redis_url: harness::default_redis_url(),
        requests: 5000,
        seconds: 5,
        rates: vec![250, 500, 1000, 1500, 2000, 3000, 4000, 6000],
        log_dir: std::env::temp_dir(),
        service_env: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--requests" => {
                config.requests = value()?.parse().map_err(|_| "--requests: a count")?
            }
            "--seconds" => config.seconds = value()?.parse().map_err(|_| "--seconds: a count")?,
            "--rates" => {
                config.rates = value()?
                    .split(',')
                    .map(|r| r.trim().parse::<u32>())
                    .collect::<Result<_, _>>()
                    .map_err(|_| "--rates: comma-separated requests per second")?
            }
            "--bin-dir" => config.bin_dir = PathBuf::from(value()?),
            "--env" => {
                let pair = value()?;
                let (name, value) = pair
                    .split_once('=')
                    .ok_or("--env: NAME=VALUE, set for both services")?;
                config.service_env.push((name.to_owned(), value.to_owned()));
            }
            "--help" | "-h" => return Err("help".to_owned()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    harness::check_bin_dir(&config.bin_dir)?;
    Ok(config)
}
