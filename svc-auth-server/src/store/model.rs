//! The identity records the store reads and writes, free of any backend's types.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use svc_core::permissions::Permissions;
use uuid::Uuid;

/// A tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Organization {
    /// Its id.
    pub org_id: Uuid,
    /// Its name, if it was given one.
    pub name: Option<String>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// A human operator, member of one or more orgs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// Its id.
    pub user_id: Uuid,
    /// Its display name.
    pub name: Option<String>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

impl User {
    /// Where a page that ends with this user resumes.
    pub fn cursor(&self) -> Cursor {
        Cursor {
            at: self.created_at,
            id: self.user_id,
        }
    }
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

impl AgentStatus {
    /// Whether moving to `to` changes anything. Every status may move to every other, but
    /// archived is final: an archived agent stays archived.
    pub(crate) fn move_to(self, to: AgentStatus) -> Result<bool, super::StoreError> {
        match (self, to) {
            (from, to) if from == to => Ok(false),
            (AgentStatus::Archived, _) => Err(super::StoreError::Precondition(
                "the agent is archived, which is final",
            )),
            _ => Ok(true),
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
    /// The MCP tools it may reach: `server/tool` or `server/*`, in the order set.
    pub tools: Vec<String>,
}

/// An agent with what only its administration reads: when it last changed and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDetail {
    /// What validation reads.
    pub agent: Agent,
    /// When it was created or its status last moved.
    pub updated_at: DateTime<Utc>,
    /// The reason given with the last status change.
    pub status_reason: Option<String>,
}

impl AgentDetail {
    /// Where a page that ends with this agent resumes.
    pub fn cursor(&self) -> Cursor {
        Cursor {
            at: self.agent.created_at,
            id: self.agent.agent_id,
        }
    }
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
    pub fn cursor(&self) -> Cursor {
        Cursor {
            at: self.created_at,
            id: self.token_id,
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
    /// The money budgets a call with it draws on: its org's, its own and its agent's (the
    /// agent asked about, else its own).
    pub budgets: Vec<super::Budget>,
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

/// A keyset position in a list ordered by a time and an id: tokens, agents and users by
/// `(created_at, id)`, audit events by `(occurred_at, event_id)` descending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    /// The last seen row's time.
    pub at: DateTime<Utc>,
    /// The last seen row's id.
    pub id: Uuid,
}

/// A revocation to carry out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Revocation {
    /// The token to revoke.
    pub token_id: Uuid,
    /// Leave the tokens it issued valid (a deliberate rotation); by default they go with it.
    pub keep_issued: bool,
    /// The revoker's permissions: a target holding a bit outside them is refused
    /// ([`StoreError::Forbidden`](super::StoreError::Forbidden)). `None` checks nothing.
    pub revoker: Option<Permissions>,
}

/// What a revocation did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revoked {
    /// The token named, as it is now.
    pub token: TokenMetadata,
    /// The tokens it issued, transitively, that this revocation revoked (those revoked already
    /// are not listed).
    pub issued: Vec<Uuid>,
}

/// What an administrative act did, as the audit trail names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuditAction {
    /// `svc-auth-server bootstrap`: an org and its first admin token, or a new admin token.
    OrgBootstrap,
    /// CreateToken.
    TokenCreate,
    /// RevokeToken.
    TokenRevoke,
    /// CreateAgent.
    AgentCreate,
    /// SetAgentStatus.
    AgentStatus,
    /// SetAgentTools.
    AgentTools,
    /// CreateUser.
    UserCreate,
    /// SetBudget.
    BudgetSet,
    /// DeleteBudget.
    BudgetDelete,
}

impl AuditAction {
    /// Every action, in the order the API grew them.
    pub const ALL: [AuditAction; 9] = [
        AuditAction::OrgBootstrap,
        AuditAction::TokenCreate,
        AuditAction::TokenRevoke,
        AuditAction::AgentCreate,
        AuditAction::AgentStatus,
        AuditAction::UserCreate,
        AuditAction::AgentTools,
        AuditAction::BudgetSet,
        AuditAction::BudgetDelete,
    ];

    /// The stored and wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::OrgBootstrap => "org.bootstrap",
            AuditAction::TokenCreate => "token.create",
            AuditAction::TokenRevoke => "token.revoke",
            AuditAction::AgentCreate => "agent.create",
            AuditAction::AgentStatus => "agent.status",
            AuditAction::AgentTools => "agent.tools",
            AuditAction::UserCreate => "user.create",
            AuditAction::BudgetSet => "budget.set",
            AuditAction::BudgetDelete => "budget.delete",
        }
    }

    /// The action a word names, if any.
    pub fn parse(word: &str) -> Option<AuditAction> {
        AuditAction::ALL
            .into_iter()
            .find(|action| action.as_str() == word)
    }
}

/// Whether an administrative act was carried out or refused for lack of permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuditOutcome {
    /// Carried out.
    Ok,
    /// Refused: the caller lacked the permission, or named something outside its org.
    Denied,
}

impl AuditOutcome {
    /// The stored and wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditOutcome::Ok => "ok",
            AuditOutcome::Denied => "denied",
        }
    }
}

/// An audit event to write, in the same transaction as the act it records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    /// Its id (UUID v7, so ids follow time).
    pub event_id: Uuid,
    /// The token that made the call; `None` for acts outside the API.
    pub actor_token_id: Option<Uuid>,
    /// What was done.
    pub action: AuditAction,
    /// The org, token, agent or user acted on.
    pub target_id: Option<String>,
    /// Carried out or refused.
    pub outcome: AuditOutcome,
    /// Facts of the act; never a secret.
    pub detail: BTreeMap<String, String>,
}

impl AuditEntry {
    /// An act carried out by `actor`.
    pub fn ok(actor_token_id: Option<Uuid>, action: AuditAction) -> AuditEntry {
        AuditEntry {
            event_id: Uuid::now_v7(),
            actor_token_id,
            action,
            target_id: None,
            outcome: AuditOutcome::Ok,
            detail: BTreeMap::new(),
        }
    }

    /// An act `actor` was refused.
    pub fn denied(actor_token_id: Uuid, action: AuditAction) -> AuditEntry {
        AuditEntry {
            outcome: AuditOutcome::Denied,
            ..AuditEntry::ok(Some(actor_token_id), action)
        }
    }

    /// The same entry about `target`.
    pub fn target(mut self, target: impl ToString) -> AuditEntry {
        self.target_id = Some(target.to_string());
        self
    }

    /// The same entry with one more fact.
    pub fn detail(mut self, key: &str, value: impl Into<String>) -> AuditEntry {
        self.detail.insert(key.to_owned(), value.into());
        self
    }

    /// An event like this one about another target (a token revoked with the one named).
    pub fn about(&self, target: impl ToString) -> AuditEntry {
        AuditEntry {
            event_id: Uuid::now_v7(),
            ..self.clone()
        }
        .target(target)
    }

    /// The detail as stored: a JSON object of strings.
    pub(crate) fn detail_json(&self) -> String {
        serde_json::to_string(&self.detail).unwrap_or_else(|_| "{}".to_owned())
    }
}

/// An audit event as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    /// Its id.
    pub event_id: Uuid,
    /// Its org.
    pub org_id: Uuid,
    /// When it was written.
    pub occurred_at: DateTime<Utc>,
    /// The token that made the call.
    pub actor_token_id: Option<Uuid>,
    /// What was done (an [`AuditAction`] word).
    pub action: String,
    /// What was acted on.
    pub target_id: Option<String>,
    /// `ok` or `denied`.
    pub outcome: String,
    /// Facts of the act.
    pub detail: BTreeMap<String, String>,
}

impl AuditEvent {
    /// Where a page that ends with this event resumes.
    pub fn cursor(&self) -> Cursor {
        Cursor {
            at: self.occurred_at,
            id: self.event_id,
        }
    }
}

/// Which audit events to read: newest first, within `[start, end)`, of one action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditQuery {
    /// Inclusive start.
    pub start: Option<DateTime<Utc>>,
    /// Exclusive end.
    pub end: Option<DateTime<Utc>>,
    /// Only this action.
    pub action: Option<AuditAction>,
    /// Resume before this event.
    pub before: Option<Cursor>,
    /// At most this many.
    pub limit: u32,
}

/// The org `svc-auth-server bootstrap` mints an admin token for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootstrapOrg {
    /// A new org with this id and name.
    New {
        /// Its id.
        org_id: Uuid,
        /// Its name.
        name: String,
    },
    /// An org that exists already.
    Existing(Uuid),
}

impl BootstrapOrg {
    /// The org's id.
    pub fn org_id(&self) -> Uuid {
        match self {
            BootstrapOrg::New { org_id, .. } | BootstrapOrg::Existing(org_id) => *org_id,
        }
    }
}

/// The entity a [`StoreError::NotInOrg`](super::StoreError::NotInOrg) is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reference {
    /// An agent.
    Agent,
    /// A user (through its membership).
    User,
    /// A token.
    Token,
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Reference::Agent => "agent",
            Reference::User => "user",
            Reference::Token => "token",
        })
    }
}
