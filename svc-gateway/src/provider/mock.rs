//! The mock provider: a deterministic OpenAI-shaped answer, without any network.
//!
//! The reply text and the token counts depend only on the request, so tests can assert them;
//! the `id` is fresh per call, so a test can tell a replayed answer from a new one.

use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::StatusCode;
use serde_json::json;

use super::{CallInfo, Provider, ProviderError, ProviderReply};
use crate::validate::ChatRequest;

/// The assistant text of every mock answer.
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

/// A rough token count (four bytes a token, at least one), good enough for usage figures.
fn tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4).max(1)
}

impl Provider for MockProvider {
    fn name(&self) -> &'static str {
        "mock"
    }

    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
        _call: &'a CallInfo,
    ) -> BoxFuture<'a, Result<ProviderReply, ProviderError>> {
        Box::pin(async move {
            let id = format!("chatcmpl-{}", uuid::Uuid::new_v4().simple());
            let created = chrono::Utc::now().timestamp();
            let prompt_tokens: u64 = request.messages.iter().map(|m| tokens(&m.content)).sum();
            let completion_tokens = tokens(MOCK_REPLY);
            let usage = json!({
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            });
            if request.stream {
                let usage = includes_usage(&request.raw).then_some(usage);
                return Ok(ProviderReply::Stream {
                    status: StatusCode::OK,
                    events: Box::pin(futures_util::stream::iter(
                        stream_events(&id, created, &request.model, usage)
                            .into_iter()
                            .map(Ok),
                    )),
                });
            }
            let body = json!({
                "id": id,
                "object": "chat.completion",
                "created": created,
                "model": request.model,
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": MOCK_REPLY},
                    "finish_reason": "stop",
                }],
                "usage": usage,
            });
            Ok(ProviderReply::Json {
                status: StatusCode::OK,
                body: Bytes::from(body.to_string()),
            })
        })
    }
}

/// Whether the body asks for `stream_options.include_usage`, as OpenAI's API reads it.
fn includes_usage(raw: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(raw)
        .is_ok_and(|body| body["stream_options"]["include_usage"] == true)
}

/// The SSE frames of a streamed mock answer: the role, one chunk per word, the finish, `[DONE]`.
///
/// With `usage` (the client set `stream_options.include_usage`) the frames follow OpenAI's
/// shape, which the official SDKs read: every chunk carries `"usage": null`, and one more chunk
/// with empty `choices` and the usage comes before `[DONE]`.
fn stream_events(
    id: &str,
    created: i64,
    model: &str,
    usage: Option<serde_json::Value>,
) -> Vec<Bytes> {
    let frame = |choices: serde_json::Value, usage: Option<&serde_json::Value>| {
        let mut event = json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": choices,
        });
        if let Some(usage) = usage {
            event["usage"] = usage.clone();
        }
        Bytes::from(format!("data: {event}\n\n"))
    };
    let null = usage.as_ref().map(|_| serde_json::Value::Null);
    let chunk = |delta: serde_json::Value, finish: Option<&str>| {
        frame(
            json!([{"index": 0, "delta": delta, "finish_reason": finish}]),
            null.as_ref(),
        )
    };
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    let words: Vec<&str> = MOCK_REPLY.split_inclusive(' ').collect();
    events.extend(words.iter().map(|w| chunk(json!({"content": w}), None)));
    events.push(chunk(json!({}), Some("stop")));
    if let Some(usage) = &usage {
        events.push(frame(json!([]), Some(usage)));
    }
    events.push(Bytes::from_static(b"data: [DONE]\n\n"));
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::Message;
    use futures_util::StreamExt;

    fn request(stream: bool) -> ChatRequest {
        ChatRequest {
            model: "svc-mock-1".into(),
            messages: vec![Message {
                role: "user".into(),
                content: "hello there".into(),
            }],
            stream,
            temperature: None,
            max_tokens: None,
            idempotency_key: None,
            raw: Bytes::new(),
        }
    }

    #[tokio::test]
    async fn answers_an_openai_shaped_completion() {
        let reply = MockProvider
            .complete(&request(false), &CallInfo::default())
            .await
            .unwrap();
        let ProviderReply::Json { status, body } = reply else {
            panic!("expected JSON")
        };
        assert_eq!(status, StatusCode::OK);
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert!(json["id"].as_str().unwrap().starts_with("chatcmpl-"));
        assert_eq!(json["object"], "chat.completion");
        assert!(json["created"].as_i64().unwrap() > 0);
        assert_eq!(json["model"], "svc-mock-1");
        assert_eq!(json["choices"][0]["index"], 0);
        assert_eq!(json["choices"][0]["message"]["role"], "assistant");
        assert_eq!(json["choices"][0]["message"]["content"], MOCK_REPLY);
        assert_eq!(json["choices"][0]["finish_reason"], "stop");
        let usage = &json["usage"];
        assert_eq!(usage["prompt_tokens"], 3);
        assert_eq!(
            usage["total_tokens"].as_u64().unwrap(),
            usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap()
        );
    }

    #[tokio::test]
    async fn streams_chunks_then_done() {
        let reply = MockProvider
            .complete(&request(true), &CallInfo::default())
            .await
            .unwrap();
        let ProviderReply::Stream { events, .. } = reply else {
            panic!("expected a stream")
        };
        let frames: Vec<Bytes> = events.map(|e| e.unwrap()).collect().await;
        assert_eq!(frames.last().unwrap(), "data: [DONE]\n\n");
        let mut text = String::new();
        for frame in &frames[..frames.len() - 1] {
            let payload = frame.strip_prefix(b"data: ").unwrap();
            let json: serde_json::Value = serde_json::from_slice(payload).unwrap();
            assert_eq!(json["object"], "chat.completion.chunk");
            text.push_str(
                json["choices"][0]["delta"]["content"]
                    .as_str()
                    .unwrap_or_default(),
            );
        }
        assert_eq!(text, MOCK_REPLY);
        let last_chunk: serde_json::Value =
            serde_json::from_slice(frames[frames.len() - 2].strip_prefix(b"data: ").unwrap())
                .unwrap();
        assert_eq!(last_chunk["choices"][0]["finish_reason"], "stop");
    }

    #[tokio::test]
    async fn streams_usage_last_when_asked() {
        let mut asked = request(true);
        asked.raw = Bytes::from_static(br#"{"stream_options": {"include_usage": true}}"#);
        let ProviderReply::Stream { events, .. } = MockProvider
            .complete(&asked, &CallInfo::default())
            .await
            .unwrap()
        else {
            panic!("expected a stream")
        };
        let frames: Vec<Bytes> = events.map(|e| e.unwrap()).collect().await;
        let chunks: Vec<serde_json::Value> = frames[..frames.len() - 1]
            .iter()
            .map(|f| serde_json::from_slice(f.strip_prefix(b"data: ").unwrap()).unwrap())
            .collect();
        let (last, rest) = chunks.split_last().unwrap();
        assert_eq!(last["choices"], serde_json::json!([]));
        assert_eq!(last["usage"]["prompt_tokens"], 3);
        assert!(last["usage"]["total_tokens"].as_u64().unwrap() > 3);
        assert!(
            rest.iter()
                .all(|c| c["usage"].is_null() && c.get("usage").is_some())
        );

        let ProviderReply::Stream { events, .. } = MockProvider
            .complete(&request(true), &CallInfo::default())
            .await
            .unwrap()
        else {
            panic!("expected a stream")
        };
        let frames: Vec<Bytes> = events.map(|e| e.unwrap()).collect().await;
        assert!(
            !frames
                .iter()
                .any(|f| f.windows(7).any(|w| w == b"\"usage\""))
        );
    }
}
