//! `svc usage`: the usage ledger's totals for the admin token's org (GetUsage), by token,
//! agent, model or day, over a time range. Reached and configured as `svc token` is.

mod args;
mod output;

use std::time::SystemTime;

use prost_types::Timestamp;
use svc_proto::v1::{GetUsageRequest, UsageTotals};
use svc_runtime::config::{EXIT_CONFIG, Vars};

pub use args::{UsageArgs, parse};

use crate::token::{Admin, Failure, TokenConfig, exit_code, pages};

const USAGE: &str = "\
usage: svc usage [--by token|agent|model|day] [--since DURATION|RFC3339] [--until RFC3339]
                 [--org-id UUID] [--page-size N] [--page-token CURSOR] [--json]

Totals of the usage ledger (calls, prompt, completion and total tokens) for the admin token's
org, grouped by token (the default), agent, model or UTC day. --since 24h counts from a day
ago; without --since, from the first call; without --until, to now. Without --page-size or
--page-token every group is printed. Needs SVC_AUTH_GRPC_ADDR and SVC_ADMIN_TOKEN (a token
holding usage_read), as svc token does.";

/// Runs `svc usage` with the arguments after `usage`; returns the exit code.
pub async fn main(args: &[String]) -> i32 {
    let args = match parse(args, SystemTime::now()) {
        Ok(Some(args)) => args,
        Ok(None) => {
            println!("{USAGE}");
            return 0;
        }
        Err(problem) => {
            eprintln!("error: {problem} (see svc usage --help)");
            return i32::from(EXIT_CONFIG);
        }
    };
    let config = match TokenConfig::from_vars(&Vars::from_env()) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("error: {error}");
            return i32::from(EXIT_CONFIG);
        }
    };
    exit_code(run(&config, args).await)
}

/// Fetches the totals and returns what to print.
pub async fn run(config: &TokenConfig, args: UsageArgs) -> Result<String, Failure> {
    let admin = Admin::connect(config)?;
    let (groups, next): (Vec<UsageTotals>, _) = pages(
        "GetUsage",
        args.page_size,
        args.page_token.clone(),
        |page_token| {
            let request = GetUsageRequest {
                org_id: args.org_id.map(|id| id.to_string()).unwrap_or_default(),
                start_time: args.since.map(Timestamp::from),
                end_time: args.until.map(Timestamp::from),
                group_by: args.by as i32,
                page_size: args.page_size.unwrap_or(0),
                page_token,
            };
            let admin = &admin;
            async move {
                let page = admin
                    .client
                    .clone()
                    .get_usage(admin.request(request))
                    .await
                    .map_err(|status| Failure::Call("GetUsage", status))?
                    .into_inner();
                Ok((page.groups, page.next_page_token))
            }
        },
    )
    .await?;
    Ok(output::totals(
        args.by,
        &groups,
        next.as_deref(),
        args.format,
    ))
}
