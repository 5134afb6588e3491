//! In-memory validators: the smallest custom [`TokenValidator`] and [`AgentValidator`].
//!
//! A real deployment uses `GrpcAuthClient` (feature `grpc`) for both; anything that can answer
//! "which org is this token" and "is this agent active in that org" fits the same traits.

use std::collections::HashMap;
use std::sync::Arc;

use svc_tower::agent::{AgentError, AgentValidator};
use svc_tower::auth::{TokenError, TokenValidator};
use svc_tower::context::OrgContext;
use uuid::Uuid;

/// Tokens known up front, each with the context it grants.
#[derive(Debug, Clone, Default)]
pub struct MemoryTokens {
    tokens: Arc<HashMap<String, OrgContext>>,
}

impl MemoryTokens {
    /// Validates exactly these tokens.
    pub fn new(tokens: impl IntoIterator<Item = (String, OrgContext)>) -> MemoryTokens {
        MemoryTokens {
            tokens: Arc::new(tokens.into_iter().collect()),
        }
    }
}

impl TokenValidator for MemoryTokens {
    async fn validate(&self, token: &str) -> Result<OrgContext, TokenError> {
        self.tokens.get(token).cloned().ok_or(TokenError::Invalid)
    }
}

/// The life-cycle states of an agent; only `Active` may call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentStatus {
    /// May call.
    Active,
    /// Paused by its operator.
    Paused,
    /// Suspended by an administrator.
    Suspended,
    /// Retired.
    Archived,
}

/// Agents known up front: their org and status.
#[derive(Debug, Clone, Default)]
pub struct MemoryAgents {
    agents: Arc<HashMap<Uuid, (Uuid, AgentStatus)>>,
}

impl MemoryAgents {
    /// Knows exactly these `(agent_id, org_id, status)` rows.
    pub fn new(agents: impl IntoIterator<Item = (Uuid, Uuid, AgentStatus)>) -> MemoryAgents {
        let agents = agents
            .into_iter()
            .map(|(agent, org, status)| (agent, (org, status)))
            .collect();
        MemoryAgents {
            agents: Arc::new(agents),
        }
    }
}

impl AgentValidator for MemoryAgents {
    async fn validate(&self, org_id: Uuid, agent_id: &str) -> Result<(), AgentError> {
        let agent = Uuid::try_parse(agent_id).map_err(|_| AgentError::InvalidArgument)?;
        match self.agents.get(&agent) {
            // Another org's agent looks exactly like an unknown one.
            Some((org, _)) if *org != org_id => Err(AgentError::NotAuthorized),
            None => Err(AgentError::NotAuthorized),
            Some((_, AgentStatus::Active)) => Ok(()),
            Some(_) => Err(AgentError::Suspended),
        }
    }
}
