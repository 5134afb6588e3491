//! `svc-gateway`: reads the environment, serves until SIGINT or SIGTERM.

use svc_gateway::Gateway;
use svc_gateway::config::{Config, EXIT_CONFIG};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|command| command == "dev") {
        std::process::exit(svc_gateway::dev::main(&args[1..]).await);
    }
    let config = match Config::from_env() {
        Ok(config) => config,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(EXIT_CONFIG);
        }
    };
    let traces = match svc_gateway::telemetry::init(&config) {
        Ok(traces) => traces,
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
    svc_auth_server::cli::shutdown_signal().await;
    tracing::info!("shutting down");
    running.shutdown().await;
    if let Some(traces) = traces {
        traces.shutdown().await;
    }
}
