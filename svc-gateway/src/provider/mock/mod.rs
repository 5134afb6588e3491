//! The mock provider: deterministic OpenAI-shaped answers for every route, without any network.
//!
//! The reply text and the token counts depend only on the request, so tests can assert them;
//! ids are fresh per call, so a test can tell a replayed answer from a new one. When a chat
//! request (or a response) offers tools and its last message is the user's, the mock calls
//! the first tool (or the one `tool_choice` names) with `{}`; after the tool's result it
//! answers in text, so an agent loop runs end to end in dev mode.

mod chat;
mod embeddings;
mod messages;
mod responses;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::StatusCode;
use serde_json::{Map, Value, json};

use super::{CallInfo, Provider, ProviderError, ProviderReply};
use crate::request::{ApiRequest, Endpoint};

/// The assistant text of every mock answer that is not a tool call.
pub const MOCK_REPLY: &str = "This is a mock response from the svc gateway.";

/// The deterministic in-process provider.
#[derive(Debug, Clone, Default)]
pub struct MockProvider;

impl MockProvider {
    /// A mock provider.
    pub fn new() -> MockProvider {
        MockProvider
    }
}

impl Provider for MockProvider {
    fn name(&self) -> &'static str {
        "mock"
    }

    fn complete<'a>(
        &'a self,
        request: &'a ApiRequest,
        _call: &'a CallInfo,
    ) -> BoxFuture<'a, Result<ProviderReply, ProviderError>> {
        Box::pin(async move {
            Ok(match request.endpoint {
                Endpoint::ChatCompletions => chat::answer(request),
                Endpoint::Embeddings => json_reply(embeddings::answer(request)),
                Endpoint::Responses => responses::answer(request),
                Endpoint::Messages => messages::answer(request),
                Endpoint::CountTokens => super::estimated_count(request),
            })
        })
    }
}

/// A rough token count (four bytes a token, at least one), good enough for usage figures.
pub(crate) fn tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4).max(1)
}

/// The prompt's tokens: every text of the request.
fn prompt_tokens(request: &ApiRequest) -> u64 {
    request.texts().into_iter().map(tokens).sum::<u64>().max(1)
}

fn json_reply(body: Value) -> ProviderReply {
    ProviderReply::Json {
        status: StatusCode::OK,
        body: Bytes::from(body.to_string()),
    }
}

fn stream_reply(events: Vec<Bytes>) -> ProviderReply {
    ProviderReply::Stream {
        status: StatusCode::OK,
        events: Box::pin(futures_util::stream::iter(events.into_iter().map(Ok))),
    }
}

/// A fresh id with `prefix`, as OpenAI's look.
fn fresh_id(prefix: &str) -> String {
    format!("{prefix}{}", uuid::Uuid::new_v4().simple())
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// The tool the mock calls, when it calls one: offered tools, a last message from the user,
/// and a `tool_choice` that is not `none`. Its name is the one `tool_choice` names, else the
/// first function tool's.
fn tool_to_call<'a>(json: &'a Map<String, Value>, last_role: Option<&str>) -> Option<&'a str> {
    let tools = json.get("tools")?.as_array()?;
    if last_role != Some("user") || json.get("tool_choice") == Some(&json!("none")) {
        return None;
    }
    let name_of = |v: &'a Value| {
        v.pointer("/function/name")
            .or_else(|| v.get("name"))
            .and_then(Value::as_str)
    };
    if let Some(chosen) = json.get("tool_choice").filter(|c| c.is_object()) {
        return name_of(chosen);
    }
    tools
        .iter()
        .filter(|t| t.get("type") == Some(&json!("function")))
        .find_map(name_of)
}

/// The words of [`MOCK_REPLY`], each a stream delta.
fn reply_words() -> impl Iterator<Item = &'static str> {
    MOCK_REPLY.split_inclusive(' ')
}

#[cfg(test)]
mod tests;
