//! What a validated request carries through the stack: the org, its permissions and the agent.
//!
//! [`PatAuth`](crate::auth::PatAuth) inserts an [`OrgContext`] into the request extensions;
//! [`AgentCheck`](crate::agent::AgentCheck) fills in the verified agent. Everything after them
//! (rate limits, idempotency keys, handlers) reads the org from here, never from the request.

use std::fmt;
use std::sync::Arc;

use uuid::Uuid;

/// The int64 permission bitmap of a token.
///
/// Bits are positions of the proto's `PermissionBit`. Unknown bits are preserved but grant
/// nothing.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Permissions(i64);

impl Permissions {
    /// Chat-like routes: `POST /v1/chat/completions`, `/v1/responses`, `/v1/messages`.
    pub const CHAT_COMPLETIONS: Permissions = Permissions(1 << 0);
    /// `CreateToken`.
    pub const TOKEN_CREATE: Permissions = Permissions(1 << 1);
    /// `RevokeToken`.
    pub const TOKEN_REVOKE: Permissions = Permissions(1 << 2);
    /// `ListTokens`.
    pub const TOKEN_LIST: Permissions = Permissions(1 << 3);
    /// `POST /v1/embeddings`.
    pub const EMBEDDINGS: Permissions = Permissions(1 << 4);
    /// `GetUsage`.
    pub const USAGE_READ: Permissions = Permissions(1 << 5);
    /// `CreateAgent`, `SetAgentStatus`.
    pub const AGENT_MANAGE: Permissions = Permissions(1 << 6);
    /// `GetAgent`, `ListAgents`.
    pub const AGENT_READ: Permissions = Permissions(1 << 7);
    /// `CreateUser`, `ListUsers`.
    pub const USER_MANAGE: Permissions = Permissions(1 << 8);
    /// `ListAuditEvents`.
    pub const AUDIT_READ: Permissions = Permissions(1 << 9);
    /// The MCP routes: `POST`, `GET`, `DELETE /mcp/{server}`.
    pub const MCP_TOOLS: Permissions = Permissions(1 << 11);
    /// No permission at all.
    pub const NONE: Permissions = Permissions(0);
    /// Every permission this version knows.
    pub const ALL_KNOWN: Permissions = Permissions(((1 << 10) - 1) | (1 << 11));

    /// The bitmap as it travels on the wire.
    pub const fn from_bits(bits: i64) -> Permissions {
        Permissions(bits)
    }

    /// The raw bitmap, unknown bits included.
    pub const fn bits(self) -> i64 {
        self.0
    }

    /// True when every bit of `required` is set.
    pub const fn contains(self, required: Permissions) -> bool {
        self.0 & required.0 == required.0
    }

    /// The union of two bitmaps.
    pub const fn union(self, other: Permissions) -> Permissions {
        Permissions(self.0 | other.0)
    }
}

impl std::ops::BitOr for Permissions {
    type Output = Permissions;
    fn bitor(self, rhs: Permissions) -> Permissions {
        self.union(rhs)
    }
}

impl fmt::Debug for Permissions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Permissions({:#b})", self.0)
    }
}

/// The identity of a validated request, inserted into the request extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrgContext {
    /// The token's org: authoritative for every tenant decision.
    pub org_id: Uuid,
    /// The token's permission bitmap.
    pub permissions: Permissions,
    /// The token's id (never its secret).
    pub token_id: Uuid,
    /// The user the token was issued to, if any.
    pub user_id: Option<Uuid>,
    /// The agent: bound to the token, or verified by AgentCheck from `X-SVC-Agent-ID`.
    pub agent_id: Option<Uuid>,
    /// The token's own rate limits, applied beside the org's.
    pub limits: TokenLimits,
}

/// A token's own rate limits; `None` means only the org's limit applies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenLimits {
    /// Requests per minute.
    pub requests_per_minute: Option<u32>,
    /// Tokens (prompt and completion) per minute.
    pub tokens_per_minute: Option<u64>,
}

/// What a token validator learned of the request's agent in the same call, in the token's
/// org. PatAuth puts it on the request when its validator answers one (see
/// `PatAuthLayer::prefetch_agent`); AgentCheck then decides from it instead of asking its own
/// validator. Only server-side code can insert an extension, so a client cannot forge one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentVerdict {
    /// The agent asked about.
    pub agent_id: Uuid,
    /// Its standing in the token's org.
    pub standing: AgentStanding,
    /// The agent's tool grants (`server/tool` or `server/*`); empty when it has none.
    pub tools: Arc<[String]>,
}

/// An agent's standing in an org.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentStanding {
    /// Exists in the org and is active: it may act.
    Active,
    /// Exists in the org but is paused, suspended or archived.
    Inactive,
    /// No such agent in the org.
    NotInOrg,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contains_requires_every_bit() {
        let p = Permissions::CHAT_COMPLETIONS | Permissions::TOKEN_LIST;
        assert!(p.contains(Permissions::CHAT_COMPLETIONS));
        assert!(!p.contains(Permissions::TOKEN_CREATE));
        assert!(!p.contains(Permissions::CHAT_COMPLETIONS | Permissions::TOKEN_CREATE));
        assert!(p.contains(Permissions::NONE));
    }

    #[test]
    fn unknown_bits_are_kept() {
        let p = Permissions::from_bits(1 << 40 | 1);
        assert_eq!(p.bits(), 1 << 40 | 1);
    }
}
