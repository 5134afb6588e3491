//! `svc-gateway`: reads the environment, serves until SIGINT or SIGTERM.

use svc_gateway::Gateway;
use svc_gateway::config::{Config, EXIT_CONFIG};

fn main() {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|command| command == "dev")
    {
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
    let runtime = match svc_runtime::runtime::build(config.worker_threads) {
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
