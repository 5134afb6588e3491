//! Token management over the gRPC admin API of `svc.auth.v1.AuthService`, with the generated
//! client of `svc-proto` (feature `client`): CreateToken, ListTokens page by page, RevokeToken,
//! then ValidateToken refusing the revoked token.
//!
//! Run: `cargo run -p svc-examples --example grpc_admin` against a running auth server (see
//! that file for the steps).
//!
//! Admin calls carry the admin PAT as metadata, `authorization: Bearer svc_pat_...`; an
//! [`AdminBearer`] interceptor adds it to every call of one client, so no call can forget it.
//! ValidateToken and ValidateAgent need no credentials and go through a plain client over the
//! same channel.

use std::fmt;
use std::time::{Duration, SystemTime};

use prost_types::Timestamp;
use svc_proto::v1::auth_service_client::AuthServiceClient;
use svc_proto::v1::{
    CreateTokenRequest, ListTokensRequest, PermissionBit, RevokeTokenRequest, TokenMetadata,
    ValidateTokenRequest,
};
use tonic::metadata::AsciiMetadataValue;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Status};

/// The name the walkthrough gives the token it creates.
pub const TOKEN_NAME: &str = "grpc-admin-example";
/// How long the created token lives, had it not been revoked.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(60 * 60);
/// The most pages the walkthrough reads before it gives up on a cursor that never ends.
const MAX_PAGES: usize = 1_000;

/// A client whose every call carries the admin PAT.
pub type AdminClient = AuthServiceClient<InterceptedService<Channel, AdminBearer>>;

/// Adds `authorization: Bearer <admin PAT>` to every call of a client.
#[derive(Clone)]
pub struct AdminBearer(AsciiMetadataValue);

impl AdminBearer {
    /// The interceptor for `admin_token`, a full `svc_pat_...` value.
    pub fn new(admin_token: &str) -> Result<AdminBearer, AdminError> {
        let mut value = AsciiMetadataValue::try_from(format!("Bearer {admin_token}"))
            .map_err(|_| AdminError::MalformedToken)?;
        // Keeps the value out of HPACK's dynamic table and out of debug output.
        value.set_sensitive(true);
        Ok(AdminBearer(value))
    }
}

impl fmt::Debug for AdminBearer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AdminBearer(<omitted>)")
    }
}

impl Interceptor for AdminBearer {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        request
            .metadata_mut()
            .insert("authorization", self.0.clone());
        Ok(request)
    }
}

/// Why the walkthrough stopped.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// Not `host:port` or `http(s)://host:port`.
    #[error("invalid auth service address")]
    Address(#[source] tonic::transport::Error),
    /// The auth service did not accept a connection.
    #[error("cannot connect to the auth service")]
    Connect(#[source] tonic::transport::Error),
    /// The admin token holds characters that cannot travel as metadata.
    #[error("the admin token is not a valid metadata value")]
    MalformedToken,
    /// A call answered an error status.
    #[error("{step} failed with {}", .status.code())]
    Call {
        /// The call that failed.
        step: &'static str,
        /// What the server answered.
        #[source]
        status: Status,
    },
    /// A call answered something the walkthrough cannot continue from.
    #[error("unexpected answer: {0}")]
    Unexpected(&'static str),
}

fn failed(step: &'static str) -> impl FnOnce(Status) -> AdminError {
    move |status| AdminError::Call { step, status }
}

/// Connects to the auth service at `addr` (`host:port` or `http(s)://host:port`).
pub async fn connect(addr: &str) -> Result<Channel, AdminError> {
    let uri = if addr.contains("://") {
        addr.to_owned()
    } else {
        format!("http://{addr}")
    };
    Endpoint::from_shared(uri)
        .map_err(AdminError::Address)?
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(10))
        .connect()
        .await
        .map_err(AdminError::Connect)
}

/// The token the walkthrough created. Its plaintext is shown once, here, and never again.
#[derive(Clone)]
pub struct CreatedToken {
    /// Its id.
    pub token_id: String,
    /// The plaintext PAT: hand it to its user, never log it.
    pub token: String,
    /// The permission bitmap it holds.
    pub permissions: i64,
    /// When it would expire.
    pub expires_at: Option<Timestamp>,
}

impl fmt::Debug for CreatedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CreatedToken")
            .field("token_id", &self.token_id)
            .field("token", &"<omitted>")
            .field("permissions", &self.permissions)
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// What each step of [`run`] saw.
#[derive(Debug, Clone)]
pub struct Walkthrough {
    /// The admin token's org, from ValidateToken: the org every admin call works in.
    pub org_id: String,
    /// CreateToken's answer.
    pub created: CreatedToken,
    /// The org ValidateToken reported for the new token before it was revoked.
    pub validated_org_id: String,
    /// ListTokens, one entry per page, in order.
    pub pages: Vec<Vec<TokenMetadata>>,
    /// RevokeToken's `revoked_at`.
    pub revoked_at: Option<Timestamp>,
    /// ValidateToken's answer for the revoked token: `Unauthenticated`.
    pub after_revoke: Code,
}

/// The bit of a permission in the int64 bitmap.
pub fn permission(bit: PermissionBit) -> i64 {
    1 << bit as i32
}

/// Creates a chat token in the admin token's org, lists the org's tokens `page_size` at a
/// time, revokes the new token and shows ValidateToken refusing it.
pub async fn run(
    channel: Channel,
    admin_token: &str,
    page_size: i32,
) -> Result<Walkthrough, AdminError> {
    let mut plain = AuthServiceClient::new(channel.clone());
    let mut admin: AdminClient =
        AuthServiceClient::with_interceptor(channel, AdminBearer::new(admin_token)?);

    // CreateToken's org_id must be the admin token's own; ask the server rather than guess.
    let org_id = plain
        .validate_token(ValidateTokenRequest {
            access_token: admin_token.to_owned(),
            agent_id: None,
        })
        .await
        .map_err(failed("ValidateToken (admin token)"))?
        .into_inner()
        .org_id;

    let created = admin
        .create_token(CreateTokenRequest {
            org_id: org_id.clone(),
            user_id: None,
            agent_id: None,
            permissions: permission(PermissionBit::ChatCompletions),
            expires_at: Some(Timestamp::from(SystemTime::now() + TOKEN_LIFETIME)),
            name: Some(TOKEN_NAME.to_owned()),
            rpm_limit: None,
            tpm_limit: None,
        })
        .await
        .map_err(failed("CreateToken"))?
        .into_inner();
    let created = CreatedToken {
        token_id: created.token_id,
        token: created.token,
        permissions: created.permissions,
        expires_at: created.expires_at,
    };

    let validated_org_id = plain
        .validate_token(ValidateTokenRequest {
            access_token: created.token.clone(),
            agent_id: None,
        })
        .await
        .map_err(failed("ValidateToken (new token)"))?
        .into_inner()
        .org_id;

    let pages = list_all(&mut admin, page_size).await?;

    let revoked_at = admin
        .revoke_token(RevokeTokenRequest {
            token_id: created.token_id.clone(),
            keep_issued: false,
        })
        .await
        .map_err(failed("RevokeToken"))?
        .into_inner()
        .revoked_at;

    // Revocation is immediate: the very next validation is refused.
    let after_revoke = match plain
        .validate_token(ValidateTokenRequest {
            access_token: created.token.clone(),
            agent_id: None,
        })
        .await
    {
        Ok(_) => Code::Ok,
        Err(status) => status.code(),
    };

    Ok(Walkthrough {
        org_id,
        created,
        validated_org_id,
        pages,
        revoked_at,
        after_revoke,
    })
}

/// Every page of ListTokens, following `next_page_token` until it comes back empty.
pub async fn list_all(
    admin: &mut AdminClient,
    page_size: i32,
) -> Result<Vec<Vec<TokenMetadata>>, AdminError> {
    let mut pages = Vec::new();
    let mut page_token = String::new();
    loop {
        if pages.len() == MAX_PAGES {
            return Err(AdminError::Unexpected(
                "ListTokens never reached its last page",
            ));
        }
        let page = admin
            .list_tokens(ListTokensRequest {
                page_size,
                page_token,
            })
            .await
            .map_err(failed("ListTokens"))?
            .into_inner();
        pages.push(page.tokens);
        if page.next_page_token.is_empty() {
            return Ok(pages);
        }
        page_token = page.next_page_token;
    }
}
