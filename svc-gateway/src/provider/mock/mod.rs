//! The mock provider: deterministic OpenAI-shaped answers for every route, without any network.
//!
//! The reply text and the token counts depend only on the request, so tests can assert them;
//! ids are fresh per call, so a test can tell a replayed answer from a new one. When a request
//! offers tools and its last message is the user's, the mock calls the first tool (or the one
//! `tool_choice` names) with arguments made from the tool's JSON schema; after the tool's
//! result it answers in text, so an agent loop runs end to end in dev mode, unless
//! `tool_choice` still forces a call (`required`, `any`, a named tool): then it calls the named
//! tool, or the last one offered. A request that asks
//! for structured output (`response_format`, `text.format`, Anthropic's `output_format` or
//! `output_config.format`) is answered with an instance of its schema as the text, so
//! `parse()` and its kin get what they validate.

mod chat;
mod embeddings;
mod messages;
mod responses;
mod schema;

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
    format!("{prefix}{}", svc_core::id::uuid_v4().simple())
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// A tool call the mock makes: the tool's name and arguments that fit its schema.
struct Call<'a> {
    name: &'a str,
    arguments: Value,
}

impl Call<'_> {
    fn completion_tokens(&self) -> u64 {
        tokens(self.name) + tokens(&self.arguments.to_string())
    }
}

/// Which of the offered tools the mock calls.
#[derive(Clone, Copy)]
enum Pick<'a> {
    /// The one `tool_choice` names.
    Named(&'a str),
    /// The first callable one: the model's own choice at the user's turn.
    First,
    /// The last callable one: after a tool's result, when a call is still forced (a forced
    /// answer tool, as a gateway adds for structured output, comes last).
    Last,
}

impl<'a> Pick<'a> {
    /// The pick for a request: `named` when `tool_choice` names a tool; else the first tool at
    /// the user's turn, or the last when a call is `forced` after a tool's result; else none.
    fn of(named: Option<&'a str>, forced: bool, users_turn: bool) -> Option<Pick<'a>> {
        match (named, forced, users_turn) {
            (Some(name), _, _) => Some(Pick::Named(name)),
            (None, _, true) => Some(Pick::First),
            (None, true, false) => Some(Pick::Last),
            (None, false, false) => None,
        }
    }
}

/// The call the mock makes to one of `tools` (those `callable` accepts, unless named), if
/// any; its arguments are made from the schema `schema_of` finds in it.
fn call_among<'a>(
    tools: &'a [Value],
    pick: Pick<'_>,
    callable: impl Fn(&Value) -> bool,
    name_of: impl Fn(&'a Value) -> Option<&'a str>,
    schema_of: impl Fn(&'a Value) -> Option<&'a Value>,
) -> Option<Call<'a>> {
    let mut candidates = tools.iter().filter(|t| name_of(t).is_some());
    let tool = match pick {
        Pick::Named(chosen) => candidates.find(|t| name_of(t) == Some(chosen))?,
        Pick::First => candidates.find(|t| callable(t))?,
        Pick::Last => candidates.filter(|t| callable(t)).last()?,
    };
    Some(Call {
        name: name_of(tool)?,
        arguments: schema::object(schema_of(tool)),
    })
}

/// The OpenAI-shaped tool the mock calls, when it calls one: with tools offered and a
/// `tool_choice` that is not `none`, the one `tool_choice` names, else the first function tool
/// when the last message is the user's, else (`tool_choice` `required`) the last. Chat nests a
/// tool's name and parameters under `function`; the Responses API does not.
fn tool_to_call<'a>(json: &'a Map<String, Value>, last_role: Option<&str>) -> Option<Call<'a>> {
    let tools = json.get("tools")?.as_array()?;
    let choice = json.get("tool_choice");
    if choice == Some(&json!("none")) {
        return None;
    }
    let name_of = |v: &'a Value| {
        v.pointer("/function/name")
            .or_else(|| v.get("name"))
            .and_then(Value::as_str)
    };
    let named = choice.filter(|c| c.is_object()).and_then(name_of);
    let forced = choice == Some(&json!("required"));
    call_among(
        tools,
        Pick::of(named, forced, last_role == Some("user"))?,
        |t| t.get("type") == Some(&json!("function")),
        name_of,
        |t| {
            t.pointer("/function/parameters")
                .or_else(|| t.get("parameters"))
        },
    )
}

/// The text of an answer: an instance of the schema `format` asks for (OpenAI's
/// `response_format` or `text.format`, Anthropic's `output_format`), `{"reply": …}` for a plain
/// JSON object, else [`MOCK_REPLY`].
fn reply_text(format: Option<&Value>) -> String {
    let kind = format.and_then(|f| f.get("type")).and_then(Value::as_str);
    match (kind, format) {
        (Some("json_schema"), Some(format)) => {
            let schema = format
                .get("schema")
                .or_else(|| format.pointer("/json_schema/schema"));
            schema::object(schema).to_string()
        }
        (Some("json_object"), _) => json!({ "reply": MOCK_REPLY }).to_string(),
        _ => MOCK_REPLY.to_owned(),
    }
}

/// `text` in stream deltas: word by word, no piece longer than a few characters more than 16.
fn pieces(text: &str) -> Vec<&str> {
    const MOST: usize = 16;
    let mut out = Vec::new();
    for word in text.split_inclusive(' ') {
        let mut rest = word;
        while rest.len() > MOST {
            let mut cut = MOST;
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            let (head, tail) = rest.split_at(cut);
            out.push(head);
            rest = tail;
        }
        if !rest.is_empty() {
            out.push(rest);
        }
    }
    out
}

#[cfg(test)]
mod tests;
