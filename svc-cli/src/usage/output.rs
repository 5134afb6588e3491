//! What `svc usage` prints: a table with a total line, or one JSON document with `--json`.

use std::fmt::Write;

use serde_json::json;
use svc_proto::v1::{UsageGroupBy, UsageTotals};

use crate::output::{Format, json_line};

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
        sum
    });
    let figures = |g: &UsageTotals| {
        json!({
            "requests": g.requests,
            "prompt_tokens": g.prompt_tokens,
            "completion_tokens": g.completion_tokens,
            "total_tokens": g.total_tokens,
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
                    "{key:<36}  {:>10}  {:>14}  {:>14}  {:>14}",
                    g.requests, g.prompt_tokens, g.completion_tokens, g.total_tokens
                );
            };
            let _ = writeln!(
                out,
                "{:<36}  {:>10}  {:>14}  {:>14}  {:>14}",
                group_name(by).to_uppercase(),
                "REQUESTS",
                "PROMPT",
                "COMPLETION",
                "TOTAL"
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
