//! `svc audit`: the audit trail of the admin token's org (ListAuditEvents), newest first.
//! Reached and configured as every admin command is ([`crate::admin`]).

mod output;

use std::time::SystemTime;

use clap::Args;
use svc_proto::v1::ListAuditEventsRequest;

use crate::admin::{Admin, Failure, ServerArgs};
use crate::args::{OutputArgs, PageArgs, TimeArg, timestamp};

/// The most events one run prints without paging options: a trail grows without end, and
/// past this many a person wants `--since` or `--action`; the cursor to go on is printed.
pub const MAX_EVENTS: usize = 10_000;

/// `svc audit`.
#[derive(Debug, Clone, Args)]
#[command(
    about = "The org's audit trail, newest first",
    long_about = "Every administrative call on the org, granted or denied: who (the admin \
                  token), what (the action), on what (the target) and how it went (ok or \
                  denied), newest first. The admin token needs audit_read.",
    after_help = "--since 24h starts a day ago. Without --page-size or --page-token every page \
                  is read, up to 10000 events; the cursor to go on is printed when more remain."
)]
pub struct AuditArgs {
    /// Events at or after: an RFC 3339 time, or a duration before now (24h)
    #[arg(long, value_name = "DURATION|RFC3339", value_parser = TimeArg::parse)]
    pub since: Option<TimeArg>,
    /// Events before: an RFC 3339 time, or a duration before now
    #[arg(long, value_name = "DURATION|RFC3339", value_parser = TimeArg::parse)]
    pub until: Option<TimeArg>,
    /// Only this action: org.bootstrap, token.create, token.revoke, agent.create,
    /// agent.status, user.create, ...
    #[arg(long, value_name = "ACTION")]
    pub action: Option<String>,
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

/// Fetches the events and returns what to print.
pub async fn run(admin: &Admin, args: AuditArgs) -> Result<String, Failure> {
    let now = SystemTime::now();
    let start_time = timestamp("--since", args.since, now)?;
    let end_time = timestamp("--until", args.until, now)?;
    let request = ListAuditEventsRequest {
        start_time,
        end_time,
        action: args.action,
        ..ListAuditEventsRequest::default()
    };
    let (events, next) = admin
        .list(
            "ListAuditEvents",
            &args.page,
            MAX_EVENTS,
            request,
            async |mut client, request| client.list_audit_events(request).await,
        )
        .await?;
    Ok(output::listed(
        &events,
        next.as_deref(),
        args.output.format(),
    ))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::cli::{Command, try_parse};

    fn parse(args: &[&str]) -> Result<AuditArgs, clap::Error> {
        match try_parse(&[&["audit"], args].concat())? {
            Command::Audit(audit) => Ok(audit),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn since_and_action_parse() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let args = parse(&["--since", "24h", "--action=agent.status", "--json"]).unwrap();
        let since = timestamp("--since", args.since, now).unwrap();
        assert_eq!(since.map(|t| t.seconds), Some(1_000_000 - 86_400));
        assert_eq!(args.action.as_deref(), Some("agent.status"));
        assert!(args.output.json);
        let plain = parse(&[]).unwrap();
        assert_eq!((plain.since, plain.action), (None, None));
        for bad in [&["--since", "yesterday"][..], &["--action"], &["extra"]] {
            parse(bad).expect_err(&format!("{bad:?}"));
        }
    }
}
