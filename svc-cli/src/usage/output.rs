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
        UsageGroupBy::Tool => "tool",
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
        for (outcome, calls) in &g.outcomes {
            *sum.outcomes.entry(outcome.clone()).or_default() += calls;
        }
        sum.cost_usd_micros += g.cost_usd_micros;
        sum
    });
    let tools = by == UsageGroupBy::Tool;
    let figures = |g: &UsageTotals| {
        let mut figures = if tools {
            json!({"requests": g.requests, "outcomes": g.outcomes})
        } else {
            json!({
                "requests": g.requests,
                "prompt_tokens": g.prompt_tokens,
                "completion_tokens": g.completion_tokens,
                "total_tokens": g.total_tokens,
            })
        };
        figures["cost_usd_micros"] = json!(g.cost_usd_micros);
        figures["cost_usd"] = json!(dollars(g.cost_usd_micros));
        figures
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
                let outcome = |word: &str| g.outcomes.get(word).copied().unwrap_or(0);
                let counts = if tools {
                    [outcome("ok"), outcome("error"), outcome("denied")]
                } else {
                    [g.prompt_tokens, g.completion_tokens, g.total_tokens]
                };
                let _ = writeln!(
                    out,
                    "{key:<36}  {:>10}  {:>14}  {:>14}  {:>14}  {:>16}",
                    g.requests,
                    counts[0],
                    counts[1],
                    counts[2],
                    dollars(g.cost_usd_micros)
                );
            };
            let columns = if tools {
                ["CALLS", "OK", "ERROR", "DENIED"]
            } else {
                ["REQUESTS", "PROMPT", "COMPLETION", "TOTAL"]
            };
            let _ = writeln!(
                out,
                "{:<36}  {:>10}  {:>14}  {:>14}  {:>14}  {:>16}",
                group_name(by).to_uppercase(),
                columns[0],
                columns[1],
                columns[2],
                columns[3],
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
    fn tool_groups_print_calls_by_outcome() {
        let group = UsageTotals {
            key: "srv/echo".into(),
            requests: 3,
            outcomes: [("ok".to_owned(), 2), ("denied".to_owned(), 1)].into(),
            ..UsageTotals::default()
        };
        let human = totals(
            UsageGroupBy::Tool,
            std::slice::from_ref(&group),
            None,
            Format::Human,
        );
        let lines: Vec<Vec<&str>> = human
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            lines[0],
            ["TOOL", "CALLS", "OK", "ERROR", "DENIED", "COST_USD"]
        );
        assert_eq!(lines[1], ["srv/echo", "3", "2", "0", "1", "0.000000"]);
        assert_eq!(lines[2], ["total", "3", "2", "0", "1", "0.000000"]);
        let json: serde_json::Value =
            serde_json::from_str(&totals(UsageGroupBy::Tool, &[group], None, Format::Json))
                .unwrap();
        assert_eq!(json["group_by"], "tool");
        assert_eq!(json["groups"][0]["outcomes"]["denied"], 1);
        assert_eq!(json["total"]["outcomes"]["ok"], 2);
    }

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
