//! The identities both example apps know: one org, its tokens and its agents.

use svc_tower::context::{OrgContext, Permissions};
use uuid::Uuid;

use crate::memory::{AgentStatus, MemoryAgents, MemoryTokens};

/// The request body limit of the examples (`SVC_MAX_REQUEST_BODY_BYTES` in the gateway).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// One org with a chat token, a token without the chat permission, an active agent, a paused
/// agent and an agent of another org.
#[derive(Debug, Clone)]
pub struct Demo {
    /// The org every token belongs to.
    pub org_id: Uuid,
    /// A token holding `CHAT_COMPLETIONS`.
    pub chat_token: String,
    /// A token holding only `TOKEN_LIST`.
    pub list_only_token: String,
    /// An active agent of the org.
    pub active_agent: Uuid,
    /// A paused agent of the org.
    pub paused_agent: Uuid,
    /// An active agent of another org.
    pub foreign_agent: Uuid,
}

impl Demo {
    /// Fixed, well-known identities, so the example headers can show ready-to-paste requests.
    /// For local trials only: these tokens are public.
    pub fn well_known() -> Demo {
        Demo {
            org_id: Uuid::from_u128(0x0190f5a4_0000_7000_8000_000000000001),
            chat_token: "svc_pat_0190f5a4-0000-7000-8000-0000000000a1_DemoChatToken".to_owned(),
            list_only_token: "svc_pat_0190f5a4-0000-7000-8000-0000000000a2_DemoListToken"
                .to_owned(),
            active_agent: Uuid::from_u128(0x0190f5a4_0000_7000_8000_0000000000b1),
            paused_agent: Uuid::from_u128(0x0190f5a4_0000_7000_8000_0000000000b2),
            foreign_agent: Uuid::from_u128(0x0190f5a4_0000_7000_8000_0000000000b3),
        }
    }

    /// Fresh random identities, so tests never share data.
    pub fn random() -> Demo {
        let token = |name: &str| {
            format!(
                "svc_pat_{}_{name}{}",
                Uuid::new_v4(),
                Uuid::new_v4().simple()
            )
        };
        Demo {
            org_id: Uuid::new_v4(),
            chat_token: token("chat"),
            list_only_token: token("list"),
            active_agent: Uuid::new_v4(),
            paused_agent: Uuid::new_v4(),
            foreign_agent: Uuid::new_v4(),
        }
    }

    /// The token validator knowing this demo's tokens.
    pub fn tokens(&self) -> MemoryTokens {
        let context = |permissions| OrgContext::new(self.org_id, permissions, Uuid::new_v4());
        MemoryTokens::new([
            (
                self.chat_token.clone(),
                context(Permissions::CHAT_COMPLETIONS),
            ),
            (
                self.list_only_token.clone(),
                context(Permissions::TOKEN_LIST),
            ),
        ])
    }

    /// The agent validator knowing this demo's agents.
    pub fn agents(&self) -> MemoryAgents {
        MemoryAgents::new([
            (self.active_agent, self.org_id, AgentStatus::Active),
            (self.paused_agent, self.org_id, AgentStatus::Paused),
            (self.foreign_agent, Uuid::new_v4(), AgentStatus::Active),
        ])
    }
}
