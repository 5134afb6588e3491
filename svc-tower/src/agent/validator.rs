//! The agent validation backend.

use std::future::Future;

use uuid::Uuid;

/// Why an agent was not accepted for an org.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    /// Unknown agent, or another org's (403 `AGENT_NOT_AUTHORIZED`).
    #[error("the agent is not authorized for this organization")]
    NotAuthorized,
    /// The agent is paused, suspended or archived (403 `AGENT_SUSPENDED`).
    #[error("the agent is not active")]
    Suspended,
    /// The agent id is malformed (400 `VALIDATION_ERROR`).
    #[error("the agent id is malformed")]
    InvalidArgument,
    /// The backend could not answer: unreachable, failing or too slow (503 `AUTH_UNAVAILABLE`).
    #[error("agent validation is unavailable")]
    Unavailable,
}

/// Checks that an agent belongs to an org and is active.
///
/// Implement it with an `async fn`, or pass a closure `Fn(Uuid, &str) -> impl Future`. The
/// shipped implementation is `GrpcAuthClient` (feature `grpc`), which asks
/// `svc.auth.v1.AuthService/ValidateAgent`.
///
/// ```
/// use std::collections::HashSet;
/// use std::sync::Arc;
/// use svc_tower::agent::{AgentError, AgentValidator};
/// use uuid::Uuid;
///
/// #[derive(Clone)]
/// struct Agents(Arc<HashSet<(Uuid, String)>>);
///
/// impl AgentValidator for Agents {
///     async fn validate(&self, org_id: Uuid, agent_id: &str) -> Result<(), AgentError> {
///         match self.0.contains(&(org_id, agent_id.to_owned())) {
///             true => Ok(()),
///             false => Err(AgentError::NotAuthorized),
///         }
///     }
/// }
/// ```
pub trait AgentValidator: Clone + Send + Sync + 'static {
    /// Accepts `agent_id` (a hyphenated, lower-case UUID) for `org_id`, the token's org.
    fn validate(
        &self,
        org_id: Uuid,
        agent_id: &str,
    ) -> impl Future<Output = Result<(), AgentError>> + Send;
}

impl<F, Fut> AgentValidator for F
where
    F: Fn(Uuid, &str) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<(), AgentError>> + Send,
{
    fn validate(
        &self,
        org_id: Uuid,
        agent_id: &str,
    ) -> impl Future<Output = Result<(), AgentError>> + Send {
        self(org_id, agent_id)
    }
}
