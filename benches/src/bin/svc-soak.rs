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

use svc_benches::harness::{self, check_bin_dir};
use svc_benches::soak::{self, SoakConfig};

const USAGE: &str = "usage: svc-soak [--seconds S] [--rate R] [--provider-timeout-ms MS] [--rss-tolerance-mib MIB] [--outcomes FILE.csv] [--bin-dir DIR]";

/// The shortest run: below it the four faults and the quiet gaps between them leave the faults
/// under a second or no time at all.
const MIN_SECONDS: u64 = 10;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match parse(&args) {
        Ok(config) => config,
        Err(problem) => {
            eprintln!("error: {problem}\n{USAGE}");
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

fn parse(args: &[String]) -> Result<SoakConfig, String> {
    let own = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let mut config = SoakConfig {
        bin_dir: own.parent().map(PathBuf::from).unwrap_or_default(),
        postgres_url: harness::default_postgres_url(),
        redis_url: harness::default_redis_url(),
        seconds: 60,
        rate: 100,
        provider_timeout: Duration::from_secs(1),
        rss_tolerance_kib: 16 * 1024,
        log_dir: std::env::temp_dir(),
        outcomes: None,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let count =
            |v: &String, what: &str| v.parse::<u64>().map_err(|_| format!("{what}: a count"));
        match flag.as_str() {
            "--seconds" => {
                config.seconds = count(value()?, "--seconds")?;
                if config.seconds < MIN_SECONDS {
                    return Err(format!(
                        "--seconds: at least {MIN_SECONDS}, so every fault gets some time"
                    ));
                }
            }
            "--rate" => {
                config.rate = u32::try_from(count(value()?, "--rate")?.max(1))
                    .map_err(|_| "--rate: too high")?
            }
            "--provider-timeout-ms" => {
                config.provider_timeout =
                    Duration::from_millis(count(value()?, "--provider-timeout-ms")?.max(1))
            }
            "--rss-tolerance-mib" => {
                config.rss_tolerance_kib = count(value()?, "--rss-tolerance-mib")? * 1024
            }
            "--outcomes" => config.outcomes = Some(PathBuf::from(value()?)),
            "--bin-dir" => config.bin_dir = PathBuf::from(value()?),
            "--help" | "-h" => return Err("help".to_owned()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    check_bin_dir(&config.bin_dir)?;
    Ok(config)
}
