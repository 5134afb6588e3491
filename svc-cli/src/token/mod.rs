//! `svc token create | list | revoke`: token administration against any auth server.
//!
//! Reached and configured as every admin command is ([`crate::admin`]). `create` without
//! `--org-id` asks ValidateToken which org the admin token belongs to. Output is lines for a
//! person, or one JSON document with `--json`; `create` prints the new token's plaintext once,
//! and it is never shown again.

mod args;
mod output;
mod permissions;

use std::time::SystemTime;

use prost_types::Timestamp;
use svc_proto::v1::{CreateTokenRequest, ListTokensRequest, RevokeTokenRequest};

pub use args::{CreateArgs, Expiry, TokenArgs, TokenCommand};

use crate::admin::{Admin, Failure};

/// Runs one `svc token` subcommand and returns what to print.
pub async fn run(admin: &Admin, command: TokenCommand) -> Result<String, Failure> {
    match command {
        TokenCommand::Create(args) => {
            let format = args.output.format();
            let created = create(admin, args).await?;
            Ok(output::created(&created, format))
        }
        TokenCommand::List { page, output } => {
            let request = ListTokensRequest::default();
            let (tokens, next) = admin
                .list(
                    "ListTokens",
                    &page,
                    usize::MAX,
                    request,
                    async |mut client, request| client.list_tokens(request).await,
                )
                .await?;
            Ok(output::listed(&tokens, next.as_deref(), output.format()))
        }
        TokenCommand::Revoke {
            token_id,
            keep_issued,
            output,
        } => {
            let request = RevokeTokenRequest {
                token_id: token_id.to_string(),
                keep_issued,
            };
            let revoked = admin
                .call("RevokeToken", request, async |mut client, request| {
                    client.revoke_token(request).await
                })
                .await?;
            Ok(output::revoked(&revoked, output.format()))
        }
    }
}

/// A token just created, with the org it was created in.
#[derive(Debug)]
pub struct Created {
    /// The org.
    pub org_id: String,
    /// CreateToken's answer, plaintext included.
    pub response: svc_proto::v1::CreateTokenResponse,
}

async fn create(admin: &Admin, args: CreateArgs) -> Result<Created, Failure> {
    let org_id = match args.org_id {
        Some(org_id) => org_id.to_string(),
        None => admin.org().await?,
    };
    let expires_at = match args.expiry() {
        Expiry::Never => None,
        Expiry::In(duration) => Some(Timestamp::from(SystemTime::now() + duration)),
        Expiry::At(at) => Some(Timestamp {
            seconds: at.timestamp(),
            nanos: i32::try_from(at.timestamp_subsec_nanos()).unwrap_or(0),
        }),
    };
    let request = CreateTokenRequest {
        org_id: org_id.clone(),
        user_id: args.user_id.map(|id| id.to_string()),
        agent_id: args.agent_id.map(|id| id.to_string()),
        permissions: args.permissions.bits(),
        expires_at,
        name: args.name,
        rpm_limit: args.rpm,
        tpm_limit: args.tpm,
    };
    let response = admin
        .call("CreateToken", request, async |mut client, request| {
            client.create_token(request).await
        })
        .await?;
    Ok(Created { org_id, response })
}
