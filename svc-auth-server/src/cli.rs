//! The `svc-auth-server` command line: `serve` (the default), `migrate`, `bootstrap` and
//! `seed`.
//!
//! Every failure is one line on stderr, `error: ...`. Exit codes: 0 success (and `--help`,
//! `--version`), 1 a runtime failure (database unreachable, not migrated, refused), 2 bad usage
//! or configuration. `--help` lists every variable the server reads ([`EVERY_VARIABLE`]).

use std::error::Error;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use uuid::Uuid;

use svc_runtime::Secret;
use svc_runtime::cli::{HELP_TEMPLATE, environment_help};
use svc_runtime::config::{EXIT_CONFIG, Environment, Vars};
use svc_runtime::error_report;
use svc_runtime::shutdown::shutdown_signal;
use svc_runtime::telemetry;
use svc_runtime::telemetry::otel::TraceExport;

use crate::bootstrap::BootstrapTarget;
use crate::config::{Config, EVERY_VARIABLE, SVC_ENV};
use crate::seed::{SeedError, SeedOptions};
use crate::server::Server;
use crate::store::AgentStatus;

/// The ValidateToken deadline a gateway sends by default (`SVC_AUTH_VALIDATE_TIMEOUT`).
const GATEWAY_VALIDATE_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(50);

/// `svc-auth-server`.
#[derive(Debug, Parser)]
#[command(
    name = "svc-auth-server",
    version,
    about = "The svc identity plane: svc.auth.v1.AuthService over gRPC, and the ops routes. \
             Configuration comes from the environment.",
    help_template = HELP_TEMPLATE,
    after_help = environment_help(EVERY_VARIABLE),
)]
struct Cli {
    /// What to do; serve when none is named.
    #[command(subcommand)]
    command: Option<Subcommands>,
}

#[derive(Debug, Subcommand)]
enum Subcommands {
    /// Serve gRPC and the ops routes (the default)
    Serve,
    /// Apply the migrations
    Migrate,
    /// Create an org and its first admin token (or, with --org-id, a new admin token for an
    /// existing org) in any environment, and print {"org_id", "token_id", "admin_token"} as JSON
    Bootstrap(BootstrapArgs),
    /// Create development data and print it as JSON; for local development only
    Seed(SeedArgs),
}

#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
struct BootstrapArgs {
    /// Create an org of this name
    #[arg(long, value_name = "NAME")]
    org_name: Option<String>,
    /// A new admin token for this existing org
    #[arg(long, value_name = "UUID", value_parser = parse_uuid)]
    org_id: Option<Uuid>,
}

#[derive(Debug, Args)]
struct SeedArgs {
    /// Seed this org (created when missing) instead of a new one
    #[arg(long, value_name = "UUID", value_parser = parse_uuid)]
    org_id: Option<Uuid>,
    /// An agent in this status (active, paused, suspended, archived); repeatable
    #[arg(long = "agent-status", value_name = "STATUS", value_parser = parse_status)]
    agent_statuses: Vec<AgentStatus>,
}

fn parse_uuid(value: &str) -> Result<Uuid, String> {
    Uuid::try_parse(value).map_err(|_| format!("invalid UUID {value:?}"))
}

fn parse_status(value: &str) -> Result<AgentStatus, String> {
    value.parse().map_err(|error| format!("{error}"))
}

/// A subcommand and its options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Serve gRPC and the ops routes.
    Serve,
    /// Apply migrations.
    Migrate,
    /// Create an org's admin token (and the org) and print it as JSON.
    Bootstrap(BootstrapTarget),
    /// Create development data and print it as JSON.
    Seed(SeedOptions),
}

impl From<Option<Subcommands>> for Command {
    fn from(command: Option<Subcommands>) -> Command {
        match command {
            None | Some(Subcommands::Serve) => Command::Serve,
            Some(Subcommands::Migrate) => Command::Migrate,
            Some(Subcommands::Bootstrap(BootstrapArgs {
                org_name: Some(name),
                ..
            })) => Command::Bootstrap(BootstrapTarget::NewOrg(name)),
            // The group requires exactly one of the two.
            Some(Subcommands::Bootstrap(BootstrapArgs { org_id, .. })) => {
                Command::Bootstrap(BootstrapTarget::Org(org_id.unwrap_or_default()))
            }
            Some(Subcommands::Seed(SeedArgs {
                org_id,
                agent_statuses,
            })) => Command::Seed(SeedOptions {
                org_id,
                agent_statuses,
            }),
        }
    }
}

/// Parses the arguments after the program name.
pub fn parse_args(args: &[String]) -> Result<Command, clap::Error> {
    let cli = Cli::try_parse_from(
        std::iter::once("svc-auth-server").chain(args.iter().map(String::as_str)),
    )?;
    Ok(cli.command.into())
}

/// `error: cause: cause`, one line.
fn one_line(error: &(dyn Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause = cause.to_string();
        if !line.contains(&cause) {
            line.push_str(": ");
            line.push_str(&cause);
        }
        source = source.and_then(Error::source);
    }
    line.replace('\n', " ")
}

fn fail(code: u8, message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(code)
}

/// Runs the program with the process's arguments and environment.
pub fn main() -> ExitCode {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    run(&args, &Vars::from_env())
}

/// Runs the program with explicit arguments (after the program name) and environment.
pub fn run(args: &[String], vars: &Vars) -> ExitCode {
    let command = match parse_args(args) {
        Ok(command) => command,
        Err(error) => return svc_runtime::cli::refuse(&error),
    };
    // Seed's production refusal comes first: the serving rules checked below (TLS, log
    // format) are not what should stop a development tool pointed at production.
    if matches!(command, Command::Seed(_))
        && vars.parse_or(SVC_ENV, Environment::default(), Environment::parse)
            == Ok(Environment::Production)
    {
        return fail(1, SeedError::Production);
    }
    let config = match Config::from_vars(vars) {
        Ok(config) => config,
        Err(error) => return fail(EXIT_CONFIG, error),
    };
    if let (Command::Serve, Err(error)) = (&command, config.check_serving()) {
        return fail(EXIT_CONFIG, error);
    }
    // A read's pool acquire, or the deadline a gateway sends by default, whichever is shorter.
    let shortest = config.pool.acquire_timeout.min(GATEWAY_VALIDATE_TIMEOUT);
    let runtime = match svc_runtime::runtime::build(config.worker_threads, shortest) {
        Ok(runtime) => runtime,
        Err(error) => return fail(1, format_args!("cannot start the runtime: {error}")),
    };
    // Only serving exports traces; the exporter's channel needs the runtime.
    let traces = match command {
        Command::Serve => {
            let _runtime = runtime.enter();
            match TraceExport::start(&config.otel) {
                Ok(traces) => traces,
                Err(error) => return fail(EXIT_CONFIG, one_line(&error)),
            }
        }
        _ => None,
    };
    // Seed and bootstrap print JSON on stdout: their logs, like migrate's, go to stderr.
    let subscriber = match command {
        Command::Serve => {
            telemetry::subscriber_with_traces(&config.log, std::io::stdout, traces.as_ref())
        }
        _ => telemetry::subscriber(&config.log, std::io::stderr),
    };
    if tracing::subscriber::set_global_default(subscriber).is_err() {
        return fail(1, "a log subscriber is installed already");
    }
    // Only serving reports errors; the client's transport is a thread of its own.
    let errors = match command {
        Command::Serve => error_report::init(
            config.sentry_dsn.as_ref().map(Secret::expose),
            concat!("svc-auth-server@", env!("CARGO_PKG_VERSION")),
            config.environment,
        ),
        _ => None,
    };
    if errors.is_some() {
        tracing::info!("error reporting is on");
    }
    runtime.block_on(async move {
        let code = match command {
            Command::Serve => serve(config).await,
            Command::Migrate => migrate(config).await,
            Command::Seed(options) => seed(config, options).await,
            Command::Bootstrap(target) => bootstrap(config, target).await,
        };
        if let Some(traces) = traces {
            traces.shutdown().await;
        }
        if let Some(errors) = errors {
            errors.shutdown().await;
        }
        code
    })
}

async fn serve(config: Config) -> ExitCode {
    let environment = config.environment.as_str();
    let tls = config.grpc_tls.is_some();
    let server = match Server::start(config).await {
        Ok(server) => server,
        Err(error) => return fail(1, one_line(&error)),
    };
    tracing::info!(
        grpc_addr = %server.grpc_addr,
        http_addr = %server.http_addr,
        environment,
        tls,
        "svc-auth-server listening"
    );
    match server.run_until(shutdown_signal()).await {
        Ok(()) => {
            tracing::info!("svc-auth-server stopped");
            ExitCode::SUCCESS
        }
        Err(error) => fail(1, one_line(&error)),
    }
}

async fn migrate(config: Config) -> ExitCode {
    match crate::migrate::run(config.postgres_dsn.expose(), &config.pool).await {
        Ok(()) => {
            tracing::info!(
                migrations = crate::migrate::MIGRATOR.iter().count(),
                "migrations applied"
            );
            ExitCode::SUCCESS
        }
        Err(error) => fail(1, one_line(&error)),
    }
}

async fn seed(config: Config, options: SeedOptions) -> ExitCode {
    print_json(crate::seed::run_with_config(&config, &options).await)
}

async fn bootstrap(config: Config, target: BootstrapTarget) -> ExitCode {
    let outcome = crate::bootstrap::run_with_config(&config, &target).await;
    if let Ok(output) = &outcome {
        // Never the token: the record says which token exists, stdout says what it is.
        tracing::info!(org_id = %output.org_id, token_id = %output.token_id, "bootstrapped");
    }
    print_json(outcome)
}

/// The output as one JSON line on stdout, or the error as one line on stderr (exit 1).
fn print_json<T: serde::Serialize, E: Error + 'static>(outcome: Result<T, E>) -> ExitCode {
    match outcome {
        Ok(output) => match serde_json::to_string(&output) {
            Ok(json) => {
                println!("{json}");
                ExitCode::SUCCESS
            }
            Err(error) => fail(1, error),
        },
        Err(error) => fail(1, one_line(&error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn commands_parse() {
        assert_eq!(parse_args(&[]).unwrap(), Command::Serve);
        assert_eq!(parse_args(&args(&["serve"])).unwrap(), Command::Serve);
        assert_eq!(parse_args(&args(&["migrate"])).unwrap(), Command::Migrate);
        for shown in ["--help", "-h", "help", "--version", "-V"] {
            let error = parse_args(&args(&[shown])).unwrap_err();
            assert!(!error.use_stderr(), "{shown}");
        }
        assert!(parse_args(&args(&["serve", "now"])).is_err());
        assert!(parse_args(&args(&["destroy"])).is_err());
    }

    #[test]
    fn bootstrap_options_parse() {
        let org = Uuid::new_v4();
        assert_eq!(
            parse_args(&args(&["bootstrap", "--org-name", "Acme"])).unwrap(),
            Command::Bootstrap(BootstrapTarget::NewOrg("Acme".into()))
        );
        assert_eq!(
            parse_args(&args(&["bootstrap", &format!("--org-id={org}")])).unwrap(),
            Command::Bootstrap(BootstrapTarget::Org(org))
        );
        for bad in [
            &["bootstrap"][..],
            &["bootstrap", "--org-name"],
            &["bootstrap", "--org-id", "nope"],
            &["bootstrap", "--org-name", "a", "--org-id", &org.to_string()],
            &["bootstrap", "--force", "x"],
        ] {
            assert!(parse_args(&args(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn seed_options_parse() {
        let org = Uuid::new_v4();
        let parsed = parse_args(&args(&[
            "seed",
            "--org-id",
            &org.to_string(),
            "--agent-status",
            "active",
            "--agent-status=suspended",
        ]));
        assert_eq!(
            parsed.unwrap(),
            Command::Seed(SeedOptions {
                org_id: Some(org),
                agent_statuses: vec![AgentStatus::Active, AgentStatus::Suspended],
            })
        );
        assert_eq!(
            parse_args(&args(&["seed"])).unwrap(),
            Command::Seed(SeedOptions::default())
        );
        for bad in [
            &["seed", "--org-id"][..],
            &["seed", "--org-id", "nope"],
            &["seed", "--agent-status", "sleeping"],
            &["seed", "--force"],
        ] {
            assert!(parse_args(&args(bad)).is_err(), "{bad:?}");
        }
    }
}
