//! What `svc token` prints; permissions are shown as names and as the bitmap.

use std::fmt::Write;

use serde_json::{Value, json};
use svc_proto::v1::{RevokeTokenResponse, TokenMetadata};

use super::Created;
use super::permissions::names;
use crate::output::{Format, Table, json_line, time, time_or};

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
            let mut table = Table::new(&[
                ("TOKEN ID", 36),
                ("NAME", 20),
                ("PERMISSIONS", 24),
                ("CREATED", 20),
                ("EXPIRES", 20),
                ("LIMITS", 20),
                ("REVOKED", 0),
            ]);
            for token in tokens {
                table.row(&[
                    token.token_id.clone(),
                    token.name.clone().unwrap_or_else(|| "-".into()),
                    names(token.permissions),
                    time_or(token.created_at.as_ref(), "-"),
                    time_or(token.expires_at.as_ref(), "never"),
                    limits(token.rpm_limit, token.tpm_limit),
                    time_or(token.revoked_at.as_ref(), "-"),
                ]);
            }
            table.finish(next)
        }
    }
}

/// `revoke`: the id and when it was revoked (the first revocation, when repeated).
pub(crate) fn revoked(revoked: &RevokeTokenResponse, format: Format) -> String {
    let at = time(revoked.revoked_at.as_ref());
    match format {
        Format::Json => json_line(&json!({
            "token_id": revoked.token_id,
            "revoked_at": at,
            "issued_revoked": revoked.issued_revoked,
        })),
        Format::Human => {
            let mut out = format!(
                "revoked {} at {}\n",
                revoked.token_id,
                at.as_deref().unwrap_or("-")
            );
            for issued in &revoked.issued_revoked {
                out.push_str(&format!("revoked {issued} with it\n"));
            }
            out
        }
    }
}
