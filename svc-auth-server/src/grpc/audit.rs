//! ListAuditEvents: the caller's org's audit trail, newest first.

use svc_proto::v1;
use tonic::Status;

use super::access::Op;
use super::convert::{audit_event, encode_cursor, optional_time, page_cursor};
use super::{next_page, page_size, status};
use crate::store::{AuditAction, AuditQuery, Store};
use crate::verify::ValidToken;
use svc_core::permissions::Permissions;

pub(super) const LIST: Op = Op::read("ListAuditEvents", Permissions::AUDIT_READ, "AUDIT_READ");

/// Answers ListAuditEvents for `caller`, whose permission is already checked.
pub(super) async fn list<S: Store>(
    store: &S,
    caller: &ValidToken,
    req: &v1::ListAuditEventsRequest,
) -> Result<v1::ListAuditEventsResponse, Status> {
    let start = optional_time("start_time", req.start_time)?;
    let end = optional_time("end_time", req.end_time)?;
    if let (Some(start), Some(end)) = (start, end)
        && start > end
    {
        return Err(Status::invalid_argument("start_time is after end_time"));
    }
    let action = match req.action.as_deref() {
        None | Some("") => None,
        Some(word) => Some(AuditAction::parse(word).ok_or_else(|| {
            let known: Vec<&str> = AuditAction::ALL.iter().map(|a| a.as_str()).collect();
            Status::invalid_argument(format!("action is not one of {}", known.join(", ")))
        })?),
    };
    let size = page_size(req.page_size);
    let query = AuditQuery {
        start,
        end,
        action,
        before: page_cursor(&req.page_token)?,
        // One extra row tells whether another page exists.
        limit: size + 1,
    };
    let events = store
        .audit_events(caller.org_id, &query)
        .await
        .map_err(|e| status::store_error(LIST.name, e))?;
    let (events, next_page_token) = next_page(events, size, |last| encode_cursor(last.cursor()));
    Ok(v1::ListAuditEventsResponse {
        events: events.into_iter().map(audit_event).collect(),
        next_page_token,
    })
}
