//! Chat completion chunks as Messages stream events, in Anthropic's order.
//!
//! The first chunk gives `message_start` (the input tokens are not known yet: 0) and a `ping`.
//! Content deltas stream in a text block, each tool call in a `tool_use` block of its own (its
//! argument pieces as `input_json_delta`s): `content_block_start`, the deltas,
//! `content_block_stop`, one block open at a time. The finish reason closes the open block;
//! the usage chunk that follows (the request asks for it) gives the counts, and at
//! `data: [DONE]` (or the end of a stream that finished) come `message_delta`, with the stop
//! reason and the usage, and `message_stop`. An error object in the stream, or a stream that
//! ends before its finish reason, ends the stream with the gateway's error.

use serde_json::{Value, json};

use super::answer::{message_id, stop_reason, usage};
use crate::provider::translate::{Event, Translate, ended_early, translated, write_event};
use crate::provider::{EventStream, ProviderError};

/// The Messages events of a chat chunk stream.
pub(crate) fn events(events: EventStream) -> EventStream {
    translated(
        events,
        Translator {
            started: false,
            blocks: 0,
            open: None,
            stop_reason: None,
            usage: None,
            finished: false,
        },
    )
}

/// The block being streamed.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Open {
    Text,
    /// A tool call: its index among the chunk's `tool_calls`.
    Tool(u64),
}

struct Translator {
    started: bool,
    /// Blocks started so far: the next block's index.
    blocks: u64,
    open: Option<Open>,
    stop_reason: Option<&'static str>,
    usage: Option<Value>,
    finished: bool,
}

impl Translate for Translator {
    fn event(&mut self, event: Event, out: &mut Vec<u8>) -> Result<(), ProviderError> {
        match event {
            Event::Json(chunk) => self.chunk(&chunk, out),
            Event::Done => {
                self.finish(out);
                Ok(())
            }
        }
    }

    fn end(&mut self, out: &mut Vec<u8>) -> Result<(), ProviderError> {
        if self.stop_reason.is_none() {
            return Err(ended_early());
        }
        self.finish(out);
        Ok(())
    }
}

fn emit(out: &mut Vec<u8>, kind: &str, mut data: Value) {
    data["type"] = json!(kind);
    write_event(out, Some(kind), &data);
}

impl Translator {
    fn chunk(&mut self, chunk: &Value, out: &mut Vec<u8>) -> Result<(), ProviderError> {
        if chunk.get("error").is_some_and(|e| !e.is_null()) {
            return Err(ProviderError::Unavailable {
                reason: "provider stream reported an error",
            });
        }
        if !self.started {
            self.started = true;
            let message = json!({
                "id": message_id(&chunk["id"]), "type": "message", "role": "assistant",
                "model": chunk["model"], "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": {"input_tokens": 0, "output_tokens": 0},
            });
            emit(out, "message_start", json!({"message": message}));
            emit(out, "ping", json!({}));
        }
        if let Some(reported) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage(reported));
        }
        let Some(choice) = chunk["choices"].get(0) else {
            return Ok(());
        };
        let delta = &choice["delta"];
        for text in [&delta["content"], &delta["refusal"]] {
            if let Some(text) = text.as_str().filter(|t| !t.is_empty()) {
                self.open_block(Open::Text, &json!({"type": "text", "text": ""}), out);
                let delta = json!({"type": "text_delta", "text": text});
                emit(
                    out,
                    "content_block_delta",
                    json!({"index": self.blocks - 1, "delta": delta}),
                );
            }
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = call["index"].as_u64().unwrap_or_default();
            if self.open != Some(Open::Tool(index)) {
                let block = json!({"type": "tool_use", "id": call["id"],
                                   "name": call["function"]["name"], "input": {}});
                self.open_block(Open::Tool(index), &block, out);
            }
            if let Some(piece) = call["function"]["arguments"]
                .as_str()
                .filter(|p| !p.is_empty())
            {
                let delta = json!({"type": "input_json_delta", "partial_json": piece});
                emit(
                    out,
                    "content_block_delta",
                    json!({"index": self.blocks - 1, "delta": delta}),
                );
            }
        }
        if let Some(finish) = choice["finish_reason"].as_str() {
            self.close_block(out);
            self.stop_reason = Some(stop_reason(Some(finish)));
        }
        Ok(())
    }

    /// Starts `block` unless it is the open one, closing the open one first.
    fn open_block(&mut self, kind: Open, block: &Value, out: &mut Vec<u8>) {
        if self.open == Some(kind) {
            return;
        }
        self.close_block(out);
        emit(
            out,
            "content_block_start",
            json!({"index": self.blocks, "content_block": block}),
        );
        self.blocks += 1;
        self.open = Some(kind);
    }

    fn close_block(&mut self, out: &mut Vec<u8>) {
        if self.open.take().is_some() {
            emit(out, "content_block_stop", json!({"index": self.blocks - 1}));
        }
    }

    /// `message_delta` and `message_stop`, once.
    fn finish(&mut self, out: &mut Vec<u8>) {
        if self.finished || !self.started {
            return;
        }
        self.finished = true;
        self.close_block(out);
        let usage = self
            .usage
            .clone()
            .unwrap_or_else(|| json!({"input_tokens": 0, "output_tokens": 0}));
        let delta = json!({"stop_reason": self.stop_reason.unwrap_or("end_turn"),
                           "stop_sequence": null});
        emit(
            out,
            "message_delta",
            json!({"delta": delta, "usage": usage}),
        );
        emit(out, "message_stop", json!({}));
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use futures_util::StreamExt;

    use super::*;

    fn chunk(delta: Value, finish: Option<&str>) -> String {
        let chunk = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-x",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {chunk}\n\n")
    }

    async fn translate(frames: Vec<String>) -> (Vec<(String, Value)>, Option<ProviderError>) {
        let events: EventStream = Box::pin(futures_util::stream::iter(
            frames.into_iter().map(|f| Ok(Bytes::from(f))),
        ));
        let mut parsed = Vec::new();
        let mut error = None;
        for item in super::events(events).collect::<Vec<_>>().await {
            match item {
                Ok(bytes) => {
                    for event in String::from_utf8(bytes.to_vec())
                        .unwrap()
                        .split_terminator("\n\n")
                    {
                        let (name, data) = event.split_once('\n').unwrap();
                        let data: Value =
                            serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
                        let name = name.strip_prefix("event: ").unwrap();
                        assert_eq!(data["type"], name);
                        parsed.push((name.to_owned(), data));
                    }
                }
                Err(e) => error = Some(e),
            }
        }
        (parsed, error)
    }

    #[tokio::test]
    async fn text_then_tool_calls_stream_in_anthropics_order() {
        let call = |index: u64, id: Option<&str>, arguments: &str| {
            let mut call = json!({"index": index, "function": {"arguments": arguments}});
            if let Some(id) = id {
                call["id"] = json!(id);
                call["type"] = json!("function");
                call["function"]["name"] = json!("look");
            }
            json!({"tool_calls": [call]})
        };
        let usage = json!({"id": "chatcmpl-1", "choices": [],
            "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21}});
        let frames = vec![
            chunk(json!({"role": "assistant", "content": ""}), None),
            chunk(json!({"content": "Hel"}), None),
            chunk(json!({"content": "lo"}), None),
            chunk(call(0, Some("call_1"), ""), None),
            chunk(call(0, None, "{\"x\":"), None),
            chunk(call(0, None, "1}"), None),
            chunk(call(1, Some("call_2"), "{}"), None),
            chunk(json!({}), Some("tool_calls")),
            format!("data: {usage}\n\n"),
            "data: [DONE]\n\n".to_owned(),
        ];
        let (events, error) = translate(frames).await;
        assert!(error.is_none(), "{error:?}");
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ]
        );
        assert_eq!(events[0].1["message"]["id"], "msg_chatcmpl-1");
        assert_eq!(events[3].1["delta"]["text"], "Hel");
        assert_eq!(
            events[6].1["content_block"],
            json!({"type": "tool_use", "id": "call_1", "name": "look", "input": {}})
        );
        assert_eq!(events[7].1["index"], 1);
        assert_eq!(events[8].1["delta"]["partial_json"], "1}");
        assert_eq!(events[10].1["index"], 2);
        assert_eq!(
            events[13].1,
            json!({"type": "message_delta",
                   "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                   "usage": {"input_tokens": 12, "output_tokens": 9}})
        );
    }

    #[tokio::test]
    async fn a_stream_without_done_ends_once_finished_and_fails_when_cut() {
        let frames = vec![
            chunk(json!({"content": "Hi"}), None),
            chunk(json!({}), Some("length")),
        ];
        let (events, error) = translate(frames.clone()).await;
        assert!(error.is_none());
        assert_eq!(events.last().unwrap().0, "message_stop");
        assert_eq!(
            events[events.len() - 2].1["delta"]["stop_reason"],
            "max_tokens"
        );

        let (events, error) = translate(frames[..1].to_vec()).await;
        assert_eq!(error, Some(ended_early()));
        assert!(events.iter().all(|(n, _)| n != "message_stop"));

        let failed = "data: {\"error\": {\"message\": \"boom\"}}\n\n".to_owned();
        let (_, error) = translate(vec![frames[0].clone(), failed]).await;
        assert!(matches!(error, Some(ProviderError::Unavailable { .. })));
    }
}
