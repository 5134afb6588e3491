//! The command line: one clap parser for every command, and the dispatch to them.
//!
//! `--help` and `--version` print on stdout and exit 0; bad usage is one line on stderr,
//! `error: ...`, and exit 2, as a bad variable is.

use clap::error::ErrorKind;
use clap::{Parser, Subcommand};
use svc_runtime::config::EXIT_CONFIG;

use crate::admin;
use crate::agent::AgentArgs;
use crate::audit::AuditArgs;
use crate::budget::BudgetArgs;
use crate::token::TokenArgs;
use crate::usage::UsageArgs;
use crate::user::UserArgs;

/// `svc`.
#[derive(Debug, Parser)]
#[command(
    name = "svc",
    version,
    // A missing subcommand is bad usage, told in one line like any other.
    arg_required_else_help = false,
    // A repeated option's last value wins, as it always has on svc's command lines.
    args_override_self = true,
    about = "The svc command: the whole stack for development, and the administration of an \
             auth server",
    after_help = "The admin commands (token, usage, agent, user, audit, budget) reach the auth server at \
                  SVC_AUTH_GRPC_ADDR with the admin token in SVC_ADMIN_TOKEN; each prints one \
                  JSON document with --json."
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// A `svc` command.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The auth server (embedded store) and the gateway in one process, for development
    #[command(
        long_about = "The auth server over an embedded store and the gateway in one process, \
                      for development: no PostgreSQL, no Redis. Configuration comes from the \
                      environment (SVC_PORT, SVC_DEV_DATA_DIR, SVC_GRPC_PORT, SVC_BIND_ADDR, \
                      SVC_LLM_MODE, ...)."
    )]
    Dev,
    /// Create, list and revoke tokens on an auth server
    Token(TokenArgs),
    /// The org's usage totals from the ledger
    Usage(UsageArgs),
    /// Create, list and show agents, and move them between states
    Agent(AgentArgs),
    /// Create and list the org's users
    User(UserArgs),
    /// The org's audit trail, newest first
    Audit(AuditArgs),
    /// Set, list and delete money budgets on the org, an agent or a token
    Budget(BudgetArgs),
}

/// The command line of this process, or the exit: help and version on stdout with 0, bad
/// usage as one line on stderr with 2.
pub fn parse() -> Cli {
    Cli::try_parse().unwrap_or_else(|error| std::process::exit(refuse(&error)))
}

/// Prints what clap stopped at and returns the exit code.
fn refuse(error: &clap::Error) -> i32 {
    match error.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = error.print();
            0
        }
        _ => {
            eprintln!("{}", error_line(error));
            i32::from(EXIT_CONFIG)
        }
    }
}

/// clap's error on one line: its first paragraph (`error: ...` and any indented lines that
/// belong to it, such as the possible values) and the usage of the command it concerns.
fn error_line(error: &clap::Error) -> String {
    let rendered = error.render().to_string();
    let mut line: Vec<&str> = rendered
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .map(str::trim)
        .collect();
    if line.is_empty() {
        line.push("error: bad usage");
    }
    let mut line = line.join(" ");
    if let Some(usage) = rendered
        .lines()
        .find_map(|line| line.strip_prefix("Usage: "))
    {
        line.push_str(&format!(" (usage: {})", usage.trim()));
    }
    line
}

/// Runs a command; returns the exit code.
pub async fn run(cli: Cli) -> i32 {
    match cli.command {
        Command::Dev => crate::dev::main().await,
        Command::Token(args) => {
            admin::main(&args.server, async |admin| {
                crate::token::run(admin, args.command).await
            })
            .await
        }
        Command::Usage(args) => {
            let server = args.server.clone();
            admin::main(&server, async |admin| crate::usage::run(admin, args).await).await
        }
        Command::Agent(args) => {
            admin::main(&args.server, async |admin| {
                crate::agent::run(admin, args.command).await
            })
            .await
        }
        Command::User(args) => {
            admin::main(&args.server, async |admin| {
                crate::user::run(admin, args.command).await
            })
            .await
        }
        Command::Audit(args) => {
            let server = args.server.clone();
            admin::main(&server, async |admin| crate::audit::run(admin, args).await).await
        }
        Command::Budget(args) => {
            admin::main(&args.server, async |admin| {
                crate::budget::run(admin, args.command).await
            })
            .await
        }
    }
}

/// The command `svc words...` parses to, for the modules' tests.
#[cfg(test)]
pub(crate) fn try_parse(words: &[&str]) -> Result<Command, clap::Error> {
    Ok(Cli::try_parse_from(["svc"].iter().chain(words))?.command)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(args: &[&str]) -> clap::Error {
        Cli::try_parse_from(["svc"].iter().chain(args)).expect_err(&format!("{args:?}"))
    }

    #[test]
    fn bad_usage_is_one_line() {
        for bad in [
            &[][..],
            &["frobnicate"],
            &["dev", "extra"],
            &["token"],
            &["token", "create", "--name", "--json"],
            &["token", "create", "--permissions", "root"],
            &["agent", "pause"],
            &["agent", "get", "nope"],
            &["agent", "create", "--status", "asleep"],
            &["audit", "--since", "yesterday"],
        ] {
            let line = error_line(&error(bad));
            assert!(line.starts_with("error: "), "{bad:?}: {line}");
            assert!(!line.contains('\n'), "{bad:?}: {line}");
        }
    }

    #[test]
    fn a_repeated_option_takes_its_last_value() {
        let Command::Agent(agent) =
            try_parse(&["agent", "create", "--name", "a", "--name", "b"]).unwrap()
        else {
            panic!()
        };
        let crate::agent::AgentCommand::Create { name, .. } = agent.command else {
            panic!()
        };
        assert_eq!(name.as_deref(), Some("b"));
    }

    #[test]
    fn help_and_version_are_not_errors() {
        for asked in [
            &["--help"][..],
            &["--version"],
            &["agent", "--help"],
            &["help"],
        ] {
            let kind = error(asked).kind();
            assert!(
                matches!(kind, ErrorKind::DisplayHelp | ErrorKind::DisplayVersion),
                "{asked:?}: {kind:?}"
            );
        }
    }

    #[test]
    fn the_parser_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
