//! What `svc token` prints: aligned lines for a person, or one JSON document with `--json`.
//! Times are RFC 3339 in UTC; permissions are shown as names and as the bitmap.

use std::fmt::Write;

use chrono::{DateTime, SecondsFormat, Utc};
use prost_types::Timestamp;
use serde_json::{Value, json};
use svc_proto::v1::{RevokeTokenResponse, TokenMetadata};
use tonic::Status;

use super::Created;
use super::args::Format;
use super::permissions::names;

pub(crate) fn time(timestamp: Option<&Timestamp>) -> Option<String> {
    let timestamp = timestamp?;
    let nanos = u32::try_from(timestamp.nanos).unwrap_or(0);
    DateTime::<Utc>::from_timestamp(timestamp.seconds, nanos)
        .map(|at| at.to_rfc3339_opts(SecondsFormat::Secs, true))
}

pub(crate) fn json_line(value: &Value) -> String {
    format!("{value}\n")
}

/// `create`: the plaintext once, with what it grants.
pub(crate) fn created(created: &Created, format: Format) -> String {
    let response = &created.response;
    let expires_at = time(response.expires_at.as_ref());
    match format {
        Format::Json => json_line(&json!({
            "token_id": response.token_id,
            "token": response.token,
            "org_id": created.org_id,
            "permissions": response.permissions,
            "permission_names": names(response.permissions),
            "created_at": time(response.created_at.as_ref()),
            "expires_at": expires_at,
            "rpm_limit": response.rpm_limit,
            "tpm_limit": response.tpm_limit,
        })),
        Format::Human => {
            let mut out = String::new();
            let _ = writeln!(out, "token:       {}", response.token);
            let _ = writeln!(out, "token id:    {}", response.token_id);
            let _ = writeln!(out, "org id:      {}", created.org_id);
            let _ = writeln!(
                out,
                "permissions: {} ({})",
                names(response.permissions),
                response.permissions
            );
            let _ = writeln!(
                out,
                "expires at:  {}",
                expires_at.as_deref().unwrap_or("never")
            );
            let _ = writeln!(
                out,
                "limits:      {}",
                limits(response.rpm_limit, response.tpm_limit)
            );
            let _ = writeln!(out, "Keep the token now: it is not shown again.");
            out
        }
    }
}

fn metadata_json(token: &TokenMetadata) -> Value {
    json!({
        "token_id": token.token_id,
        "org_id": token.org_id,
        "user_id": token.user_id,
        "agent_id": token.agent_id,
        "name": token.name,
        "permissions": token.permissions,
        "permission_names": names(token.permissions),
        "created_at": time(token.created_at.as_ref()),
        "expires_at": time(token.expires_at.as_ref()),
        "revoked_at": time(token.revoked_at.as_ref()),
        "rpm_limit": token.rpm_limit,
        "tpm_limit": token.tpm_limit,
    })
}

/// A token's own limits for a person: `30 rpm, 40000 tpm`, or `org limits only`.
fn limits(rpm: Option<u32>, tpm: Option<u64>) -> String {
    let parts: Vec<String> = [
        rpm.map(|n| format!("{n} rpm")),
        tpm.map(|n| format!("{n} tpm")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if parts.is_empty() {
        "org limits only".to_owned()
    } else {
        parts.join(", ")
    }
}

/// `list`: one line per token (metadata only: the server never returns a secret).
pub(crate) fn listed(tokens: &[TokenMetadata], next: Option<&str>, format: Format) -> String {
    match format {
        Format::Json => json_line(&json!({
            "tokens": tokens.iter().map(metadata_json).collect::<Vec<_>>(),
            "next_page_token": next,
        })),
        Format::Human => {
            let mut out = String::new();
            let _ = writeln!(
                out,
                "{:<36}  {:<20}  {:<24}  {:<20}  {:<20}  {:<20}  REVOKED",
                "TOKEN ID", "NAME", "PERMISSIONS", "CREATED", "EXPIRES", "LIMITS"
            );
            for token in tokens {
                let _ = writeln!(
                    out,
                    "{:<36}  {:<20}  {:<24}  {:<20}  {:<20}  {:<20}  {}",
                    token.token_id,
                    token.name.as_deref().unwrap_or("-"),
                    names(token.permissions),
                    time(token.created_at.as_ref()).unwrap_or_else(|| "-".into()),
                    time(token.expires_at.as_ref()).unwrap_or_else(|| "never".into()),
                    limits(token.rpm_limit, token.tpm_limit),
                    time(token.revoked_at.as_ref()).unwrap_or_else(|| "-".into()),
                );
            }
            if let Some(next) = next {
                let _ = writeln!(out, "next page: --page-token {next}");
            }
            out
        }
    }
}

/// `revoke`: the id and when it was revoked (the first revocation, when repeated).
pub(crate) fn revoked(revoked: &RevokeTokenResponse, format: Format) -> String {
    let at = time(revoked.revoked_at.as_ref());
    match format {
        Format::Json => json_line(&json!({"token_id": revoked.token_id, "revoked_at": at})),
        Format::Human => format!(
            "revoked {} at {}\n",
            revoked.token_id,
            at.as_deref().unwrap_or("-")
        ),
    }
}

/// A gRPC failure on one line: the code and the server's message.
pub(crate) fn status_line(status: &Status) -> String {
    let message = status.message().replace('\n', " ");
    if message.is_empty() {
        format!("{:?}", status.code())
    } else {
        format!("{:?}: {message}", status.code())
    }
}
