//! A provider's event stream translated, event by event, into another protocol's events.
//!
//! [`translated`] cuts the provider's frames into whole server-sent events, hands each one's
//! JSON (or the `[DONE]` marker) to a [`Translate`], and sends on what it writes, one frame per
//! provider frame. A provider event that is not JSON, or one still unfinished past
//! [`MAX_EVENT_BYTES`], ends the stream with an error after the whole events before it, and so
//! does an error the translator returns. Each byte is scanned for a boundary once: a tail still
//! waiting for its end is not searched again when the next frame arrives. When the provider's
//! stream ends cleanly the translator may write a last word ([`Translate::end`]).

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use serde_json::Value;

use crate::provider::{EventStream, ProviderError, ProviderReply};
use crate::sse::{MAX_EVENT_BYTES, event_data, first_boundary_end};

/// A provider's answer in the client's protocol: a JSON body through `json`, a stream through
/// `events`.
pub(crate) fn reply(
    reply: ProviderReply,
    json: impl FnOnce(&Value) -> Value,
    events: impl FnOnce(EventStream) -> EventStream,
) -> Result<ProviderReply, ProviderError> {
    match reply {
        ProviderReply::Stream { status, events: e } => Ok(ProviderReply::Stream {
            status,
            events: events(e),
        }),
        ProviderReply::Json { status, body } => {
            let answer: Value =
                serde_json::from_slice(&body).map_err(|_| ProviderError::Unavailable {
                    reason: "provider answered with a body that is not JSON",
                })?;
            Ok(ProviderReply::Json {
                status,
                body: Bytes::from(json(&answer).to_string()),
            })
        }
    }
}

/// One whole provider event.
#[derive(Debug)]
pub(crate) enum Event {
    /// An event's data, parsed.
    Json(Value),
    /// `data: [DONE]`, how OpenAI-compatible streams end.
    Done,
}

/// Turns provider events into the client protocol's events.
pub(crate) trait Translate: Send + 'static {
    /// Writes what `event` becomes to `out`; an error ends the stream after `out`.
    fn event(&mut self, event: Event, out: &mut Vec<u8>) -> Result<(), ProviderError>;

    /// Writes what follows the provider's last event, when its stream ended without error;
    /// an error says the stream ended before the answer did.
    fn end(&mut self, _out: &mut Vec<u8>) -> Result<(), ProviderError> {
        Ok(())
    }
}

/// `events` translated by `translator`; see the [module docs](self).
pub(crate) fn translated<T: Translate>(events: EventStream, translator: T) -> EventStream {
    let state = Some((events, Splitter::default(), translator));
    let items = futures_util::stream::unfold(state, |state| async move {
        let (mut events, mut splitter, mut translator) = state?;
        loop {
            let mut out = Vec::new();
            match events.next().await {
                Some(Ok(data)) => {
                    let fed = splitter.feed(&data, &mut |event| translator.event(event, &mut out));
                    match fed {
                        Ok(()) if out.is_empty() => continue,
                        Ok(()) => {
                            let state = Some((events, splitter, translator));
                            return Some((vec![Ok(Bytes::from(out))], state));
                        }
                        Err(error) => return Some((sent_then(out, error), None)),
                    }
                }
                Some(Err(error)) => return Some((vec![Err(error)], None)),
                None => {
                    let items = match translator.end(&mut out) {
                        Ok(()) if out.is_empty() => return None,
                        Ok(()) => vec![Ok(Bytes::from(out))],
                        Err(error) => sent_then(out, error),
                    };
                    return Some((items, None));
                }
            }
        }
    });
    Box::pin(items.flat_map(futures_util::stream::iter))
}

/// What was written before `error`, then `error`.
fn sent_then(out: Vec<u8>, error: ProviderError) -> Vec<Result<Bytes, ProviderError>> {
    let mut items = Vec::with_capacity(2);
    if !out.is_empty() {
        items.push(Ok(Bytes::from(out)));
    }
    items.push(Err(error));
    items
}

/// A tool's `name`, `description` and schema (`schema` in, `renamed` out; an object with no
/// properties when it has none): how a function and a Messages tool hold the same thing.
pub(crate) fn tool_fields(tool: &Value, schema: &str, renamed: &str) -> Option<Value> {
    let mut out = serde_json::Map::new();
    out.insert("name".into(), tool.get("name")?.clone());
    if let Some(description) = tool.get("description") {
        out.insert("description".into(), description.clone());
    }
    let schema = tool
        .get(schema)
        .filter(|p| p.is_object())
        .cloned()
        .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
    out.insert(renamed.into(), schema);
    Some(Value::Object(out))
}

/// Refuses the first of `fields` that `json` sets (to anything but `null`, `false` or `0`):
/// each asks for what the target's API cannot do.
pub(crate) fn refuse_set(
    json: &serde_json::Map<String, Value>,
    fields: &[&'static str],
) -> Result<(), ProviderError> {
    match fields
        .iter()
        .find(|field| json.get(**field).is_some_and(is_set))
    {
        Some(field) => Err(ProviderError::untranslatable(
            *field,
            "this field cannot be sent to this model",
        )),
        None => Ok(()),
    }
}

/// Whether a field's value asks for something: not `null`, `false` or `0`.
fn is_set(value: &Value) -> bool {
    !(value.is_null() || *value == Value::Bool(false) || value.as_u64() == Some(0))
}

/// The error of a provider stream that ended cleanly before its answer did.
pub(crate) fn ended_early() -> ProviderError {
    ProviderError::Unavailable {
        reason: "provider stream ended before the answer did",
    }
}

/// Writes one server-sent event: `event: {name}` when named, then its data.
pub(crate) fn write_event(out: &mut Vec<u8>, name: Option<&str>, data: &Value) {
    if let Some(name) = name {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(name.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(data.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
}

/// Whole events out of frames.
#[derive(Default)]
struct Splitter {
    /// Bytes after the last whole event.
    unfinished: BytesMut,
    /// How much of `unfinished` is known to hold no boundary.
    scanned: usize,
}

impl Splitter {
    /// Hands each whole event `data` completes to `each`, in order.
    fn feed(
        &mut self,
        data: &[u8],
        each: &mut dyn FnMut(Event) -> Result<(), ProviderError>,
    ) -> Result<(), ProviderError> {
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
            if payload[..] == b"[DONE]"[..] {
                each(Event::Done)?;
                continue;
            }
            let event: Value =
                serde_json::from_slice(&payload).map_err(|_| ProviderError::Unavailable {
                    reason: "provider stream event is not JSON",
                })?;
            each(Event::Json(event))?;
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
}

/// A validated request of `endpoint` whose body is `body`, for the translations' tests.
#[cfg(test)]
pub(crate) fn request(
    endpoint: crate::request::Endpoint,
    body: Value,
) -> crate::request::ApiRequest {
    let Value::Object(json) = body.clone() else {
        panic!("an object")
    };
    crate::request::ApiRequest {
        endpoint,
        model: "claude-x".into(),
        stream: body["stream"] == true,
        message_count: 0,
        include_usage: false,
        max_tokens: body["max_output_tokens"]
            .as_u64()
            .or(body["max_tokens"].as_u64()),
        temperature: None,
        json: std::sync::Arc::new(json),
        raw: Bytes::from(body.to_string()),
    }
}

/// The field a translation refused, for the translations' tests.
#[cfg(test)]
pub(crate) fn refused_field<T: std::fmt::Debug>(result: Result<T, ProviderError>) -> String {
    match result {
        Err(ProviderError::Untranslatable(error)) => error.field,
        other => panic!("not refused with a field: {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(splitter: &mut Splitter, data: &[u8]) -> usize {
        let mut seen = 0;
        splitter
            .feed(data, &mut |_| {
                seen += 1;
                Ok(())
            })
            .unwrap();
        seen
    }

    #[test]
    fn a_tail_waiting_for_its_end_is_not_scanned_again() {
        let mut splitter = Splitter::default();
        assert_eq!(
            count(&mut splitter, b"data: {\"type\": \"ping\", \"pad\": \""),
            0
        );
        for _ in 0..100 {
            assert_eq!(count(&mut splitter, b"xxxxxxxxxx"), 0);
            assert_eq!(splitter.scanned, splitter.unfinished.len());
        }
        // The boundary straddles two frames.
        assert_eq!(count(&mut splitter, b"\"}\n"), 0);
        assert_eq!(count(&mut splitter, b"\ndata: {\"type\": \"ping\"}\n\n"), 2);
        assert!(splitter.unfinished.is_empty());
        assert_eq!(splitter.scanned, 0);
    }

    struct Echo;

    impl Translate for Echo {
        fn event(&mut self, event: Event, out: &mut Vec<u8>) -> Result<(), ProviderError> {
            match event {
                Event::Json(json) => write_event(out, Some("echo"), &json),
                Event::Done => out.extend_from_slice(b"done\n\n"),
            }
            Ok(())
        }

        fn end(&mut self, out: &mut Vec<u8>) -> Result<(), ProviderError> {
            out.extend_from_slice(b"end\n\n");
            Ok(())
        }
    }

    async fn run(frames: Vec<Vec<u8>>) -> Vec<Result<Bytes, ProviderError>> {
        let events: EventStream = Box::pin(futures_util::stream::iter(
            frames.into_iter().map(|f| Ok(Bytes::from(f))),
        ));
        translated(events, Echo).collect().await
    }

    #[tokio::test]
    async fn whole_events_go_out_then_the_last_word() {
        let items = run(vec![
            b"data: {\"a\"".to_vec(),
            b": 1}\n\ndata: [DONE]\n\n".to_vec(),
        ])
        .await;
        let out: Vec<Bytes> = items.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            out,
            [
                Bytes::from("event: echo\ndata: {\"a\":1}\n\ndone\n\n"),
                Bytes::from("end\n\n")
            ]
        );
    }

    #[tokio::test]
    async fn an_event_over_the_bound_ends_the_stream_after_the_whole_ones() {
        let mut frames = vec![b"data: {\"a\": 1}\n\ndata: ".to_vec()];
        frames.extend(std::iter::repeat_n(vec![b'x'; 64 * 1024], 17));
        frames.push(b"\n\n".to_vec());
        let items = run(frames).await;
        assert_eq!(items.len(), 2);
        assert!(items[0].is_ok());
        assert_eq!(
            items[1],
            Err(ProviderError::Unavailable {
                reason: ProviderError::EVENT_TOO_LONG
            })
        );
    }

    #[tokio::test]
    async fn an_event_that_is_not_json_ends_the_stream() {
        let items = run(vec![b"data: {\"a\": 1}\n\ndata: nope\n\n".to_vec()]).await;
        assert_eq!(items.len(), 2, "{items:?}");
        assert!(items[1].is_err());
    }
}
