//! What every svc binary's command line shares: `--help` and `--version` on stdout with exit
//! 0; a refused command line as one line on stderr, `error: ...`, with exit 2, as a bad
//! variable is; and the variables a binary reads, listed in its help.
//!
//! ```
//! use clap::Parser;
//!
//! #[derive(Debug, Parser)]
//! #[command(name = "tool", version)]
//! struct Cli {
//!     /// How many
//!     #[arg(long, value_parser = |v: &str| v.parse::<u32>().map_err(|_| format!("not a count: {v:?}")))]
//!     count: Option<u32>,
//! }
//!
//! let error = Cli::try_parse_from(["tool", "--count", "x"]).unwrap_err();
//! assert_eq!(
//!     svc_runtime::cli::one_line(&error),
//!     r#"error: --count: not a count: "x""#
//! );
//! let error = Cli::try_parse_from(["tool", "--fast"]).unwrap_err();
//! assert_eq!(
//!     svc_runtime::cli::one_line(&error),
//!     r#"error: unknown argument "--fast" (see tool --help)"#
//! );
//! ```

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;
use clap::error::{ContextKind, ContextValue, ErrorKind};

use crate::config::{EXIT_CONFIG, Variable};

/// The top-level help of every binary: lower-case `usage:`, as the errors' `error:`.
pub const HELP_TEMPLATE: &str = "{about-with-newline}\nusage: {usage}\n\n{all-args}{after-help}";

/// The command line of this process, or the exit: help and version on stdout with 0, a
/// refusal as one line on stderr with 2.
pub fn parse<P: Parser>() -> P {
    match P::try_parse() {
        Ok(parsed) => parsed,
        Err(error) => {
            let code = refuse(&error);
            std::process::exit(if code == ExitCode::SUCCESS {
                0
            } else {
                i32::from(EXIT_CONFIG)
            })
        }
    }
}

/// [`parse`] of explicit arguments (the program name first), returning the exit instead of
/// taking it.
pub fn parse_from<P, I, T>(args: I) -> Result<P, ExitCode>
where
    P: Parser,
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    P::try_parse_from(args).map_err(|error| refuse(&error))
}

/// Prints what clap stopped at: help or version on stdout (exit 0), or one line on stderr
/// (exit 2).
pub fn refuse(error: &clap::Error) -> ExitCode {
    match error.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = error.print();
            if error.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                ExitCode::from(EXIT_CONFIG)
            } else {
                ExitCode::SUCCESS
            }
        }
        _ => {
            eprintln!("{}", one_line(error));
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

/// A refusal on one line, naming the argument as a configuration error names its variable:
/// `error: --flag: problem`; a refusal about the command line's shape (an unknown argument or
/// command, a missing one) ends with `(see BIN --help)`.
pub fn one_line(error: &clap::Error) -> String {
    let context = |kind| match error.get(kind) {
        Some(ContextValue::String(value)) => Some(value.clone()),
        Some(ContextValue::Strings(values)) => Some(values.join(", ")),
        _ => None,
    };
    // `--flag <VALUE>`: the flag.
    let argument = context(ContextKind::InvalidArg)
        .map(|arg| arg.split([' ', '=']).next().unwrap_or_default().to_owned());
    let problem = match (error.kind(), argument) {
        (ErrorKind::InvalidSubcommand, _) => context(ContextKind::InvalidSubcommand)
            .map(|command| format!("unknown command {command:?}")),
        (ErrorKind::UnknownArgument, _) => {
            argument_of(error).map(|arg| format!("unknown argument {arg:?}"))
        }
        (ErrorKind::ValueValidation, Some(flag)) => {
            let reason = std::error::Error::source(error)
                .map(ToString::to_string)
                .or_else(|| context(ContextKind::InvalidValue).map(|v| format!("{v:?}")));
            reason.map(|reason| format!("{flag}: {reason}"))
        }
        (ErrorKind::InvalidValue, Some(flag)) => match context(ContextKind::InvalidValue) {
            Some(value) if !value.is_empty() => Some(format!("{flag}: invalid value {value:?}")),
            _ => Some(format!("{flag} needs a value")),
        },
        (ErrorKind::ArgumentConflict, Some(flag)) => context(ContextKind::PriorArg)
            .map(|other| format!("{flag} cannot be used with {other}")),
        (ErrorKind::MissingRequiredArgument, _) => context(ContextKind::InvalidArg).map(|args| {
            // `<--a <A>|--b <B>>`: one of a group.
            let args = args
                .strip_prefix('<')
                .and_then(|a| a.strip_suffix('>'))
                .unwrap_or(&args);
            let command = command_path(error);
            let who = command.last().map_or("", String::as_str);
            format!("{who} needs {}", args.replace('|', " or "))
        }),
        _ => None,
    };
    let problem = problem.unwrap_or_else(|| first_line(error));
    match binary(error) {
        Some(bin) => format!("error: {problem} (see {bin} --help)"),
        None => format!("error: {problem}"),
    }
}

fn argument_of(error: &clap::Error) -> Option<String> {
    match error.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(arg)) => Some(arg.clone()),
        _ => None,
    }
}

/// clap's own message, without its `error: ` and on one line.
fn first_line(error: &clap::Error) -> String {
    let rendered = error.render().to_string();
    let line = rendered
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ");
    match line.strip_prefix("error: ") {
        Some(rest) => rest.to_owned(),
        None if line.is_empty() => "bad usage".to_owned(),
        None => line,
    }
}

/// The program name in clap's usage line.
fn binary(error: &clap::Error) -> Option<String> {
    command_path(error).into_iter().next()
}

/// The program and subcommands in clap's usage line: `svc-auth-server bootstrap`.
fn command_path(error: &clap::Error) -> Vec<String> {
    match error.get(ContextKind::Usage) {
        Some(ContextValue::StyledStr(usage)) => usage
            .to_string()
            .split_whitespace()
            .skip_while(|word| word.ends_with(':'))
            .take_while(|word| !word.starts_with(['<', '[']))
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// The `Environment:` section of a binary's help: every variable of `tables`, each once, with
/// its doc comment.
pub fn environment_help(tables: &[&[Variable]]) -> String {
    let mut seen = BTreeSet::new();
    let variables: Vec<&Variable> = tables
        .iter()
        .flat_map(|table| table.iter())
        .filter(|variable| seen.insert(variable.name))
        .collect();
    let width = variables.iter().map(|v| v.name.len()).max().unwrap_or(0);
    let mut help = String::from("Environment:\n");
    for variable in variables {
        help.push_str(&format!(
            "  {:width$}  {}\n",
            variable.name,
            variable
                .help
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        ));
    }
    help
}
