//! The permission bitmap of a token.

use std::fmt;

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
    /// `SetBudget`, `DeleteBudget`, `ListBudgets`.
    pub const BUDGET_MANAGE: Permissions = Permissions(1 << 10);
    /// The MCP routes: `POST`, `GET`, `DELETE /mcp/{server}`.
    pub const MCP_TOOLS: Permissions = Permissions(1 << 11);
    /// No permission at all.
    pub const NONE: Permissions = Permissions(0);
    /// Every permission this version knows.
    pub const ALL_KNOWN: Permissions = Permissions((1 << 12) - 1);

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
