//! What a validated request carries: the org, its permissions, the token's own limits and the
//! agent.
//!
//! The middleware's PatAuth inserts an [`OrgContext`] into the request extensions and its
//! AgentCheck fills in the verified agent. Everything after them (rate limits, idempotency keys,
//! handlers) reads the org from here, never from the request.

use std::sync::Arc;

use uuid::Uuid;

use crate::budget::Budget;
use crate::permissions::Permissions;

/// The identity of a validated request, inserted into the request extensions.
///
/// Its fields are public to read; it is built with [`OrgContext::new`] and the `with_`
/// methods, so a field added later breaks no caller.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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
    /// The money budgets that apply to this request: its org's, its agent's and its token's,
    /// where set.
    pub budgets: Arc<[Budget]>,
}

impl OrgContext {
    /// The context of token `token_id` of `org_id` holding `permissions`: no user, no agent,
    /// only the org's limits.
    pub fn new(org_id: Uuid, permissions: Permissions, token_id: Uuid) -> OrgContext {
        OrgContext {
            org_id,
            permissions,
            token_id,
            user_id: None,
            agent_id: None,
            limits: TokenLimits::default(),
            budgets: Arc::new([]),
        }
    }

    /// The user the token was issued to.
    pub fn with_user(mut self, user_id: Option<Uuid>) -> OrgContext {
        self.user_id = user_id;
        self
    }

    /// The token's agent, or the one verified for this request.
    pub fn with_agent(mut self, agent_id: Option<Uuid>) -> OrgContext {
        self.agent_id = agent_id;
        self
    }

    /// The token's own rate limits.
    pub fn with_limits(mut self, limits: TokenLimits) -> OrgContext {
        self.limits = limits;
        self
    }

    /// The money budgets that apply to the request.
    pub fn with_budgets(mut self, budgets: impl Into<Arc<[Budget]>>) -> OrgContext {
        self.budgets = budgets.into();
        self
    }
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
