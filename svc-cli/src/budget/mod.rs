//! `svc budget`: money budgets of the admin token's org, its agents and its tokens
//! (SetBudget, ListBudgets, DeleteBudget). Reached and configured as every admin command is
//! ([`crate::admin`]).

mod args;
mod output;

use svc_proto::v1::{DeleteBudgetRequest, ListBudgetsRequest, SetBudgetRequest};

pub use args::{BudgetArgs, BudgetCommand, TargetArgs};

use crate::admin::{Admin, Failure};

/// Runs one `svc budget` subcommand and returns what to print.
pub async fn run(admin: &Admin, command: BudgetCommand) -> Result<String, Failure> {
    match command {
        BudgetCommand::Set {
            target,
            usd,
            per,
            output,
        } => {
            let (scope, target_id) = target.wire();
            let request = SetBudgetRequest {
                scope: scope.to_owned(),
                target_id,
                limit_usd_micros: usd,
                period: per,
            };
            let budget = admin
                .call("SetBudget", request, async |mut client, request| {
                    client.set_budget(request).await
                })
                .await?;
            Ok(output::budget(&budget, output.format()))
        }
        BudgetCommand::List { output } => {
            let listed = admin
                .call(
                    "ListBudgets",
                    ListBudgetsRequest {},
                    async |mut client, request| client.list_budgets(request).await,
                )
                .await?;
            Ok(output::listed(&listed.budgets, output.format()))
        }
        BudgetCommand::Delete { target, output } => {
            let (scope, target_id) = target.wire();
            let request = DeleteBudgetRequest {
                scope: scope.to_owned(),
                target_id: target_id.clone(),
            };
            admin
                .call("DeleteBudget", request, async |mut client, request| {
                    client.delete_budget(request).await
                })
                .await?;
            Ok(output::deleted(scope, &target_id, output.format()))
        }
    }
}
