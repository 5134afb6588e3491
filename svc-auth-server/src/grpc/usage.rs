//! GetUsage: the usage ledger's totals for the caller's own org.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::Utc;
use svc_proto::v1;
use tonic::Status;

use super::access::own_org;
use super::convert::optional_time;
use super::{next_page, page_size, status};
use crate::store::{Store, UsageGroup, UsageQuery};
use crate::verify::ValidToken;

/// Answers GetUsage for `caller`, whose permission is already checked.
pub(super) async fn get_usage<S: Store>(
    store: &S,
    caller: &ValidToken,
    req: v1::GetUsageRequest,
) -> Result<v1::GetUsageResponse, Status> {
    // Usage is the org's own data: naming another org is refused, never answered empty.
    own_org(caller, &req.org_id)?;
    let group = match v1::UsageGroupBy::try_from(req.group_by) {
        Ok(v1::UsageGroupBy::Unspecified | v1::UsageGroupBy::Token) => UsageGroup::Token,
        Ok(v1::UsageGroupBy::Agent) => UsageGroup::Agent,
        Ok(v1::UsageGroupBy::Model) => UsageGroup::Model,
        Ok(v1::UsageGroupBy::Day) => UsageGroup::Day,
        Ok(v1::UsageGroupBy::Tool) => UsageGroup::Tool,
        Err(_) => return Err(Status::invalid_argument("group_by is not a known grouping")),
    };
    let start = optional_time("start_time", req.start_time)?;
    let end = optional_time("end_time", req.end_time)?.unwrap_or_else(Utc::now);
    if start.is_some_and(|start| start > end) {
        return Err(Status::invalid_argument("start_time is after end_time"));
    }
    let after = match req.page_token.as_str() {
        "" => None,
        token => Some(decode_cursor(token)?),
    };
    let size = page_size(req.page_size);
    let query = UsageQuery {
        group,
        start,
        end: Some(end),
        after,
        // One extra row tells whether another page exists.
        limit: size + 1,
    };
    let rows = store
        .usage(caller.org_id, &query)
        .await
        .map_err(|e| status::store_error("GetUsage", e))?;
    let (rows, next_page_token) = next_page(rows, size, |last| encode_cursor(&last.key));
    Ok(v1::GetUsageResponse {
        groups: rows
            .into_iter()
            .map(|row| v1::UsageTotals {
                total_tokens: row.prompt_tokens.saturating_add(row.completion_tokens),
                outcomes: match group {
                    UsageGroup::Tool => [
                        ("ok", row.ok_calls),
                        ("error", row.error_calls),
                        ("denied", row.denied_calls),
                    ]
                    .into_iter()
                    .map(|(outcome, calls)| (outcome.to_owned(), calls))
                    .collect(),
                    _ => Default::default(),
                },
                key: row.key,
                requests: row.requests,
                prompt_tokens: row.prompt_tokens,
                completion_tokens: row.completion_tokens,
                cost_usd_micros: row.cost_usd_micros,
            })
            .collect(),
        next_page_token,
    })
}

fn encode_cursor(key: &str) -> String {
    URL_SAFE_NO_PAD.encode(key.as_bytes())
}

fn decode_cursor(token: &str) -> Result<String, Status> {
    URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(|| Status::invalid_argument("page_token is not a valid page token"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_garbage_is_invalid_argument() {
        for key in [
            "",
            "gpt-4o",
            "2026-11-24",
            "0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b",
        ] {
            assert_eq!(decode_cursor(&encode_cursor(key)).unwrap(), key);
        }
        let status = decode_cursor("!!").unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        // Valid base64 of bytes that are not UTF-8.
        let status = decode_cursor(&URL_SAFE_NO_PAD.encode([0xff, 0xfe])).unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
    }
}
