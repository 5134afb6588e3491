//! What `svc budget` prints: one aligned line per budget with its limit and spend in dollars,
//! or JSON with the proto's field names.

use serde_json::{Value, json};
use svc_proto::v1::Budget;

use crate::output::{Format, Table, dollars, json_line};

fn json(budget: &Budget) -> Value {
    json!({
        "scope": budget.scope,
        "target_id": budget.target_id,
        "limit_usd_micros": budget.limit_usd_micros,
        "period": budget.period,
        "spent_usd_micros": budget.spent_usd_micros,
    })
}

fn table<'a>(budgets: impl IntoIterator<Item = &'a Budget>) -> String {
    let mut table = Table::new(&[
        ("SCOPE", 5),
        ("TARGET", 36),
        ("PERIOD", 6),
        ("LIMIT_USD", 16),
        ("SPENT_USD", 0),
    ]);
    for budget in budgets {
        let target = if budget.target_id.is_empty() {
            "-"
        } else {
            &budget.target_id
        };
        table.row(&[
            budget.scope.as_str(),
            target,
            &budget.period,
            &dollars(budget.limit_usd_micros),
            &budget.spent_usd_micros.map_or("-".to_owned(), dollars),
        ]);
    }
    table.finish(None)
}

/// One budget, as set.
pub(crate) fn budget(budget: &Budget, format: Format) -> String {
    match format {
        Format::Json => json_line(&json(budget)),
        Format::Human => table([budget]),
    }
}

/// The org's budgets.
pub(crate) fn listed(budgets: &[Budget], format: Format) -> String {
    match format {
        Format::Json => json_line(&json!({
            "budgets": budgets.iter().map(json).collect::<Vec<_>>(),
        })),
        Format::Human => table(budgets),
    }
}

/// A deleted budget's target.
pub(crate) fn deleted(scope: &str, target_id: &str, format: Format) -> String {
    match format {
        Format::Json => {
            json_line(&json!({"scope": scope, "target_id": target_id, "deleted": true}))
        }
        Format::Human if target_id.is_empty() => format!("deleted the {scope} budget\n"),
        Format::Human => format!("deleted the budget of {scope} {target_id}\n"),
    }
}
