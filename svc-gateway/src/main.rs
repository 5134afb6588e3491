//! `svc-gateway`: reads the environment, serves until SIGINT or SIGTERM.

use std::ffi::OsString;

use clap::{Parser, Subcommand};
use svc_gateway::Gateway;
use svc_gateway::config::{Config, EVERY_VARIABLE, EXIT_CONFIG};
use svc_runtime::cli::{HELP_TEMPLATE, environment_help};

/// mimalloc: with the system allocator, malloc and free took about 7% of the gateway's CPU at
/// 32 connections (`svc-harness` under `perf`), for a request's many small, short-lived
/// allocations.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `svc-gateway`.
#[derive(Debug, Parser)]
#[command(
    name = "svc-gateway",
    version,
    about = "The svc LLM gateway: serves the OpenAI- and Anthropic-compatible routes until \
             SIGINT or SIGTERM. Configuration comes from the environment.",
    help_template = HELP_TEMPLATE,
    after_help = environment_help(EVERY_VARIABLE),
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Moved to `svc dev`.
    #[command(hide = true)]
    Dev {
        #[arg(hide = true, num_args = 0.., allow_hyphen_values = true, trailing_var_arg = true)]
        _rest: Vec<OsString>,
    },
}

fn main() {
    if let Some(Command::Dev { .. }) = svc_runtime::cli::parse::<Cli>().command {
        // The all-in-one development mode lives in the `svc` command, which links the auth
        // server; this binary does not.
        eprintln!("error: dev mode moved to `svc dev` (cargo run -p svc-cli -- dev)");
        std::process::exit(EXIT_CONFIG);
    }
    let config = match Config::from_env() {
        Ok(config) => config,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(EXIT_CONFIG);
        }
    };
    // ValidateToken's is the shortest deadline every request arms.
    let shortest = config.auth.validate_timeout;
    let runtime = match svc_runtime::runtime::build(config.worker_threads, shortest) {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the runtime: {error}");
            std::process::exit(1);
        }
    };
    runtime.block_on(serve(config));
}

async fn serve(config: Config) {
    let telemetry = match svc_gateway::telemetry::init(&config) {
        Ok(telemetry) => telemetry,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(EXIT_CONFIG);
        }
    };
    let gateway = match Gateway::new(config) {
        Ok(gateway) => gateway,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(EXIT_CONFIG);
        }
    };
    let running = match gateway.start().await {
        Ok(running) => running,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(1);
        }
    };
    tracing::info!(addr = %running.addr(), "svc-gateway listening");
    svc_runtime::shutdown::shutdown_signal().await;
    tracing::info!("shutting down");
    running.shutdown().await;
    telemetry.shutdown().await;
}
