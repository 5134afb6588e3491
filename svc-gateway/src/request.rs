//! A validated request to one of the provider-backed routes, as the provider receives it.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value};

/// The provider-backed routes, each under `/v1/` and `/proxy/v1/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `POST /v1/chat/completions`.
    ChatCompletions,
    /// `POST /v1/embeddings`.
    Embeddings,
    /// `POST /v1/responses`.
    Responses,
    /// `POST /v1/messages`: Anthropic's Messages API.
    Messages,
    /// `POST /v1/messages/count_tokens`: the input tokens a Messages request would use.
    CountTokens,
}

impl Endpoint {
    /// Every endpoint.
    pub const ALL: [Endpoint; 5] = [
        Endpoint::ChatCompletions,
        Endpoint::Embeddings,
        Endpoint::Responses,
        Endpoint::Messages,
        Endpoint::CountTokens,
    ];

    /// The position in [`ALL`](Self::ALL).
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The path below an OpenAI-compatible base URL (`…/v1`).
    pub const fn upstream_path(self) -> &'static str {
        match self {
            Endpoint::ChatCompletions => "/chat/completions",
            Endpoint::Embeddings => "/embeddings",
            Endpoint::Responses => "/responses",
            Endpoint::Messages => "/messages",
            Endpoint::CountTokens => "/messages/count_tokens",
        }
    }

    /// The canonical route: what idempotency fingerprints and metrics name.
    pub const fn route(self) -> &'static str {
        match self {
            Endpoint::ChatCompletions => "/v1/chat/completions",
            Endpoint::Embeddings => "/v1/embeddings",
            Endpoint::Responses => "/v1/responses",
            Endpoint::Messages => "/v1/messages",
            Endpoint::CountTokens => "/v1/messages/count_tokens",
        }
    }

    /// What one call is named in logs: `chat completion`, `embeddings`, `response`.
    pub const fn noun(self) -> &'static str {
        match self {
            Endpoint::ChatCompletions => "chat completion",
            Endpoint::Embeddings => "embeddings",
            Endpoint::Responses => "response",
            Endpoint::Messages => "message",
            Endpoint::CountTokens => "token count",
        }
    }

    /// The gateway alias of [`route`](Self::route).
    pub const fn alias(self) -> &'static str {
        match self {
            Endpoint::ChatCompletions => "/proxy/v1/chat/completions",
            Endpoint::Embeddings => "/proxy/v1/embeddings",
            Endpoint::Responses => "/proxy/v1/responses",
            Endpoint::Messages => "/proxy/v1/messages",
            Endpoint::CountTokens => "/proxy/v1/messages/count_tokens",
        }
    }

    /// The endpoint a request path names, alias or not.
    pub fn from_path(path: &str) -> Option<Endpoint> {
        let path = path.strip_prefix("/proxy").unwrap_or(path);
        Endpoint::ALL.into_iter().find(|e| e.route() == path)
    }
}

/// A request that passed validation. The provider forwards [`raw`](Self::raw) (or, when the
/// gateway asks for streamed usage, [`upstream_body`](Self::upstream_body)); nothing it holds
/// is ever logged but the model and the counts.
#[derive(Debug, Clone)]
pub struct ApiRequest {
    /// Which route it came in on.
    pub endpoint: Endpoint,
    /// The requested model.
    pub model: String,
    /// SSE when true.
    pub stream: bool,
    /// Messages (chat), input items (responses) or inputs (embeddings).
    pub message_count: usize,
    /// Whether the client asked for streamed usage (`stream_options.include_usage`).
    pub include_usage: bool,
    /// `max_completion_tokens`, `max_tokens` or `max_output_tokens`, when given.
    pub max_tokens: Option<u64>,
    /// Sampling temperature, when given.
    pub temperature: Option<f64>,
    /// The body as parsed (duplicate keys were refused, so it is the body received).
    pub json: Arc<Map<String, Value>>,
    /// The body exactly as received.
    pub raw: Bytes,
}

impl ApiRequest {
    /// Whether the gateway adds `stream_options.include_usage` to learn a stream's usage.
    pub fn asks_usage_for_client(&self) -> bool {
        self.endpoint == Endpoint::ChatCompletions && self.stream && !self.include_usage
    }

    /// The body sent upstream: the client's bytes, unchanged, except that a chat stream whose
    /// client did not ask for usage asks for it (the gateway strips the extra chunk again).
    pub fn upstream_body(&self) -> Bytes {
        if !self.asks_usage_for_client() {
            return self.raw.clone();
        }
        let mut json = (*self.json).clone();
        let options = json
            .entry("stream_options")
            .or_insert_with(|| Value::Object(Map::new()));
        if !options.is_object() {
            *options = Value::Object(Map::new());
        }
        if let Value::Object(options) = options {
            options.insert("include_usage".to_owned(), Value::Bool(true));
        }
        Bytes::from(Value::Object(json).to_string())
    }

    /// The same request for another model: `model` replaced in the body, which is then
    /// serialized again (the one case where the forwarded bytes are not the client's).
    pub fn with_model(&self, model: &str) -> ApiRequest {
        let mut json = (*self.json).clone();
        json.insert("model".to_owned(), Value::String(model.to_owned()));
        let raw = Bytes::from(Value::Object(json.clone()).to_string());
        ApiRequest {
            model: model.to_owned(),
            json: Arc::new(json),
            raw,
            ..self.clone()
        }
    }

    /// The text of the request's messages or inputs, for token estimates (never logged).
    pub fn texts(&self) -> Vec<&str> {
        let mut texts = Vec::new();
        let field = match self.endpoint {
            Endpoint::ChatCompletions | Endpoint::Messages | Endpoint::CountTokens => "messages",
            Endpoint::Embeddings | Endpoint::Responses => "input",
        };
        if let Some(instructions) = self.json.get("instructions").and_then(Value::as_str) {
            texts.push(instructions);
        }
        collect_texts(self.json.get("system"), &mut texts);
        collect_texts(self.json.get(field), &mut texts);
        texts
    }
}

/// Strings under `value` that are text: plain strings, `content`, and `text` of parts.
fn collect_texts<'a>(value: Option<&'a Value>, out: &mut Vec<&'a str>) {
    match value {
        Some(Value::String(text)) => out.push(text),
        Some(Value::Array(items)) => {
            for item in items {
                collect_texts(Some(item), out);
            }
        }
        Some(Value::Object(object)) => {
            for key in ["content", "text", "output", "arguments"] {
                collect_texts(object.get(key), out);
            }
            if let Some(function) = object.get("function") {
                collect_texts(Some(function), out);
            }
            if let Some(calls) = object.get("tool_calls") {
                collect_texts(Some(calls), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(endpoint: Endpoint, body: Value, stream: bool, include_usage: bool) -> ApiRequest {
        let Value::Object(json) = body.clone() else {
            panic!("an object")
        };
        ApiRequest {
            endpoint,
            model: "m".into(),
            stream,
            message_count: 1,
            include_usage,
            max_tokens: None,
            temperature: None,
            json: Arc::new(json),
            raw: Bytes::from(body.to_string()),
        }
    }

    #[test]
    fn paths_map_to_endpoints() {
        for endpoint in Endpoint::ALL {
            assert_eq!(Endpoint::from_path(endpoint.route()), Some(endpoint));
            assert_eq!(Endpoint::from_path(endpoint.alias()), Some(endpoint));
        }
        assert_eq!(Endpoint::from_path("/v1/models"), None);
    }

    #[test]
    fn a_chat_stream_asks_for_usage_and_keeps_everything_else() {
        let body = json!({"model": "m", "stream": true, "stream_options": {"x": 1}, "n": 2});
        let sent: Value = serde_json::from_slice(
            &request(Endpoint::ChatCompletions, body, true, false).upstream_body(),
        )
        .unwrap();
        assert_eq!(
            sent,
            json!({"model": "m", "stream": true, "stream_options": {"x": 1, "include_usage": true}, "n": 2})
        );
    }

    #[test]
    fn other_bodies_go_as_received() {
        let body = json!({"model": "m", "stream": true, "stream_options": {"include_usage": true}});
        let asked = request(Endpoint::ChatCompletions, body, true, true);
        assert_eq!(asked.upstream_body(), asked.raw);
        let plain = request(
            Endpoint::ChatCompletions,
            json!({"model": "m"}),
            false,
            false,
        );
        assert_eq!(plain.upstream_body(), plain.raw);
        let responses = request(Endpoint::Responses, json!({"stream": true}), true, false);
        assert_eq!(responses.upstream_body(), responses.raw);
    }

    #[test]
    fn texts_cover_strings_and_parts() {
        let body = json!({"messages": [
            {"role": "system", "content": "a"},
            {"role": "user", "content": [{"type": "text", "text": "b"}, {"type": "image_url", "image_url": {"url": "u"}}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "c"}}]},
        ]});
        let r = request(Endpoint::ChatCompletions, body, false, false);
        assert_eq!(r.texts(), ["a", "b", "c"]);
    }
}
