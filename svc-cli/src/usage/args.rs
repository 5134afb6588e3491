//! `svc usage` arguments.

use clap::Args;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use svc_proto::v1::UsageGroupBy;
use uuid::Uuid;

use crate::admin::ServerArgs;
use crate::args::{OutputArgs, PageArgs, TimeArg, uuid};

/// What `svc usage` asks for.
#[derive(Debug, Clone, Args)]
#[command(
    about = "The org's usage totals from the ledger",
    long_about = "Totals of the usage ledger (calls, prompt, completion and total tokens) for \
                  the admin token's org, grouped by token (the default), agent, model or UTC \
                  day. The admin token needs usage_read.",
    after_help = "--since 24h counts from a day ago; without --since, from the first call; \
                  without --until, to now. Without --page-size or --page-token every group is \
                  printed."
)]
pub struct UsageArgs {
    /// The grouping
    #[arg(long, default_value = "token", value_parser = group())]
    pub by: UsageGroupBy,
    /// Inclusive start: an RFC 3339 time, or a duration before now (24h)
    #[arg(long, value_name = "DURATION|RFC3339", value_parser = TimeArg::parse)]
    pub since: Option<TimeArg>,
    /// Exclusive end: an RFC 3339 time, or a duration before now
    #[arg(long, value_name = "DURATION|RFC3339", value_parser = TimeArg::parse)]
    pub until: Option<TimeArg>,
    /// The org; the server refuses any but the admin token's
    #[arg(long, value_name = "UUID", value_parser = uuid)]
    pub org_id: Option<Uuid>,
    /// One page or every page.
    #[command(flatten)]
    pub page: PageArgs,
    /// `--json`.
    #[command(flatten)]
    pub output: OutputArgs,
    /// Where the auth server is, and the admin token.
    #[command(flatten)]
    pub server: ServerArgs,
}

fn group() -> impl TypedValueParser<Value = UsageGroupBy> {
    PossibleValuesParser::new(["token", "agent", "model", "day", "tool"]).map(|by| {
        match by.as_str() {
            "agent" => UsageGroupBy::Agent,
            "model" => UsageGroupBy::Model,
            "day" => UsageGroupBy::Day,
            "tool" => UsageGroupBy::Tool,
            _ => UsageGroupBy::Token,
        }
    })
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::cli::{Command, try_parse};
    use crate::output::Format;

    fn parse(args: &[&str]) -> Result<UsageArgs, clap::Error> {
        match try_parse(&[&["usage"], args].concat())? {
            Command::Usage(usage) => Ok(usage),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults_and_every_flag() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let plain = parse(&[]).unwrap();
        assert_eq!(
            (plain.by, plain.since, plain.output.format()),
            (UsageGroupBy::Token, None, Format::Human)
        );
        let full = parse(&[
            "--by=model",
            "--since",
            "24h",
            "--until",
            "1970-01-12T13:46:40Z",
            "--page-size",
            "5",
            "--json",
        ])
        .unwrap();
        assert_eq!(full.by, UsageGroupBy::Model);
        let at = |time: Option<TimeArg>| time.map(|time| time.at(now).unwrap());
        assert_eq!(at(full.since), Some(now - Duration::from_secs(86_400)));
        assert_eq!(at(full.until), Some(now));
        assert_eq!(full.page.page_size, Some(5));
        assert_eq!(full.output.format(), Format::Json);
    }

    #[test]
    fn bad_usage_is_refused() {
        for bad in [
            &["--by", "week"][..],
            &["--since", "yesterday"],
            &["--page-size", "0"],
            &["--org-id", "nope"],
            &["extra"],
            &["--frobnicate", "1"],
        ] {
            parse(bad).expect_err(&format!("{bad:?}"));
        }
    }
}
