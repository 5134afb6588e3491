//! The Messages API to an OpenAI-compatible model: a `/v1/messages` request as a chat
//! completions request ([`request`]), the chat completion as a Messages answer ([`answer`]),
//! and the chunk stream as Anthropic's event sequence ([`stream`]).

pub(crate) mod answer;
pub(crate) mod request;
pub(crate) mod stream;
