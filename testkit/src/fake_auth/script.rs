//! What the fake answers, per token and per agent.

use std::time::Duration;

use tonic::Code;
use uuid::Uuid;

/// `PermissionBit::CHAT_COMPLETIONS` as a bitmap: what a chat token holds.
pub const CHAT_COMPLETIONS: i64 = 1 << 0;

/// The reason the real server gives for an agent that is unknown or of another org.
pub const AGENT_NOT_AUTHORIZED: &str = "AGENT_NOT_AUTHORIZED";

/// The reason the real server gives for an agent that is not `active`.
pub const AGENT_SUSPENDED: &str = "AGENT_SUSPENDED";

/// The token a successful ValidateToken describes; the org is always the fake's own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub token_id: Uuid,
    pub permissions: i64,
    pub user_id: Option<Uuid>,
    pub agent_id: Option<Uuid>,
}

impl Grant {
    /// A fresh token id holding `permissions`, bound to no user and no agent.
    pub fn new(permissions: i64) -> Grant {
        Grant {
            token_id: Uuid::new_v4(),
            permissions,
            user_id: None,
            agent_id: None,
        }
    }

    /// A fresh token id holding only [`CHAT_COMPLETIONS`].
    pub fn chat() -> Grant {
        Grant::new(CHAT_COMPLETIONS)
    }

    /// The same grant with this token id.
    pub fn token_id(mut self, token_id: Uuid) -> Grant {
        self.token_id = token_id;
        self
    }

    /// The same grant, issued to this user.
    pub fn user(mut self, user_id: Uuid) -> Grant {
        self.user_id = Some(user_id);
        self
    }
}

/// How ValidateToken answers one access token. A token without an answer is Unauthenticated,
/// as the real server answers an unknown, expired or revoked one.
#[derive(Clone, Debug)]
pub enum TokenAnswer {
    /// OK with this grant in the fake's org.
    Valid(Grant),
    /// OK with [`Grant::chat`], but only after this long: for running into a client deadline.
    Slow(Duration),
    /// This status code, with a message that says nothing.
    Fail(Code),
    /// This status code carrying this reason as a `google.rpc.ErrorInfo` in domain
    /// `svc.auth.v1`, as the real server sends `COLD_SHARE_SPENT` with Unavailable.
    Refused(Code, &'static str),
}

/// How ValidateAgent answers one agent of the fake's org. An agent without an answer, or asked
/// for with another org, is PermissionDenied with [`AGENT_NOT_AUTHORIZED`], as the real server
/// never reveals whether another org's agent exists.
#[derive(Clone, Debug)]
pub enum AgentAnswer {
    /// OK, status `active`.
    Active,
    /// PermissionDenied carrying this reason as a `google.rpc.ErrorInfo` in domain
    /// `svc.auth.v1`, which is how the real server refuses.
    Denied(&'static str),
    /// OK, status `active`, but only after this long.
    Slow(Duration),
    /// This status code, with a message that says nothing.
    Fail(Code),
}
