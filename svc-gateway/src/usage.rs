//! What a provider call consumed, learned for every call (streamed or not), for the session
//! checkpoint and `svc_proxy_tokens_total{kind}`.
//!
//! The provider call's answer carries a [`Report`] in its body (a JSON answer's at once, a
//! stream's as it passes); the accounting around the call reads it where the body ends.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use serde::Deserialize;

use crate::session::Usage;

/// The usage object of any answer: chat and embeddings name tokens prompt/completion, the
/// Responses and Messages APIs input/output. A Messages stream tells them apart: the input in
/// `message_start`, the output in `message_delta`. The Messages API counts the input its cache
/// wrote and read apart from `input_tokens`; all three are input the call was billed for.
#[derive(Debug, Default, Deserialize)]
struct Reported {
    prompt_tokens: Option<i64>,
    completion_tokens: Option<i64>,
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    total_tokens: Option<i64>,
    prompt_tokens_details: Option<Details>,
    input_tokens_details: Option<Details>,
    cache_creation_input_tokens: Option<i64>,
    cache_read_input_tokens: Option<i64>,
}

/// The breakdown of an OpenAI-shaped prompt count: how much of it the provider's cache served.
#[derive(Debug, Default, Deserialize)]
struct Details {
    cached_tokens: Option<i64>,
}

impl Reported {
    fn cached(&self) -> i64 {
        let details = self.prompt_tokens_details.as_ref();
        let details = details.or(self.input_tokens_details.as_ref());
        details
            .and_then(|d| d.cached_tokens)
            .or(self.cache_read_input_tokens)
            .unwrap_or(0)
            .max(0)
    }

    fn usage(self) -> Option<Usage> {
        let cache = self.cache_creation_input_tokens.unwrap_or(0).max(0)
            + self.cache_read_input_tokens.unwrap_or(0).max(0);
        let prompt = self
            .prompt_tokens
            .or(self.input_tokens.map(|fresh| fresh + cache));
        let completion = self.completion_tokens.or(self.output_tokens);
        if prompt.is_none() && completion.is_none() {
            return None;
        }
        let (prompt, completion) = (prompt.unwrap_or(0), completion.unwrap_or(0));
        Some(Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: self.total_tokens.unwrap_or(prompt + completion),
        })
    }
}

/// A body whose `usage` (or, in a Responses API event, `response.usage`, or in a Messages
/// API event, `message.usage`) is read and nothing else: other fields are skipped unparsed.
#[derive(Deserialize)]
struct WithUsage {
    usage: Option<Reported>,
    response: Option<Box<WithUsage>>,
    message: Option<Box<WithUsage>>,
}

/// The usage of a JSON answer or of one SSE event's data, when it reports one.
pub fn from_json(body: &[u8]) -> Option<Usage> {
    from_json_with_cached(body).map(|(usage, _)| usage)
}

/// [`from_json`], with the prompt tokens the provider's cache served (0 when it says none).
pub fn from_json_with_cached(body: &[u8]) -> Option<(Usage, i64)> {
    let parsed: WithUsage = serde_json::from_slice(body).ok()?;
    let reported = match parsed {
        WithUsage {
            usage: Some(usage), ..
        } => usage,
        WithUsage {
            response: Some(inner),
            ..
        }
        | WithUsage {
            message: Some(inner),
            ..
        } => inner.usage?,
        _ => return None,
    };
    let cached = reported.cached();
    Some((reported.usage()?, cached))
}

/// The usage of a stream that reported it in parts: each count at its largest (the counts a
/// stream reports only grow), the total at least their sum.
pub fn merged(earlier: Option<Usage>, later: Usage) -> Usage {
    let Some(earlier) = earlier else {
        return later;
    };
    let prompt_tokens = earlier.prompt_tokens.max(later.prompt_tokens);
    let completion_tokens = earlier.completion_tokens.max(later.completion_tokens);
    Usage {
        prompt_tokens,
        completion_tokens,
        total_tokens: (prompt_tokens + completion_tokens)
            .max(earlier.total_tokens)
            .max(later.total_tokens),
    }
}

/// True when `data` may hold a usage object (`"usage"` followed by `{`), so an event without
/// one (the `"usage": null` of every chunk included) costs no parse.
pub fn mentions_usage(data: &[u8]) -> bool {
    const KEY: &[u8] = b"\"usage\"";
    let mut rest = data;
    while let Some(at) = rest.windows(KEY.len()).position(|w| w == KEY) {
        rest = &rest[at + KEY.len()..];
        let value = rest
            .iter()
            .position(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b':'))
            .map(|i| rest[i]);
        if value == Some(b'{') {
            return true;
        }
    }
    false
}

/// True for the chat chunk that carries only usage (`"choices": []`): the one a client that
/// did not ask for usage must not see.
pub fn is_usage_only_chunk(data: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Chunk {
        choices: Option<Vec<serde::de::IgnoredAny>>,
    }
    serde_json::from_slice::<Chunk>(data).is_ok_and(|c| c.choices.is_some_and(|c| c.is_empty()))
}

/// What the forwarding service reports once a call is over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The usage the provider reported, when it did.
    pub usage: Option<Usage>,
    /// The provider that answered, as the registry names it; empty when none did.
    pub provider: String,
    /// For a stream, the event bytes the client was sent.
    pub streamed_bytes: Option<u64>,
    /// Of the prompt tokens, the ones the provider's cache served.
    pub cached_tokens: i64,
}

impl Report {
    /// The report of an answer from `provider` that told no usage (yet).
    pub fn answered_by(provider: &str) -> Report {
        Report {
            provider: provider.to_owned(),
            ..Report::default()
        }
    }
}

/// The `kind` label of `svc_proxy_tokens_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

/// `svc_proxy_tokens_total{kind="prompt"|"completion"}`: tokens the providers reported.
#[derive(Clone, Debug, Default)]
pub struct TokenMetrics {
    tokens: Family<KindLabel, Counter>,
}

impl TokenMetrics {
    /// Registers the counter in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "svc_proxy_tokens",
            "Tokens the providers reported, by kind (prompt or completion)",
            self.tokens.clone(),
        );
    }

    /// Counts one call's usage.
    pub fn record(&self, usage: &Usage) {
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        self.tokens
            .get_or_create(&KindLabel { kind: "prompt" })
            .inc_by(count(usage.prompt_tokens));
        self.tokens
            .get_or_create(&KindLabel { kind: "completion" })
            .inc_by(count(usage.completion_tokens));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_shape_of_usage() {
        let chat = br#"{"id":"x","choices":[{"message":{"content":"usage"}}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}"#;
        assert_eq!(
            from_json(chat),
            Some(Usage {
                prompt_tokens: 3,
                completion_tokens: 4,
                total_tokens: 7
            })
        );
        let embeddings = br#"{"data":[],"usage":{"prompt_tokens":5,"total_tokens":5}}"#;
        assert_eq!(from_json(embeddings).map(|u| u.completion_tokens), Some(0));
        let response = br#"{"type":"response.completed","response":{"usage":{"input_tokens":2,"output_tokens":6,"total_tokens":8}}}"#;
        assert_eq!(
            from_json(response),
            Some(Usage {
                prompt_tokens: 2,
                completion_tokens: 6,
                total_tokens: 8
            })
        );
        let start = br#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":25,"output_tokens":1}}}"#;
        let delta = br#"{"type":"message_delta","delta":{},"usage":{"output_tokens":15}}"#;
        let streamed = merged(from_json(start), from_json(delta).unwrap());
        assert_eq!(
            streamed,
            Usage {
                prompt_tokens: 25,
                completion_tokens: 15,
                total_tokens: 40
            }
        );
        let cached = br#"{"usage":{"prompt_tokens":10,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":4}}}"#;
        assert_eq!(from_json_with_cached(cached).map(|(_, c)| c), Some(4));
        // Anthropic's: the cache's writes and reads are input too, the reads served cached.
        let anthropic = br#"{"usage":{"input_tokens":10,"cache_creation_input_tokens":20,"cache_read_input_tokens":300,"output_tokens":5}}"#;
        let (usage, cached) = from_json_with_cached(anthropic).unwrap();
        assert_eq!(
            (usage.prompt_tokens, usage.total_tokens, cached),
            (330, 335, 300)
        );
        assert_eq!(from_json_with_cached(chat).map(|(_, c)| c), Some(0));
        assert_eq!(from_json(br#"{"usage":null}"#), None);
        assert_eq!(from_json(br#"{"usage":{}}"#), None);
        assert_eq!(from_json(b"not json"), None);
    }

    #[test]
    fn only_a_usage_object_is_worth_a_parse() {
        assert!(mentions_usage(br#"{"choices":[],"usage":{"a":1}}"#));
        assert!(mentions_usage(br#"{"usage" : {"a":1}}"#));
        assert!(!mentions_usage(
            br#"{"choices":[{"delta":{}}],"usage":null}"#
        ));
        assert!(!mentions_usage(br#"{"content":"no usage here"}"#));
    }
}
