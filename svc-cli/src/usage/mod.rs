//! `svc usage`: the usage ledger's totals for the admin token's org (GetUsage), by token,
//! agent, model or day, over a time range. Reached and configured as every admin command is
//! ([`crate::admin`]).

mod args;
mod output;

use std::time::SystemTime;

use svc_proto::v1::GetUsageRequest;

pub use args::UsageArgs;

use crate::admin::{Admin, Failure};
use crate::args::timestamp;

/// Fetches the totals and returns what to print.
pub async fn run(admin: &Admin, args: UsageArgs) -> Result<String, Failure> {
    let now = SystemTime::now();
    let start_time = timestamp("--since", args.since, now)?;
    let end_time = timestamp("--until", args.until, now)?;
    let request = GetUsageRequest {
        org_id: args.org_id.map(|id| id.to_string()).unwrap_or_default(),
        start_time,
        end_time,
        group_by: args.by as i32,
        ..GetUsageRequest::default()
    };
    let (groups, next) = admin
        .list(
            "GetUsage",
            &args.page,
            usize::MAX,
            request,
            async |mut client, request| client.get_usage(request).await,
        )
        .await?;
    Ok(output::totals(
        args.by,
        &groups,
        next.as_deref(),
        args.output.format(),
    ))
}
