//! What a provider call consumed, learned for every call (streamed or not), for the session
//! checkpoint and `svc_proxy_tokens_total{kind}`.
//!
//! The handler puts a [`UsageReporter`] in the request extensions; the forwarding service
//! reports through it once the call is over (a JSON answer at once, a stream at its end, an
//! error with no usage). A request the provider never saw (a replay, a conflict) drops the
//! reporter unused, so the handler knows for certain whether the provider was called.

use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use serde::Deserialize;
use tokio::sync::oneshot;

use crate::session::Usage;

/// The usage object of any OpenAI-shaped answer: chat and embeddings name tokens
/// prompt/completion, the Responses API input/output.
#[derive(Debug, Default, Deserialize)]
struct Reported {
    prompt_tokens: Option<i64>,
    completion_tokens: Option<i64>,
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    total_tokens: Option<i64>,
}

impl Reported {
    fn usage(self) -> Option<Usage> {
        let prompt = self.prompt_tokens.or(self.input_tokens)?;
        let completion = self.completion_tokens.or(self.output_tokens).unwrap_or(0);
        Some(Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: self.total_tokens.unwrap_or(prompt + completion),
        })
    }
}

/// A body whose `usage` (or, in a Responses API event, `response.usage`) is read and nothing
/// else: other fields are skipped unparsed.
#[derive(Deserialize)]
struct WithUsage {
    usage: Option<Reported>,
    response: Option<Box<WithUsage>>,
}

/// The usage of a JSON answer or of one SSE event's data, when it reports one.
pub fn from_json(body: &[u8]) -> Option<Usage> {
    let parsed: WithUsage = serde_json::from_slice(body).ok()?;
    match parsed {
        WithUsage {
            usage: Some(usage), ..
        } => usage.usage(),
        WithUsage {
            response: Some(response),
            ..
        } => response.usage?.usage(),
        _ => None,
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
}

/// Hands the call's [`Report`] to the handler; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct UsageReporter(Arc<Mutex<Option<oneshot::Sender<Report>>>>);

impl UsageReporter {
    /// A reporter and the receiver of its one report.
    pub fn new() -> (UsageReporter, oneshot::Receiver<Report>) {
        let (sender, receiver) = oneshot::channel();
        (UsageReporter(Arc::new(Mutex::new(Some(sender)))), receiver)
    }

    /// Reports once; later reports are ignored.
    pub fn report(&self, report: Report) {
        let sender = match self.0.lock() {
            Ok(mut slot) => slot.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(sender) = sender {
            // The handler may have gone (the client left): nothing to tell then.
            let _ = sender.send(report);
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
        assert_eq!(from_json(br#"{"usage":null}"#), None);
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

    #[tokio::test]
    async fn reports_once_and_an_unused_reporter_says_so() {
        let (reporter, receiver) = UsageReporter::new();
        reporter.report(Report::default());
        reporter.report(Report {
            usage: Some(Usage {
                prompt_tokens: 1,
                completion_tokens: 1,
                total_tokens: 2,
            }),
        });
        assert_eq!(receiver.await.unwrap(), Report::default());
        let (reporter, receiver) = UsageReporter::new();
        drop(reporter);
        assert!(receiver.await.is_err());
    }
}
