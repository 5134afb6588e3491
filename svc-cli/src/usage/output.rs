//! What `svc usage` prints: a table with a total line, or one JSON document with `--json`.

use std::fmt::Write;

use serde_json::json;
use svc_proto::v1::{UsageGroupBy, UsageTotals};

use crate::output::{Format, dollars, json_line};

fn group_name(by: UsageGroupBy) -> &'static str {
    match by {
        UsageGroupBy::Agent => "agent",
        UsageGroupBy::Model => "model",
        UsageGroupBy::Day => "day",
        UsageGroupBy::Token | UsageGroupBy::Unspecified => "token",
    }
}

/// The groups, and their sum.
pub(crate) fn totals(
    by: UsageGroupBy,
    groups: &[UsageTotals],
    next: Option<&str>,
    format: Format,
) -> String {
    let sum = groups.iter().fold(UsageTotals::default(), |mut sum, g| {
        sum.requests += g.requests;
        sum.prompt_tokens += g.prompt_tokens;
        sum.completion_tokens += g.completion_tokens;
        sum.total_tokens += g.total_tokens;
        sum.cost_usd_micros += g.cost_usd_micros;
        sum
    });
    let figures = |g: &UsageTotals| {
        json!({
            "requests": g.requests,
            "prompt_tokens": g.prompt_tokens,
            "completion_tokens": g.completion_tokens,
            "total_tokens": g.total_tokens,
            "cost_usd_micros": g.cost_usd_micros,
            "cost_usd": dollars(g.cost_usd_micros),
        })
    };
    match format {
        Format::Json => {
            let rows: Vec<_> = groups
                .iter()
                .map(|g| {
                    let mut row = figures(g);
                    row["key"] = json!(g.key);
                    row
                })
                .collect();
            json_line(&json!({
                "group_by": group_name(by),
                "groups": rows,
                "total": figures(&sum),
                "next_page_token": next,
            }))
        }
        Format::Human => {
            let mut out = String::new();
            let line = |out: &mut String, key: &str, g: &UsageTotals| {
                let _ = writeln!(
                    out,
                    "{key:<36}  {:>10}  {:>14}  {:>14}  {:>14}  {:>16}",
                    g.requests,
                    g.prompt_tokens,
                    g.completion_tokens,
                    g.total_tokens,
                    dollars(g.cost_usd_micros)
                );
            };
            let _ = writeln!(
                out,
                "{:<36}  {:>10}  {:>14}  {:>14}  {:>14}  {:>16}",
                group_name(by).to_uppercase(),
                "REQUESTS",
                "PROMPT",
                "COMPLETION",
                "TOTAL",
                "COST_USD"
            );
            for group in groups {
                let key = if group.key.is_empty() {
                    "-"
                } else {
                    &group.key
                };
                line(&mut out, key, group);
            }
            line(&mut out, "total", &sum);
            if let Some(next) = next {
                let _ = writeln!(out, "next page: --page-token {next}");
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_prints_in_dollars_and_sums_into_the_total() {
        let group = |key: &str, cost| UsageTotals {
            key: key.to_owned(),
            requests: 1,
            cost_usd_micros: cost,
            ..UsageTotals::default()
        };
        let groups = [group("a", 1_250), group("b", 2_500_000)];
        let human = totals(UsageGroupBy::Model, &groups, None, Format::Human);
        assert!(human.contains("COST_USD"), "{human}");
        assert!(human.contains("0.001250"), "{human}");
        let total = human.lines().last().unwrap();
        assert!(total.ends_with("2.501250"), "{human}");
        let json: serde_json::Value =
            serde_json::from_str(&totals(UsageGroupBy::Model, &groups, None, Format::Json))
                .unwrap();
        assert_eq!(json["total"]["cost_usd_micros"], 2_501_250);
        assert_eq!(json["groups"][0]["cost_usd"], "0.001250");
    }
}
