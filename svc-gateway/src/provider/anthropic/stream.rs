//! Messages stream events as chat completion chunks.
//!
//! `message_start` opens the assistant turn, `text_delta`s become content deltas, a
//! `tool_use` block becomes a tool call (its `input_json_delta`s the arguments), and
//! `message_delta` carries the finish reason. At `message_stop` the usage chunk (empty
//! `choices`, as OpenAI sends it when asked) and `data: [DONE]` follow; the gateway drops the
//! usage chunk again for a client that did not ask for it. An `error` event ends the stream
//! with the gateway's error event, and so does an event longer than
//! [`MAX_EVENT_BYTES`](crate::sse::MAX_EVENT_BYTES). Each byte is scanned for a boundary once:
//! a tail still waiting for its end is not searched again when the next frame arrives.

use std::collections::HashMap;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::response::{finish_reason, usage};
use crate::provider::{EventStream, ProviderError};
use crate::sse::{MAX_EVENT_BYTES, event_data, first_boundary_end};

/// The chat chunks of a Messages event stream.
pub(crate) fn chunks(events: EventStream, created: i64) -> EventStream {
    let mut translator = Translator {
        unfinished: BytesMut::new(),
        scanned: 0,
        id: Value::Null,
        model: Value::Null,
        created,
        usage: json!({}),
        tools: HashMap::new(),
    };
    Box::pin(
        events
            .flat_map(move |item| {
                let items = match item {
                    Ok(data) => translator.feed(&data),
                    Err(error) => vec![Err(error)],
                };
                futures_util::stream::iter(items)
            })
            .filter(|item| std::future::ready(!matches!(item, Ok(data) if data.is_empty()))),
    )
}

struct Translator {
    /// Bytes after the last whole event.
    unfinished: BytesMut,
    /// How much of `unfinished` is known to hold no boundary.
    scanned: usize,
    id: Value,
    model: Value,
    created: i64,
    /// The Messages usage so far: input from `message_start`, output from `message_delta`.
    usage: Value,
    /// Content block index to tool call index.
    tools: HashMap<u64, usize>,
}

impl Translator {
    /// The chunks of the whole events `data` completes, then the error that ends the stream
    /// if one does.
    fn feed(&mut self, data: &[u8]) -> Vec<Result<Bytes, ProviderError>> {
        let mut out = Vec::new();
        let ended = self.translate(data, &mut out).err();
        let mut items = vec![Ok(Bytes::from(out))];
        items.extend(ended.map(Err));
        items
    }

    fn translate(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<(), ProviderError> {
        self.unfinished.extend_from_slice(data);
        loop {
            // A boundary may straddle what was scanned and what arrived.
            let from = self.scanned.saturating_sub(3);
            let Some(end) = first_boundary_end(&self.unfinished[from..]) else {
                self.scanned = self.unfinished.len();
                break;
            };
            let event = self.unfinished.split_to(from + end);
            self.scanned = 0;
            let payload = event_data(&event);
            if payload.is_empty() {
                continue;
            }
            let event: Value =
                serde_json::from_slice(&payload).map_err(|_| ProviderError::Unavailable {
                    reason: "provider stream event is not JSON",
                })?;
            self.event(&event, out)?;
        }
        if self.unfinished.len() > MAX_EVENT_BYTES {
            self.unfinished = BytesMut::new();
            self.scanned = 0;
            return Err(ProviderError::Unavailable {
                reason: ProviderError::EVENT_TOO_LONG,
            });
        }
        Ok(())
    }

    fn chunk(&self, out: &mut Vec<u8>, delta: Value, finish: Option<&str>) {
        let chunk = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        write_event(out, &chunk);
    }

    fn event(&mut self, event: &Value, out: &mut Vec<u8>) -> Result<(), ProviderError> {
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
                if block["type"] == "tool_use" {
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
                        if let Some(index) = self.tools.get(&block) {
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
                let finish = finish_reason(event["delta"]["stop_reason"].as_str());
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
                write_event(out, &last);
                out.extend_from_slice(b"data: [DONE]\n\n");
            }
            "error" => return Err(stream_error(&event["error"])),
            _ => {}
        }
        Ok(())
    }
}

fn write_event(out: &mut Vec<u8>, data: &Value) {
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(data.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
}

/// Each count a later event reports replaces the earlier one (they only grow).
fn merge_usage(total: &mut Value, reported: &Value) {
    if let (Some(total), Some(reported)) = (total.as_object_mut(), reported.as_object()) {
        for (key, value) in reported {
            if value.is_u64() {
                total.insert(key.clone(), value.clone());
            }
        }
    }
}

/// An `error` event's place in the provider table.
fn stream_error(error: &Value) -> ProviderError {
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
    use super::*;

    fn sse(name: &str, data: Value) -> String {
        format!("event: {name}\ndata: {data}\n\n")
    }

    async fn translate(frames: Vec<String>) -> Vec<Result<String, ProviderError>> {
        let events: EventStream = Box::pin(futures_util::stream::iter(
            frames.into_iter().map(|f| Ok(Bytes::from(f))),
        ));
        chunks(events, 7)
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
            json!({"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21})
        );
        assert_eq!(chunks[6]["choices"], json!([]));
    }

    #[tokio::test]
    async fn an_event_over_the_bound_ends_the_stream_after_the_whole_ones() {
        let start = sse(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "model": "m", "usage": {}}}),
        );
        let mut frames = vec![format!("{start}event: content_block_delta\ndata: ")];
        frames.extend(std::iter::repeat_n("x".repeat(64 * 1024), 17));
        frames.push("\n\n".into());
        let items = translate(frames).await;
        assert_eq!(
            items.len(),
            2,
            "{:?}",
            items.iter().map(Result::is_ok).collect::<Vec<_>>()
        );
        assert!(items[0].as_ref().unwrap().contains("msg_1"));
        assert!(matches!(
            items[1],
            Err(ProviderError::Unavailable {
                reason: ProviderError::EVENT_TOO_LONG
            })
        ));
    }

    #[test]
    fn a_tail_waiting_for_its_end_is_not_scanned_again() {
        let mut translator = Translator {
            unfinished: BytesMut::new(),
            scanned: 0,
            id: Value::Null,
            model: Value::Null,
            created: 0,
            usage: json!({}),
            tools: HashMap::new(),
        };
        translator.feed(b"data: {\"type\": \"ping\", \"pad\": \"");
        for _ in 0..100 {
            let items = translator.feed(b"xxxxxxxxxx");
            assert!(matches!(&items[..], [Ok(out)] if out.is_empty()));
            assert_eq!(translator.scanned, translator.unfinished.len());
        }
        // The boundary straddles two frames.
        translator.feed(b"\"}\n");
        let items = translator.feed(b"\ndata: {\"type\": \"ping\"}\n\n");
        assert!(items.iter().all(Result::is_ok));
        assert!(translator.unfinished.is_empty());
        assert_eq!(translator.scanned, 0);
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
