//! Messages stream events as chat completion chunks.
//!
//! `message_start` opens the assistant turn, `text_delta`s become content deltas, a
//! `tool_use` block becomes a tool call (its `input_json_delta`s the arguments), and
//! `message_delta` carries the finish reason. At `message_stop` the usage chunk (empty
//! `choices`, as OpenAI sends it when asked) and `data: [DONE]` follow; the gateway drops the
//! usage chunk again for a client that did not ask for it. An `error` event, or a stream that
//! ends before `message_stop`, ends the stream with the gateway's error event; the cutting of frames into events is
//! [`translated`]'s.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::response::{finish_reason, is_output, stop_reason, usage};
use crate::provider::translate::{Event, Translate, ended_early, translated, write_event};
use crate::provider::{EventStream, ProviderError};

/// The chat chunks of a Messages event stream; `output_tool` names the forced tool of a
/// structured-output request, whose input is streamed as the content.
pub(crate) fn chunks(
    events: EventStream,
    created: i64,
    output_tool: Option<String>,
) -> EventStream {
    translated(
        events,
        Translator {
            id: Value::Null,
            model: Value::Null,
            created,
            usage: json!({}),
            tools: HashMap::new(),
            output_tool,
            output_block: None,
            finished: false,
        },
    )
}

struct Translator {
    id: Value,
    model: Value,
    created: i64,
    /// The Messages usage so far: input from `message_start`, output from `message_delta`.
    usage: Value,
    /// Content block index to tool call index.
    tools: HashMap<u64, usize>,
    /// The forced tool of a structured-output request, and its block once it started.
    output_tool: Option<String>,
    output_block: Option<u64>,
    /// Whether `message_stop` came: a stream that ends before it was cut.
    finished: bool,
}

/// A translation of Anthropic's Messages events, whose answer is whole only once
/// `message_stop` came: a stream that ends before it was cut.
pub(super) trait MessageEvents: Send + 'static {
    /// Writes what one Messages event becomes.
    fn message_event(&mut self, event: &Value, out: &mut Vec<u8>) -> Result<(), ProviderError>;

    /// Whether `message_stop` came.
    fn finished(&self) -> bool;
}

impl<T: MessageEvents> Translate for T {
    fn event(&mut self, event: Event, out: &mut Vec<u8>) -> Result<(), ProviderError> {
        match event {
            Event::Json(event) => self.message_event(&event, out),
            Event::Done => Ok(()),
        }
    }

    fn end(&mut self, _out: &mut Vec<u8>) -> Result<(), ProviderError> {
        if self.finished() {
            Ok(())
        } else {
            Err(ended_early())
        }
    }
}

impl MessageEvents for Translator {
    fn message_event(&mut self, event: &Value, out: &mut Vec<u8>) -> Result<(), ProviderError> {
        match event["type"].as_str().unwrap_or_default() {
            "message_start" => {
                let message = &event["message"];
                self.id = message["id"].clone();
                self.model = message["model"].clone();
                merge_usage(&mut self.usage, &message["usage"]);
                self.chunk(out, json!({"role": "assistant", "content": ""}), None);
            }
            "content_block_start" => {
                let block = &event["content_block"];
                if is_output(block, self.output_tool.as_deref()) {
                    self.output_block = event["index"].as_u64();
                } else if block["type"] == "tool_use" {
                    let index = self.tools.len();
                    self.tools
                        .insert(event["index"].as_u64().unwrap_or_default(), index);
                    let call = json!({"index": index, "id": block["id"], "type": "function",
                                      "function": {"name": block["name"], "arguments": ""}});
                    self.chunk(out, json!({"tool_calls": [call]}), None);
                }
            }
            "content_block_delta" => {
                let delta = &event["delta"];
                match delta["type"].as_str() {
                    Some("text_delta") => {
                        self.chunk(out, json!({"content": delta["text"]}), None);
                    }
                    Some("input_json_delta") => {
                        let block = event["index"].as_u64().unwrap_or_default();
                        if self.output_block == Some(block) {
                            self.chunk(out, json!({"content": delta["partial_json"]}), None);
                        } else if let Some(index) = self.tools.get(&block) {
                            let call = json!({"index": index,
                                              "function": {"arguments": delta["partial_json"]}});
                            self.chunk(out, json!({"tool_calls": [call]}), None);
                        }
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                merge_usage(&mut self.usage, &event["usage"]);
                let stop = stop_reason(
                    event["delta"]["stop_reason"].as_str(),
                    !self.tools.is_empty(),
                );
                let finish = finish_reason(stop);
                self.chunk(out, json!({}), Some(finish.unwrap_or("stop")));
            }
            "message_stop" => {
                let last = json!({
                    "id": self.id,
                    "object": "chat.completion.chunk",
                    "created": self.created,
                    "model": self.model,
                    "choices": [],
                    "usage": usage(&self.usage),
                });
                write_event(out, None, &last);
                out.extend_from_slice(b"data: [DONE]\n\n");
                self.finished = true;
            }
            "error" => return Err(stream_error(&event["error"])),
            _ => {}
        }
        Ok(())
    }

    fn finished(&self) -> bool {
        self.finished
    }
}

impl Translator {
    fn chunk(&self, out: &mut Vec<u8>, delta: Value, finish: Option<&str>) {
        let chunk = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        write_event(out, None, &chunk);
    }
}

/// Each count a later event reports replaces the earlier one (they only grow).
pub(super) fn merge_usage(total: &mut Value, reported: &Value) {
    if let (Some(total), Some(reported)) = (total.as_object_mut(), reported.as_object()) {
        for (key, value) in reported {
            if value.is_u64() {
                total.insert(key.clone(), value.clone());
            }
        }
    }
}

/// An `error` event's place in the provider table.
pub(super) fn stream_error(error: &Value) -> ProviderError {
    match error["type"].as_str() {
        Some("rate_limit_error") => ProviderError::RateLimited { retry_after: None },
        Some("overloaded_error" | "api_error") => ProviderError::Unavailable {
            reason: ProviderError::SERVER_ERROR,
        },
        _ => ProviderError::Unavailable {
            reason: "provider stream reported an error",
        },
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use futures_util::StreamExt;

    use super::*;

    fn sse(name: &str, data: Value) -> String {
        format!("event: {name}\ndata: {data}\n\n")
    }

    async fn translate(frames: Vec<String>) -> Vec<Result<String, ProviderError>> {
        let events: EventStream = Box::pin(futures_util::stream::iter(
            frames.into_iter().map(|f| Ok(Bytes::from(f))),
        ));
        chunks(events, 7, None)
            .map(|item| item.map(|b| String::from_utf8(b.to_vec()).unwrap()))
            .collect()
            .await
    }

    fn data(text: &str) -> Vec<Value> {
        text.split_terminator("\n\n")
            .map(|e| e.strip_prefix("data: ").unwrap())
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn a_tool_call_stream_becomes_chat_chunks() {
        let start = json!({"type": "message_start", "message": {"id": "msg_1", "model": "claude-x",
            "usage": {"input_tokens": 12, "output_tokens": 1}}});
        let frames = vec![
            sse("message_start", start),
            sse("ping", json!({"type": "ping"})),
            sse(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
            ),
            // An event split across frames goes out once whole.
            "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 0, "
                .into(),
            "\"delta\": {\"type\": \"text_delta\", \"text\": \"Hi\"}}\n\n".into(),
            sse(
                "content_block_start",
                json!({"type": "content_block_start", "index": 1,
                "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}}),
            ),
            sse(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": "{\"a\":"}}),
            ),
            sse(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": "1}"}}),
            ),
            sse(
                "message_delta",
                json!({"type": "message_delta",
                "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}),
            ),
            sse("message_stop", json!({"type": "message_stop"})),
        ];
        let out: String = translate(frames)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert!(out.ends_with("data: [DONE]\n\n"), "{out}");
        let chunks = data(&out);
        assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
        assert_eq!(chunks[0]["id"], "msg_1");
        assert_eq!(chunks[1]["choices"][0]["delta"]["content"], "Hi");
        let call = &chunks[2]["choices"][0]["delta"]["tool_calls"][0];
        assert_eq!(
            (call["index"].as_u64(), call["id"].as_str()),
            (Some(0), Some("toolu_1"))
        );
        let arguments: String = chunks[3..5]
            .iter()
            .map(|c| {
                c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(arguments, "{\"a\":1}");
        assert_eq!(chunks[5]["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(
            chunks[6]["usage"],
            json!({"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21,
                   "prompt_tokens_details": {"cached_tokens": 0}})
        );
        assert_eq!(chunks[6]["choices"], json!([]));
    }

    #[tokio::test]
    async fn a_stream_cut_before_message_stop_ends_with_an_error() {
        let frames = vec![sse(
            "message_start",
            json!({"type": "message_start", "message": {"id": "m"}}),
        )];
        let out = translate(frames).await;
        assert!(out[0].is_ok());
        assert_eq!(out[1], Err(ended_early()));
    }

    #[tokio::test]
    async fn an_error_event_ends_the_stream_with_an_error() {
        let frames = vec![
            sse(
                "message_start",
                json!({"type": "message_start", "message": {"id": "m"}}),
            ),
            sse(
                "error",
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "x"}}),
            ),
        ];
        let out = translate(frames).await;
        assert!(out[0].is_ok());
        assert_eq!(
            out[1],
            Err(ProviderError::Unavailable {
                reason: ProviderError::SERVER_ERROR
            })
        );
    }
}
