//! What `svc audit` prints: one aligned line per event, or `{"events": [...]}` with the
//! proto's field names.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use svc_proto::v1::AuditEvent;

use crate::output::{Format, Table, json_line, time, time_or};

fn json(event: &AuditEvent) -> Value {
    json!({
        "event_id": event.event_id,
        "org_id": event.org_id,
        "occurred_at": time(event.occurred_at.as_ref()),
        "actor_token_id": event.actor_token_id,
        "action": event.action,
        "target_id": event.target_id,
        "outcome": event.outcome,
        "detail": event.detail,
    })
}

/// `from=active to=paused reason="runaway loop"`, keys in order.
fn detail(event: &AuditEvent) -> String {
    let sorted: BTreeMap<&String, &String> = event.detail.iter().collect();
    let pairs: Vec<String> = sorted
        .into_iter()
        .map(|(key, value)| {
            if value.is_empty() || value.contains(char::is_whitespace) {
                format!("{key}={value:?}")
            } else {
                format!("{key}={value}")
            }
        })
        .collect();
    if pairs.is_empty() {
        "-".to_owned()
    } else {
        pairs.join(" ")
    }
}

/// The events, newest first as the server sends them.
pub(crate) fn listed(events: &[AuditEvent], next: Option<&str>, format: Format) -> String {
    match format {
        Format::Json => json_line(&json!({
            "events": events.iter().map(json).collect::<Vec<_>>(),
            "next_page_token": next,
        })),
        Format::Human => {
            let mut table = Table::new(&[
                ("OCCURRED", 20),
                ("ACTION", 14),
                ("OUTCOME", 7),
                ("ACTOR", 36),
                ("TARGET", 36),
                ("DETAIL", 0),
            ]);
            for event in events {
                table.row(&[
                    time_or(event.occurred_at.as_ref(), "-"),
                    event.action.clone(),
                    event.outcome.clone(),
                    event.actor_token_id.clone().unwrap_or_else(|| "-".into()),
                    event.target_id.clone().unwrap_or_else(|| "-".into()),
                    detail(event),
                ]);
            }
            table.finish(next)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detail_is_sorted_and_quoted_where_needed() {
        let event = AuditEvent {
            detail: [
                ("to", "paused"),
                ("reason", "runaway loop"),
                ("from", "active"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
            ..AuditEvent::default()
        };
        assert_eq!(
            detail(&event),
            r#"from=active reason="runaway loop" to=paused"#
        );
        assert_eq!(detail(&AuditEvent::default()), "-");
    }
}
