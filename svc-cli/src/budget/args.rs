//! `svc budget` arguments.

use clap::builder::PossibleValuesParser;
use clap::{Args, Subcommand};
use uuid::Uuid;

use crate::admin::ServerArgs;
use crate::args::{OutputArgs, uuid};

/// `svc budget`.
#[derive(Debug, Clone, Args)]
#[command(
    about = "Set, list and delete money budgets on the org, an agent or a token",
    after_help = "A budget is the most its target may spend per day, week (from Monday), month \
                  (calendar, UTC) or in total, counted from each call's cost in the usage \
                  ledger. The admin token needs budget_manage."
)]
pub struct BudgetArgs {
    /// Where the auth server is, and the admin token.
    #[command(flatten)]
    pub server: ServerArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: BudgetCommand,
}

/// What a budget limits: exactly one of `--org`, `--agent ID`, `--token ID`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Args)]
#[group(required = true, multiple = false)]
pub struct TargetArgs {
    /// The admin token's org as a whole
    #[arg(long)]
    pub org: bool,
    /// One agent of the org
    #[arg(long, value_name = "ID", value_parser = uuid)]
    pub agent: Option<Uuid>,
    /// One token of the org
    #[arg(long, value_name = "ID", value_parser = uuid)]
    pub token: Option<Uuid>,
}

impl TargetArgs {
    /// The wire scope and target id.
    pub fn wire(self) -> (&'static str, String) {
        match (self.agent, self.token) {
            (Some(agent), _) => ("agent", agent.to_string()),
            (None, Some(token)) => ("token", token.to_string()),
            (None, None) => ("org", String::new()),
        }
    }
}

/// A `svc budget` subcommand.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum BudgetCommand {
    /// Set (or replace) a budget
    Set {
        /// What it limits.
        #[command(flatten)]
        target: TargetArgs,
        /// The limit in US dollars, up to six decimals (e.g. 25 or 0.50)
        #[arg(long, value_name = "AMOUNT", value_parser = usd_micros)]
        usd: i64,
        /// The period it counts over
        #[arg(long, value_name = "PERIOD", value_parser = PossibleValuesParser::new(["day", "week", "month", "total"]))]
        per: String,
        /// `--json`.
        #[command(flatten)]
        output: OutputArgs,
    },
    /// List the org's budgets with what each target spent in the current period
    List {
        /// `--json`.
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Delete a budget
    Delete {
        /// Whose budget.
        #[command(flatten)]
        target: TargetArgs,
        /// `--json`.
        #[command(flatten)]
        output: OutputArgs,
    },
}

/// A dollar amount as whole micro-dollars, read exactly: `12.5` is `12_500_000`.
pub(crate) fn usd_micros(value: &str) -> Result<i64, String> {
    let bad = || format!("{value:?} is not an amount of dollars with at most six decimals");
    let (whole, fraction) = value.trim().split_once('.').unwrap_or((value.trim(), ""));
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) {
        return Err(bad());
    }
    if fraction.len() > 6 {
        return Err(bad());
    }
    let whole: i64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad())?
    };
    let fraction: i64 = format!("{fraction:0<6}").parse().map_err(|_| bad())?;
    whole
        .checked_mul(1_000_000)
        .and_then(|w| w.checked_add(fraction))
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Command, try_parse};

    fn parse(args: &[&str]) -> Result<BudgetCommand, clap::Error> {
        match try_parse(&[&["budget"], args].concat())? {
            Command::Budget(budget) => Ok(budget.command),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn dollars_are_read_exactly() {
        assert_eq!(usd_micros("25"), Ok(25_000_000));
        assert_eq!(usd_micros("0.50"), Ok(500_000));
        assert_eq!(usd_micros(".000001"), Ok(1));
        assert_eq!(usd_micros("12.345678"), Ok(12_345_678));
        for bad in [
            "",
            ".",
            "-1",
            "1.2345678",
            "1e3",
            "$5",
            "1,5",
            "99999999999999",
        ] {
            assert!(usd_micros(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn set_takes_one_target_an_amount_and_a_period() {
        let agent = Uuid::new_v4();
        let agent_arg = agent.to_string();
        assert_eq!(
            parse(&["set", "--agent", &agent_arg, "--usd", "1.5", "--per", "day"]).unwrap(),
            BudgetCommand::Set {
                target: TargetArgs {
                    org: false,
                    agent: Some(agent),
                    token: None
                },
                usd: 1_500_000,
                per: "day".into(),
                output: OutputArgs::default(),
            }
        );
        let BudgetCommand::Delete { target, .. } = parse(&["delete", "--org"]).unwrap() else {
            panic!()
        };
        assert_eq!(target.wire(), ("org", String::new()));
        for bad in [
            &["set", "--usd", "1", "--per", "day"][..],
            &[
                "set", "--org", "--agent", &agent_arg, "--usd", "1", "--per", "day",
            ],
            &["set", "--org", "--usd", "1", "--per", "year"],
            &["set", "--org", "--usd", "-1", "--per", "day"],
            &["delete"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
