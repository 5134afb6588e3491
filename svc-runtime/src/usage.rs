//! One row of the usage ledger, as the gateway records it and the identity store keeps it.
//!
//! Both services speak of the same record: the gateway writes it (to PostgreSQL as its own
//! role, or to the embedded store in dev mode) and the auth server sums it for GetUsage.
//! Metadata only: there is no field a message's content could go in.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Longest model name the ledger keeps (the column's bound); longer ones are cut.
pub const MAX_MODEL_CHARS: usize = 256;
/// Longest provider name the ledger keeps.
pub const MAX_PROVIDER_CHARS: usize = 128;
/// Longest tool (`server/tool`) the ledger keeps.
pub const MAX_TOOL_CHARS: usize = 200;

/// What a record of an MCP tool call adds: which tool, and how the call ended. Never its
/// arguments or its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// `server/tool`.
    pub tool: String,
    /// `ok`, `error` or `denied`.
    pub outcome: &'static str,
}

/// One call a provider was asked to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRecord {
    /// Minted once (UUID v7), so a retried write never counts a call twice.
    pub record_id: Uuid,
    /// The token's org.
    pub org_id: Uuid,
    /// The token that made the call.
    pub token_id: Uuid,
    /// The calling agent.
    pub agent_id: Option<Uuid>,
    /// The model the client asked for.
    pub model: String,
    /// The provider that answered; empty when none did.
    pub provider: String,
    /// Prompt (input) tokens the provider reported; 0 when it reported none.
    pub prompt_tokens: i64,
    /// Completion (output) tokens the provider reported; 0 when it reported none.
    pub completion_tokens: i64,
    /// The HTTP status of the answer.
    pub status: u16,
    /// Time to the answer's head, in milliseconds.
    pub latency_ms: u32,
    /// When the call was made.
    pub at: DateTime<Utc>,
    /// Set for an MCP tool call (then `provider` is the server and `model` is empty).
    pub tool: Option<ToolCall>,
    /// What the call cost, in US micro-dollars; 0 for a model without a price.
    pub cost_usd_micros: i64,
}

impl UsageRecord {
    /// The record with its text fields cut to the ledger's bounds and its counts made
    /// non-negative, so a store never refuses a whole batch for one odd value.
    pub fn bounded(mut self) -> UsageRecord {
        truncate_chars(&mut self.model, MAX_MODEL_CHARS);
        truncate_chars(&mut self.provider, MAX_PROVIDER_CHARS);
        if let Some(call) = &mut self.tool {
            truncate_chars(&mut call.tool, MAX_TOOL_CHARS);
        }
        self.prompt_tokens = self.prompt_tokens.max(0);
        self.completion_tokens = self.completion_tokens.max(0);
        self.cost_usd_micros = self.cost_usd_micros.max(0);
        if !(100..=599).contains(&self.status) {
            self.status = 500;
        }
        self
    }
}

fn truncate_chars(text: &mut String, max: usize) {
    if let Some((at, _)) = text.char_indices().nth(max) {
        text.truncate(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_cuts_text_by_characters_and_clamps_counts() {
        let record = UsageRecord {
            record_id: Uuid::now_v7(),
            org_id: Uuid::new_v4(),
            token_id: Uuid::new_v4(),
            agent_id: None,
            model: "é".repeat(300),
            provider: "p".into(),
            prompt_tokens: -3,
            completion_tokens: 4,
            status: 42,
            latency_ms: 1,
            at: Utc::now(),
            tool: None,
            cost_usd_micros: -1,
        }
        .bounded();
        assert_eq!(record.model.chars().count(), MAX_MODEL_CHARS);
        assert_eq!((record.prompt_tokens, record.completion_tokens), (0, 4));
        assert_eq!(record.status, 500);
        assert_eq!(record.cost_usd_micros, 0);
    }
}
