//! The identity records the store reads and writes, free of any backend's types.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use svc_tower::context::Permissions;
use uuid::Uuid;

/// A tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Organization {
    /// Its id.
    pub org_id: Uuid,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// A human operator, member of one or more orgs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// Its id.
    pub user_id: Uuid,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// What a user may do in an org it belongs to (recorded for audit; tokens carry permissions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MembershipRole {
    /// Owns the org.
    Owner,
    /// Administers the org.
    Admin,
    /// A plain member.
    Member,
}

impl MembershipRole {
    /// The stored word.
    pub fn as_str(self) -> &'static str {
        match self {
            MembershipRole::Owner => "owner",
            MembershipRole::Admin => "admin",
            MembershipRole::Member => "member",
        }
    }
}

/// A user to create as a member of an org.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewUser {
    /// Its id, chosen by the caller.
    pub user_id: Uuid,
    /// Optional display name, at most 256 characters.
    pub display_name: Option<String>,
    /// Its role in the org.
    pub role: MembershipRole,
}

/// The status of an agent. Only `active` passes ValidateAgent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AgentStatus {
    /// May call.
    Active,
    /// Temporarily stopped.
    Paused,
    /// Stopped by an operator.
    Suspended,
    /// Retired.
    Archived,
}

impl AgentStatus {
    /// Every status, in SPEC order.
    pub const ALL: [AgentStatus; 4] = [
        AgentStatus::Active,
        AgentStatus::Paused,
        AgentStatus::Suspended,
        AgentStatus::Archived,
    ];

    /// The stored and wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentStatus::Active => "active",
            AgentStatus::Paused => "paused",
            AgentStatus::Suspended => "suspended",
            AgentStatus::Archived => "archived",
        }
    }
}

impl fmt::Display for AgentStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A word that is not an agent status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown agent status {0:?} (expected active, paused, suspended or archived)")]
pub struct UnknownAgentStatus(pub String);

impl FromStr for AgentStatus {
    type Err = UnknownAgentStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AgentStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| UnknownAgentStatus(s.to_owned()))
    }
}

/// An autonomous caller, bound to one org.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    /// Its id.
    pub agent_id: Uuid,
    /// Its org.
    pub org_id: Uuid,
    /// Its status.
    pub status: AgentStatus,
    /// Optional name.
    pub name: Option<String>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// An agent to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAgent {
    /// Its id, chosen by the caller.
    pub agent_id: Uuid,
    /// Its status.
    pub status: AgentStatus,
    /// Optional name, at most 256 characters.
    pub name: Option<String>,
}

/// A token's own rate limits; `None` means only the org's limit applies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenLimits {
    /// Requests per minute.
    pub rpm: Option<u32>,
    /// Tokens per minute.
    pub tpm: Option<u64>,
}

impl TokenLimits {
    /// The limits as stored (`bigint` columns).
    pub(crate) fn columns(self) -> (Option<i64>, Option<i64>) {
        (
            self.rpm.map(i64::from),
            self.tpm.map(|tpm| i64::try_from(tpm).unwrap_or(i64::MAX)),
        )
    }

    /// The limits from their stored columns; a value out of range (not written by this code)
    /// is a query error rather than a silently different limit.
    pub(crate) fn from_columns(
        rpm: Option<i64>,
        tpm: Option<i64>,
    ) -> Result<TokenLimits, super::StoreError> {
        let out_of_range =
            || super::StoreError::Query("a stored token limit is out of range".into());
        Ok(TokenLimits {
            rpm: rpm
                .map(|v| u32::try_from(v).map_err(|_| out_of_range()))
                .transpose()?,
            tpm: tpm
                .map(|v| u64::try_from(v).map_err(|_| out_of_range()))
                .transpose()?,
        })
    }
}

/// A token to store. `secret_hash` is the Argon2id PHC string, never the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct NewToken {
    /// Its id (the uuid inside the PAT).
    pub token_id: Uuid,
    /// The user it was issued to; must be a member of the org.
    pub user_id: Option<Uuid>,
    /// The agent it is bound to; must belong to the org.
    pub agent_id: Option<Uuid>,
    /// The permission bitmap.
    pub permissions: Permissions,
    /// Optional name, at most 256 characters.
    pub name: Option<String>,
    /// The PHC string of the secret.
    pub secret_hash: String,
    /// When it stops being valid, if ever.
    pub expires_at: Option<DateTime<Utc>>,
    /// The token of the same org that issued it (CreateToken's caller), if any.
    pub issuer_token_id: Option<Uuid>,
    /// Its own rate limits.
    pub limits: TokenLimits,
}

impl fmt::Debug for NewToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewToken")
            .field("token_id", &self.token_id)
            .field("user_id", &self.user_id)
            .field("agent_id", &self.agent_id)
            .field("permissions", &self.permissions)
            .field("name", &self.name)
            .field("secret_hash", &"<omitted>")
            .field("expires_at", &self.expires_at)
            .field("issuer_token_id", &self.issuer_token_id)
            .field("limits", &self.limits)
            .finish()
    }
}

/// A token's metadata: everything but the hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenMetadata {
    /// Its id.
    pub token_id: Uuid,
    /// Its org.
    pub org_id: Uuid,
    /// The user it was issued to.
    pub user_id: Option<Uuid>,
    /// The agent it is bound to.
    pub agent_id: Option<Uuid>,
    /// The permission bitmap.
    pub permissions: Permissions,
    /// Its name.
    pub name: Option<String>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it expires, if ever.
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was revoked, if it was.
    pub revoked_at: Option<DateTime<Utc>>,
    /// The token that issued it, if it was issued through the API.
    pub issuer_token_id: Option<Uuid>,
    /// Its own rate limits.
    pub limits: TokenLimits,
}

impl TokenMetadata {
    /// Where a page that ends with this token resumes.
    pub fn cursor(&self) -> TokenCursor {
        TokenCursor {
            created_at: self.created_at,
            token_id: self.token_id,
        }
    }
}

/// What ValidateToken reads on every call: the row's state and its hash.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenRecord {
    /// Its id.
    pub token_id: Uuid,
    /// Its org.
    pub org_id: Uuid,
    /// The user it was issued to.
    pub user_id: Option<Uuid>,
    /// The agent it is bound to.
    pub agent_id: Option<Uuid>,
    /// The permission bitmap.
    pub permissions: Permissions,
    /// The PHC string of the secret.
    pub secret_hash: String,
    /// When it expires, if ever.
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was revoked, if it was.
    pub revoked_at: Option<DateTime<Utc>>,
    /// Its own rate limits.
    pub limits: TokenLimits,
}

impl fmt::Debug for TokenRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenRecord")
            .field("token_id", &self.token_id)
            .field("org_id", &self.org_id)
            .field("user_id", &self.user_id)
            .field("agent_id", &self.agent_id)
            .field("permissions", &self.permissions)
            .field("secret_hash", &"<omitted>")
            .field("expires_at", &self.expires_at)
            .field("revoked_at", &self.revoked_at)
            .field("limits", &self.limits)
            .finish()
    }
}

/// A keyset position in an org's token list: tokens are ordered by `(created_at, token_id)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenCursor {
    /// The last seen token's creation time.
    pub created_at: DateTime<Utc>,
    /// The last seen token's id.
    pub token_id: Uuid,
}

/// The entity a [`StoreError::NotInOrg`](super::StoreError::NotInOrg) is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reference {
    /// An agent.
    Agent,
    /// A user (through its membership).
    User,
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Reference::Agent => "agent",
            Reference::User => "user",
        })
    }
}
