//! Messages stream events as the Responses API's event sequence, each with its
//! `sequence_number`, as the OpenAI SDKs read it.
//!
//! `message_start` gives `response.created` and `response.in_progress`. A text block is a
//! `message` output item: `response.output_item.added`, `response.content_part.added`, a
//! `response.output_text.delta` per `text_delta`, then `response.output_text.done`,
//! `response.content_part.done` and `response.output_item.done` when the block stops. A
//! `tool_use` block is a `function_call` item: added, a `response.function_call_arguments.delta`
//! per `input_json_delta`, `.done`, and the item done; a custom tool's block is a
//! `custom_tool_call` item whose text goes out whole when the block stops
//! (`response.custom_tool_call_input.delta` and `.done`). The forced tool of a `text.format`
//! schema streams as text. `message_stop` gives `response.completed` (or
//! `response.incomplete`) with every output item and the usage. An `error` event, or a stream
//! that ends before `message_stop`, ends the stream with the gateway's error.

use serde_json::{Value, json};

use super::super::response::is_output;
use super::super::stream::{MessageEvents, merge_usage, stream_error};
use super::answer::{custom_tool_call, function_call, message_item, output_text};
use super::{Echo, custom_input, item_id, object, status, usage};
use crate::provider::translate::{translated, write_event};
use crate::provider::{EventStream, ProviderError};

/// The Responses events of a Messages event stream.
pub(crate) fn events(events: EventStream, echo: Echo) -> EventStream {
    translated(
        events,
        Translator {
            echo,
            message: Value::Null,
            sequence: 0,
            output: Vec::new(),
            usage: json!({}),
            stop_reason: None,
            open: None,
            finished: false,
        },
    )
}

/// What the block being streamed is.
enum Item {
    /// A `message` item: text, or the forced tool's input.
    Message,
    /// A `function_call` item, with the tool's block.
    Call(Value),
    /// A `custom_tool_call` item, with the tool's block: its text is known once whole.
    Custom(Value),
}

/// The output item of the block being streamed.
struct Open {
    item: Item,
    output_index: usize,
    id: String,
    /// The text, or the call's arguments, so far.
    buffer: String,
}

struct Translator {
    echo: Echo,
    /// `message_start`'s message: its id and model.
    message: Value,
    sequence: u64,
    /// The output items done so far.
    output: Vec<Value>,
    usage: Value,
    stop_reason: Option<String>,
    open: Option<Open>,
    finished: bool,
}

impl MessageEvents for Translator {
    fn message_event(&mut self, event: &Value, out: &mut Vec<u8>) -> Result<(), ProviderError> {
        match event["type"].as_str().unwrap_or_default() {
            "message_start" => {
                self.message = event["message"].clone();
                merge_usage(&mut self.usage, &event["message"]["usage"]);
                let response = self.response("in_progress", Value::Null, Value::Null);
                self.emit(out, "response.created", json!({"response": response}));
                let response = self.response("in_progress", Value::Null, Value::Null);
                self.emit(out, "response.in_progress", json!({"response": response}));
            }
            "content_block_start" => self.start(&event["content_block"], out),
            "content_block_delta" => self.delta(&event["delta"], out),
            "content_block_stop" => self.stop(out),
            "message_delta" => {
                merge_usage(&mut self.usage, &event["usage"]);
                if let Some(reason) = event["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_owned());
                }
            }
            "message_stop" => {
                self.stop(out);
                let (status, incomplete) = status(self.stop_reason.as_deref());
                let response = self.response(status, incomplete, usage(&self.usage));
                let kind = match status {
                    "incomplete" => "response.incomplete",
                    _ => "response.completed",
                };
                self.emit(out, kind, json!({"response": response}));
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
    fn emit(&mut self, out: &mut Vec<u8>, kind: &str, mut data: Value) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        write_event(out, Some(kind), &data);
    }

    fn response(&self, status: &str, incomplete: Value, usage: Value) -> Value {
        object(
            &self.echo,
            &self.message,
            status,
            incomplete,
            self.output.clone(),
            usage,
        )
    }

    fn start(&mut self, block: &Value, out: &mut Vec<u8>) {
        self.stop(out);
        let output_index = self.output.len();
        let text = block["type"] == "text" || is_output(block, self.echo.output_tool.as_deref());
        if text {
            let id = item_id("msg", &self.message, output_index);
            let item = json!({"type": "message", "id": id, "status": "in_progress",
                              "role": "assistant", "content": []});
            let added = json!({"output_index": output_index, "item": item});
            self.emit(out, "response.output_item.added", added);
            let part = json!({"item_id": id, "output_index": output_index, "content_index": 0,
                              "part": output_text("")});
            self.emit(out, "response.content_part.added", part);
            self.open = Some(Open {
                item: Item::Message,
                output_index,
                id,
                buffer: String::new(),
            });
        } else if block["type"] == "tool_use" {
            let (id, item, kind) = if self.echo.is_custom(block) {
                let id = item_id("ctc", &self.message, output_index);
                let item =
                    self.echo
                        .with_namespace(custom_tool_call(&id, block, "", "in_progress"));
                (id, item, Item::Custom(block.clone()))
            } else {
                let id = item_id("fc", &self.message, output_index);
                let item = self
                    .echo
                    .with_namespace(function_call(&id, block, "", "in_progress"));
                (id, item, Item::Call(block.clone()))
            };
            let added = json!({"output_index": output_index, "item": item});
            self.emit(out, "response.output_item.added", added);
            self.open = Some(Open {
                item: kind,
                output_index,
                id,
                buffer: String::new(),
            });
        }
    }

    fn delta(&mut self, delta: &Value, out: &mut Vec<u8>) {
        let piece = match delta["type"].as_str() {
            Some("text_delta") => delta["text"].as_str(),
            Some("input_json_delta") => delta["partial_json"].as_str(),
            _ => None,
        };
        let (Some(piece), Some(open)) = (piece, self.open.as_mut()) else {
            return;
        };
        open.buffer.push_str(piece);
        let (id, output_index) = (open.id.clone(), open.output_index);
        match open.item {
            Item::Call(_) => {
                let data = json!({"item_id": id, "output_index": output_index, "delta": piece});
                self.emit(out, "response.function_call_arguments.delta", data);
            }
            Item::Message => {
                let data = json!({"item_id": id, "output_index": output_index,
                                  "content_index": 0, "delta": piece, "logprobs": []});
                self.emit(out, "response.output_text.delta", data);
            }
            // Its pieces are pieces of JSON around the text: the text goes out whole.
            Item::Custom(_) => {}
        }
    }

    /// Closes the open item, if any.
    fn stop(&mut self, out: &mut Vec<u8>) {
        let Some(open) = self.open.take() else {
            return;
        };
        let (id, index) = (open.id.as_str(), open.output_index);
        let item = match &open.item {
            Item::Custom(block) => {
                let input: Value = serde_json::from_str(&open.buffer).unwrap_or_default();
                let input = custom_input(&input);
                if !input.is_empty() {
                    let data = json!({"item_id": id, "output_index": index, "delta": input});
                    self.emit(out, "response.custom_tool_call_input.delta", data);
                }
                let data = json!({"item_id": id, "output_index": index, "input": input});
                self.emit(out, "response.custom_tool_call_input.done", data);
                custom_tool_call(id, block, input, "completed")
            }
            Item::Call(block) => {
                let arguments = if open.buffer.is_empty() {
                    "{}"
                } else {
                    open.buffer.as_str()
                };
                let data = json!({"item_id": id, "output_index": index,
                                  "arguments": arguments, "name": block["name"]});
                self.emit(out, "response.function_call_arguments.done", data);
                function_call(id, block, arguments, "completed")
            }
            Item::Message => {
                let text = open.buffer.as_str();
                let data = json!({"item_id": id, "output_index": index, "content_index": 0,
                                  "text": text, "logprobs": []});
                self.emit(out, "response.output_text.done", data);
                let part = json!({"item_id": id, "output_index": index, "content_index": 0,
                                  "part": output_text(text)});
                self.emit(out, "response.content_part.done", part);
                message_item(id, text)
            }
        };
        let item = self.echo.with_namespace(item);
        let done = json!({"output_index": index, "item": item});
        self.emit(out, "response.output_item.done", done);
        self.output.push(item);
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use futures_util::StreamExt;

    use super::super::answer::tests::echo;
    use super::*;
    use crate::provider::translate::ended_early;

    fn sse(name: &str, data: Value) -> String {
        format!("event: {name}\ndata: {data}\n\n")
    }

    async fn translate(
        frames: Vec<String>,
        output_tool: Option<&str>,
    ) -> (Vec<(String, Value)>, Option<ProviderError>) {
        let tools = json!({"tools": [{"type": "custom", "name": "apply_patch"}]});
        let events: EventStream = Box::pin(futures_util::stream::iter(
            frames.into_iter().map(|f| Ok(Bytes::from(f))),
        ));
        let items: Vec<_> = super::events(events, echo(tools, output_tool))
            .collect()
            .await;
        let mut parsed = Vec::new();
        let mut error = None;
        for item in items {
            match item {
                Ok(bytes) => {
                    for event in String::from_utf8(bytes.to_vec())
                        .unwrap()
                        .split_terminator("\n\n")
                    {
                        let mut lines = event.lines();
                        let name = lines.next().unwrap().strip_prefix("event: ").unwrap();
                        let data = lines.next().unwrap().strip_prefix("data: ").unwrap();
                        parsed.push((name.to_owned(), serde_json::from_str(data).unwrap()));
                    }
                }
                Err(e) => error = Some(e),
            }
        }
        (parsed, error)
    }

    fn answer(blocks: Vec<(Value, Vec<Value>)>, stop: &str) -> Vec<String> {
        let mut frames = vec![sse(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_9", "model": "claude-x",
                "usage": {"input_tokens": 12, "output_tokens": 1}}}),
        )];
        for (index, (block, deltas)) in blocks.into_iter().enumerate() {
            frames.push(sse(
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block": block}),
            ));
            for delta in deltas {
                frames.push(sse(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": delta}),
                ));
            }
            frames.push(sse(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
        }
        frames.push(sse(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop},
                   "usage": {"output_tokens": 9}}),
        ));
        frames.push(sse("message_stop", json!({"type": "message_stop"})));
        frames
    }

    #[tokio::test]
    async fn text_and_a_tool_call_stream_as_responses_events() {
        let frames = answer(
            vec![
                (
                    json!({"type": "text", "text": ""}),
                    vec![
                        json!({"type": "text_delta", "text": "Hel"}),
                        json!({"type": "text_delta", "text": "lo"}),
                    ],
                ),
                (
                    json!({"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}),
                    vec![
                        json!({"type": "input_json_delta", "partial_json": "{\"a\":"}),
                        json!({"type": "input_json_delta", "partial_json": "1}"}),
                    ],
                ),
            ],
            "tool_use",
        );
        let (events, error) = translate(frames, None).await;
        assert!(error.is_none());
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        for (i, (name, data)) in events.iter().enumerate() {
            assert_eq!(data["type"], name.as_str());
            assert_eq!(data["sequence_number"], i);
        }
        assert_eq!(events[6].1["text"], "Hello");
        assert_eq!(events[12].1["arguments"], "{\"a\":1}");
        let done = &events[14].1["response"];
        assert_eq!(done["status"], "completed");
        assert_eq!(done["output"][1]["call_id"], "toolu_1");
        assert_eq!(done["usage"]["input_tokens"], 12);
        assert_eq!(done["usage"]["output_tokens"], 9);
        assert_eq!(events[0].1["response"]["usage"], Value::Null);
    }

    #[tokio::test]
    async fn a_custom_tools_text_goes_out_whole() {
        let frames = answer(
            vec![(
                json!({"type": "tool_use", "id": "toolu_1", "name": "apply_patch", "input": {}}),
                vec![
                    json!({"type": "input_json_delta", "partial_json": "{\"input\": \"*** Be"}),
                    json!({"type": "input_json_delta", "partial_json": "gin\"}"}),
                ],
            )],
            "tool_use",
        );
        let (events, error) = translate(frames, None).await;
        assert!(error.is_none());
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names[2..6],
            [
                "response.output_item.added",
                "response.custom_tool_call_input.delta",
                "response.custom_tool_call_input.done",
                "response.output_item.done",
            ]
        );
        assert_eq!(events[2].1["item"]["type"], "custom_tool_call");
        assert_eq!(events[4].1["input"], "*** Begin");
        let done = &events.last().unwrap().1["response"]["output"][0];
        assert_eq!(done["input"], "*** Begin");
        assert_eq!(done["call_id"], "toolu_1");
    }

    #[tokio::test]
    async fn a_schema_answer_streams_as_text_and_a_cut_stream_fails() {
        let frames = answer(
            vec![(
                json!({"type": "tool_use", "id": "toolu_1", "name": "Answer", "input": {}}),
                vec![json!({"type": "input_json_delta", "partial_json": "{\"a\":1}"})],
            )],
            "tool_use",
        );
        let (events, error) = translate(frames.clone(), Some("Answer")).await;
        assert!(error.is_none());
        let text: Vec<&Value> = events
            .iter()
            .filter(|(n, _)| n == "response.output_text.done")
            .map(|(_, d)| &d["text"])
            .collect();
        assert_eq!(text, [&json!("{\"a\":1}")]);

        let cut = frames[..frames.len() - 2].to_vec();
        let (events, error) = translate(cut, Some("Answer")).await;
        assert!(events.iter().all(|(n, _)| n != "response.completed"));
        assert_eq!(error, Some(ended_early()));
    }
}
