//! Conversions between the proto messages and the store's records.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use prost_types::Timestamp;
use svc_proto::v1;
use tonic::Status;
use uuid::Uuid;

use crate::store::{AgentDetail, AuditEvent, Cursor, TokenLimits, TokenMetadata, User};
use crate::verify::ValidToken;

/// A proto timestamp.
pub(crate) fn timestamp(at: DateTime<Utc>) -> Timestamp {
    Timestamp {
        seconds: at.timestamp(),
        nanos: i32::try_from(at.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

/// A proto timestamp as a time, `None` when out of range.
pub(crate) fn from_timestamp(at: &Timestamp) -> Option<DateTime<Utc>> {
    let nanos = u32::try_from(at.nanos).ok()?;
    DateTime::from_timestamp(at.seconds, nanos)
}

/// An optional proto timestamp field as a time; out of range is InvalidArgument naming it.
pub(crate) fn optional_time(
    field: &'static str,
    at: Option<Timestamp>,
) -> Result<Option<DateTime<Utc>>, Status> {
    at.map(|at| {
        from_timestamp(&at)
            .ok_or_else(|| Status::invalid_argument(format!("{field} is not a valid timestamp")))
    })
    .transpose()
}

/// A UUID field, or InvalidArgument naming the field (never echoing the value).
pub(crate) fn parse_id(field: &'static str, value: &str) -> Result<Uuid, Status> {
    Uuid::try_parse(value).map_err(|_| Status::invalid_argument(format!("{field} is not a UUID")))
}

/// An optional UUID field; an empty string counts as absent.
pub(crate) fn parse_optional_id(
    field: &'static str,
    value: Option<&str>,
) -> Result<Option<Uuid>, Status> {
    match value {
        None | Some("") => Ok(None),
        Some(value) => parse_id(field, value).map(Some),
    }
}

pub(crate) fn validate_token_response(token: ValidToken) -> v1::ValidateTokenResponse {
    v1::ValidateTokenResponse {
        org_id: token.org_id.to_string(),
        permissions: token.permissions.bits(),
        agent_id: token.agent_id.map(|id| id.to_string()),
        user_id: token.user_id.map(|id| id.to_string()),
        token_id: token.token_id.to_string(),
        expires_at: token.expires_at.map(timestamp),
        agent: None,
        rpm_limit: token.limits.rpm,
        tpm_limit: token.limits.tpm,
        budgets: (token.budgets.into_iter())
            .map(|b| super::budgets::budget(b, None))
            .collect(),
    }
}

/// The requested limits of CreateToken; a limit of 0 would refuse every request, so it is
/// InvalidArgument rather than a token that can never be used.
pub(crate) fn requested_limits(rpm: Option<u32>, tpm: Option<u64>) -> Result<TokenLimits, Status> {
    if rpm == Some(0) || tpm == Some(0) {
        return Err(Status::invalid_argument(
            "rpm_limit and tpm_limit must be at least 1 when present",
        ));
    }
    if tpm.is_some_and(|tpm| i64::try_from(tpm).is_err()) {
        return Err(Status::invalid_argument("tpm_limit is out of range"));
    }
    Ok(TokenLimits { rpm, tpm })
}

pub(crate) fn token_metadata(token: TokenMetadata) -> v1::TokenMetadata {
    v1::TokenMetadata {
        token_id: token.token_id.to_string(),
        org_id: token.org_id.to_string(),
        user_id: token.user_id.map(|id| id.to_string()),
        agent_id: token.agent_id.map(|id| id.to_string()),
        permissions: token.permissions.bits(),
        name: token.name,
        created_at: Some(timestamp(token.created_at)),
        expires_at: token.expires_at.map(timestamp),
        revoked_at: token.revoked_at.map(timestamp),
        issuer_token_id: token.issuer_token_id.map(|id| id.to_string()),
        rpm_limit: token.limits.rpm,
        tpm_limit: token.limits.tpm,
    }
}

/// An optional name: empty counts as absent; longer than `max` characters is InvalidArgument.
pub(crate) fn optional_text(
    field: &'static str,
    value: Option<String>,
    max: usize,
) -> Result<Option<String>, Status> {
    let value = value.filter(|value| !value.is_empty());
    if value
        .as_ref()
        .is_some_and(|value| value.chars().count() > max)
    {
        return Err(Status::invalid_argument(format!(
            "{field} is longer than {max} characters"
        )));
    }
    Ok(value)
}

pub(crate) fn agent(detail: AgentDetail) -> v1::Agent {
    v1::Agent {
        agent_id: detail.agent.agent_id.to_string(),
        org_id: detail.agent.org_id.to_string(),
        name: detail.agent.name,
        status: detail.agent.status.as_str().to_owned(),
        created_at: Some(timestamp(detail.agent.created_at)),
        updated_at: Some(timestamp(detail.updated_at)),
        status_reason: detail.status_reason,
        tools: detail.agent.tools,
    }
}

pub(crate) fn user(org_id: Uuid, user: User) -> v1::User {
    v1::User {
        user_id: user.user_id.to_string(),
        org_id: org_id.to_string(),
        name: user.name,
        created_at: Some(timestamp(user.created_at)),
    }
}

pub(crate) fn audit_event(event: AuditEvent) -> v1::AuditEvent {
    v1::AuditEvent {
        event_id: event.event_id.to_string(),
        org_id: event.org_id.to_string(),
        occurred_at: Some(timestamp(event.occurred_at)),
        actor_token_id: event.actor_token_id.map(|id| id.to_string()),
        action: event.action,
        target_id: event.target_id,
        outcome: event.outcome,
        detail: event.detail.into_iter().collect(),
    }
}

const CURSOR_LEN: usize = 8 + 16;

/// An opaque page token: base64url of the row's time (µs) and id.
pub(crate) fn encode_cursor(cursor: Cursor) -> String {
    let mut bytes = [0u8; CURSOR_LEN];
    bytes[..8].copy_from_slice(&cursor.at.timestamp_micros().to_be_bytes());
    bytes[8..].copy_from_slice(cursor.id.as_bytes());
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Decodes an optional page token (empty means the first page); InvalidArgument when it is
/// not one of ours.
pub(crate) fn page_cursor(page_token: &str) -> Result<Option<Cursor>, Status> {
    match page_token {
        "" => Ok(None),
        token => decode_cursor(token).map(Some),
    }
}

/// Decodes a page token; InvalidArgument when it is not one of ours.
pub(crate) fn decode_cursor(page_token: &str) -> Result<Cursor, Status> {
    let invalid = || Status::invalid_argument("page_token is not a valid page token");
    let bytes = URL_SAFE_NO_PAD.decode(page_token).map_err(|_| invalid())?;
    let bytes: [u8; CURSOR_LEN] = bytes.try_into().map_err(|_| invalid())?;
    let mut micros = [0u8; 8];
    micros.copy_from_slice(&bytes[..8]);
    let at = DateTime::from_timestamp_micros(i64::from_be_bytes(micros)).ok_or_else(invalid)?;
    let id = Uuid::from_slice(&bytes[8..]).map_err(|_| invalid())?;
    Ok(Cursor { at, id })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_garbage_is_invalid_argument() {
        let cursor = Cursor {
            at: DateTime::from_timestamp_micros(1_763_700_000_123_456).unwrap(),
            id: Uuid::new_v4(),
        };
        assert_eq!(decode_cursor(&encode_cursor(cursor)).unwrap(), cursor);
        for bad in ["x", "!!!!", "AAAA", &encode_cursor(cursor)[1..]] {
            let status = decode_cursor(bad).unwrap_err();
            assert_eq!(status.code(), tonic::Code::InvalidArgument, "{bad}");
        }
    }

    #[test]
    fn timestamps_round_trip() {
        let at = DateTime::from_timestamp(1_763_700_000, 123_456_789).unwrap();
        assert_eq!(from_timestamp(&timestamp(at)), Some(at));
        let negative_nanos = Timestamp {
            seconds: 1,
            nanos: -1,
        };
        assert_eq!(from_timestamp(&negative_nanos), None);
    }

    #[test]
    fn ids_are_checked_without_echoing() {
        let status = parse_id("agent_id", "<script>").unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert!(!status.message().contains("<script>"));
        assert_eq!(parse_optional_id("user_id", Some("")).unwrap(), None);
    }
}
