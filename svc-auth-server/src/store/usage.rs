//! What GetUsage asks the store for: the ledger's totals of one org over a time range, by one
//! grouping, a page at a time.

use chrono::{DateTime, Utc};

/// What the totals are grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageGroup {
    /// The token id.
    Token,
    /// The agent id (empty for calls without one).
    Agent,
    /// The model the client asked for.
    Model,
    /// The UTC day, `YYYY-MM-DD`.
    Day,
    /// The MCP tool, `server/tool`: tool calls only (the other groupings count provider calls
    /// only).
    Tool,
}

/// One page of totals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageQuery {
    /// The grouping.
    pub group: UsageGroup,
    /// Inclusive start; `None` is no lower bound.
    pub start: Option<DateTime<Utc>>,
    /// Exclusive end; `None` is no upper bound.
    pub end: Option<DateTime<Utc>>,
    /// The last key of the previous page.
    pub after: Option<String>,
    /// Most groups to return.
    pub limit: u32,
}

/// The totals of one group.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct UsageTotals {
    /// The token id, agent id, model or day.
    pub key: String,
    /// Calls counted.
    pub requests: i64,
    /// Prompt tokens summed.
    pub prompt_tokens: i64,
    /// Completion tokens summed.
    pub completion_tokens: i64,
    /// Tool calls that ended `ok` (0 outside tool groups).
    pub ok_calls: i64,
    /// Tool calls that ended `error`.
    pub error_calls: i64,
    /// Tool calls refused as not granted.
    pub denied_calls: i64,
    /// Cost summed, in US micro-dollars.
    pub cost_usd_micros: i64,
}

/// The totals query, with the backend's key expression for the grouping and its placeholders
/// (`$n` or `?n`, numbered 1 to 5: org, start, end, after, limit). Keys compare byte-wise on
/// both backends, so a page cursor means the same everywhere. A tool grouping reads tool calls
/// only, every other grouping provider calls only.
pub(crate) fn totals_sql(group: UsageGroup, key: &str, placeholder: char, collate: &str) -> String {
    let p = |n: u8| format!("{placeholder}{n}");
    let kind = if group == UsageGroup::Tool {
        "tool IS NOT NULL"
    } else {
        "tool IS NULL"
    };
    let outcome = |word: &str| {
        format!("CAST(COALESCE(sum(CASE WHEN outcome = '{word}' THEN 1 ELSE 0 END), 0) AS bigint)")
    };
    format!(
        "SELECT key, count(*) AS requests, \
                CAST(COALESCE(sum(prompt_tokens), 0) AS bigint) AS prompt_tokens, \
                CAST(COALESCE(sum(completion_tokens), 0) AS bigint) AS completion_tokens, \
                {ok} AS ok_calls, {error} AS error_calls, {denied} AS denied_calls, \
                CAST(COALESCE(sum(cost_usd_micros), 0) AS bigint) AS cost_usd_micros \
         FROM (SELECT {key} AS key, prompt_tokens, completion_tokens, outcome, cost_usd_micros \
               FROM usage_ledger \
               WHERE org_id = {org} AND {kind} AND ({start} IS NULL OR created_at >= {start}) \
                 AND ({end} IS NULL OR created_at < {end})) AS calls \
         WHERE {after} IS NULL OR key {collate} > {after} \
         GROUP BY key ORDER BY key {collate} LIMIT {limit}",
        org = p(1),
        start = p(2),
        end = p(3),
        after = p(4),
        limit = p(5),
        ok = outcome("ok"),
        error = outcome("error"),
        denied = outcome("denied"),
    )
}
