//! The response body of a streamed completion: provider frames out as they arrive.
//!
//! [`SseBody`] yields each provider frame as its own HTTP body frame, so hyper writes (and,
//! with TCP_NODELAY, sends) it at once: nothing is buffered whole. When the provider fails
//! after the stream has started the status line is long gone, so the failure is told as the
//! final events, in the protocol of the route the client called (see [`crate::stream_error`]),
//! with the envelope's code and request id. Dropping the body (the client went away) drops the
//! provider stream and with it the upstream request.
//!
//! Only whole events go out. A frame that ends inside an event keeps its tail until the rest
//! arrives (a client cannot use half an event anyway). Were a provider cut mid-event passed
//! on, the client would read the fragment as an event of its own: the official OpenAI SDKs
//! then fail on its JSON and never reach the error event. So a failure drops the unfinished
//! tail and the error event follows whole events only.
//!
//! No event is held longer than [`MAX_EVENT_BYTES`]: an event still unfinished past it ends
//! the stream with the error event, so a provider (or a proxy on the way) cannot make the
//! gateway buffer without bound. Each frame is scanned for boundaries once.
//!
//! Events are passed through as the provider wrote them, `event:` lines included. Those that
//! report usage are read on the way (see [`crate::usage`]); the usage chunk the gateway asked
//! for on the client's behalf is dropped. The usage is reported when the stream ends, however
//! it ends.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::{HeaderValue, Response, StatusCode, header};
use http_body::{Body, Frame};

use crate::access_log::StreamOutcome;
use crate::provider::{EventStream, ProviderError};
use crate::request::Endpoint;
use crate::session::Usage;
use crate::usage::{self, Report};

/// `X-Accel-Buffering`: tells nginx-style proxies in front not to buffer the stream.
pub static X_ACCEL_BUFFERING: http::HeaderName = http::HeaderName::from_static("x-accel-buffering");

/// The longest event taken from a provider. One still unfinished past this ends the stream
/// with the error event instead of being held.
pub const MAX_EVENT_BYTES: usize = 1024 * 1024;

/// A provider event stream as an HTTP body.
pub struct SseBody {
    events: Option<EventStream>,
    request_id: String,
    docs_base: Option<Arc<str>>,
    /// The route the client called: the protocol a failure is told in.
    endpoint: Endpoint,
    /// Where a failure's code goes for the access log.
    outcome: Option<StreamOutcome>,
    /// Events passed on, counted on the Responses route only (its events are numbered).
    sent_events: u64,
    /// What came after the last event boundary: not sent yet.
    unfinished: BytesMut,
    /// Drop the chat chunk that only carries usage (the client did not ask for it).
    strip_usage_chunk: bool,
    /// The usage the stream reported so far.
    usage: Option<Usage>,
    /// The largest count of cache-served prompt tokens reported so far.
    cached_tokens: i64,
    /// Event bytes passed to the client: what a stream cut short before its usage chunk is
    /// charged by.
    sent_bytes: u64,
}

impl std::fmt::Debug for SseBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SseBody")
            .field("done", &self.events.is_none())
            .finish()
    }
}

impl SseBody {
    /// Wraps `events`; a failure is rendered with this request id and docs base.
    pub fn new(events: EventStream, request_id: String, docs_base: Option<Arc<str>>) -> SseBody {
        SseBody {
            events: Some(events),
            request_id,
            docs_base,
            endpoint: Endpoint::ChatCompletions,
            outcome: None,
            sent_events: 0,
            unfinished: BytesMut::new(),
            strip_usage_chunk: false,
            usage: None,
            cached_tokens: 0,
            sent_bytes: 0,
        }
    }

    /// Tells a failure in the protocol of `endpoint`, the route the client called (chat
    /// completions' until set).
    pub fn endpoint(mut self, endpoint: Endpoint) -> SseBody {
        self.endpoint = endpoint;
        self
    }

    /// Tells a failure's code to the access log through `outcome`.
    pub fn outcome(mut self, outcome: Option<StreamOutcome>) -> SseBody {
        self.outcome = outcome;
        self
    }

    /// With `strip`, the chat chunk that carries only usage is not passed on (the client did
    /// not ask for it; the gateway did).
    pub fn strip_usage_chunk(mut self, strip: bool) -> SseBody {
        self.strip_usage_chunk = strip;
        self
    }

    /// The usage read so far and the event bytes sent: the whole call's once the stream has
    /// ended, what a stream cut short is charged by before that.
    pub fn report(&self) -> Report {
        Report {
            usage: self.usage,
            streamed_bytes: Some(self.sent_bytes),
            cached_tokens: self.cached_tokens,
            ..Report::default()
        }
    }

    /// Reads the usage of the whole events in `data`; drops the usage-only chunk when asked.
    /// Returns `None` when nothing is left to send.
    fn observe(&mut self, data: Bytes) -> Option<Bytes> {
        if !usage::mentions_usage(&data) {
            return Some(data);
        }
        let mut kept = BytesMut::new();
        let mut dropped = false;
        for event in split_events(&data) {
            if usage::mentions_usage(event) {
                let payload = event_data(event);
                if let Some((found, cached)) = usage::from_json_with_cached(&payload) {
                    self.usage = Some(usage::merged(self.usage.take(), found));
                    self.cached_tokens = self.cached_tokens.max(cached);
                    if self.strip_usage_chunk && usage::is_usage_only_chunk(&payload) {
                        dropped = true;
                        continue;
                    }
                }
            }
            kept.extend_from_slice(event);
        }
        if !dropped {
            return Some(data);
        }
        (!kept.is_empty()).then(|| kept.freeze())
    }

    /// The streaming response: `text/event-stream`, never cached, never buffered by proxies.
    pub fn into_response(self, status: StatusCode) -> Response<SseBody> {
        let mut response = Response::new(self);
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert(X_ACCEL_BUFFERING.clone(), HeaderValue::from_static("no"));
        response
    }

    fn error_event(&self, error: &ProviderError) -> Bytes {
        let error = error.to_api_error();
        if let Some(outcome) = &self.outcome {
            outcome.failed(error.code().as_str());
        }
        crate::stream_error::events(
            self.endpoint,
            &error,
            &self.request_id,
            self.docs_base.as_deref(),
            self.sent_events,
        )
    }

    /// Counts what goes out: its bytes, and on the Responses route its events.
    fn sent(&mut self, data: Option<&Bytes>) {
        let Some(data) = data else { return };
        self.sent_bytes += data.len() as u64;
        if self.endpoint == Endpoint::Responses {
            self.sent_events += split_events(data).count() as u64;
        }
    }

    /// The whole events `data` completes, if any; keeps the rest for later.
    fn complete_events(&mut self, data: Bytes) -> Option<Bytes> {
        if self.unfinished.is_empty() && ends_on_boundary(&data) {
            // The usual case, one or more whole events per frame: sent without a copy.
            return Some(data);
        }
        // A boundary may straddle the previous tail and this frame.
        let search_from = self.unfinished.len().saturating_sub(3);
        self.unfinished.extend_from_slice(&data);
        let end = last_boundary_end(&self.unfinished[search_from..])? + search_from;
        Some(self.unfinished.split_to(end).freeze())
    }

    /// Ends the stream with the error event, after `events` (the whole events before it).
    fn fail(&mut self, events: Option<Bytes>, error: &ProviderError) -> Bytes {
        tracing::warn!(error = %error, "provider stream ended with an error");
        self.sent(events.as_ref());
        let event = self.error_event(error);
        self.events = None;
        // Give the memory back, not only the length.
        self.unfinished = BytesMut::new();
        match events.filter(|e| !e.is_empty()) {
            None => event,
            Some(events) => {
                let mut both = BytesMut::with_capacity(events.len() + event.len());
                both.extend_from_slice(&events);
                both.extend_from_slice(&event);
                both.freeze()
            }
        }
    }
}

/// The whole events of `data`, each with its blank line.
fn split_events(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = data;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = first_boundary_end(rest).unwrap_or(rest.len());
        let (event, tail) = rest.split_at(end);
        rest = tail;
        Some(event)
    })
}

/// Where the first blank line in `data` (`\n\n`, `\r\n\r\n` or `\r\r`) ends, in one pass.
pub(crate) fn first_boundary_end(data: &[u8]) -> Option<usize> {
    let mut at = 0;
    while let Some(offset) = data[at..].iter().position(|b| *b == b'\n' || *b == b'\r') {
        let i = at + offset;
        let rest = &data[i..];
        if rest.starts_with(b"\n\n") || rest.starts_with(b"\r\r") {
            return Some(i + 2);
        }
        if rest.starts_with(b"\r\n\r\n") {
            return Some(i + 4);
        }
        at = i + 1;
    }
    None
}

/// The `data:` lines of one event, joined as SSE joins them.
pub(crate) fn event_data(event: &[u8]) -> Vec<u8> {
    let mut payload = Vec::new();
    for line in event.split(|b| *b == b'\n' || *b == b'\r') {
        if let Some(value) = line.strip_prefix(b"data:") {
            if !payload.is_empty() {
                payload.push(b'\n');
            }
            payload.extend_from_slice(value.strip_prefix(b" ").unwrap_or(value));
        }
    }
    payload
}

fn ends_on_boundary(data: &[u8]) -> bool {
    data.ends_with(b"\n\n") || data.ends_with(b"\r\n\r\n") || data.ends_with(b"\r\r")
}

/// Where the last blank line (the end of an event) in `data` ends.
fn last_boundary_end(data: &[u8]) -> Option<usize> {
    let mut end = data.len();
    while let Some(i) = data[..end].iter().rposition(|b| *b == b'\n' || *b == b'\r') {
        let upto = &data[..=i];
        if upto.ends_with(b"\n\n") || upto.ends_with(b"\r\r") || upto.ends_with(b"\r\n\r\n") {
            return Some(i + 1);
        }
        end = i;
    }
    None
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        loop {
            let Some(events) = self.events.as_mut() else {
                return Poll::Ready(None);
            };
            match events.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    self.events = None;
                    // A clean end: whatever the provider sent last is passed on as it is.
                    let tail = self.unfinished.split().freeze();
                    let tail = self.observe(tail).filter(|t| !t.is_empty());
                    self.sent(tail.as_ref());
                    return Poll::Ready(tail.map(|t| Ok(Frame::data(t))));
                }
                Poll::Ready(Some(Ok(data))) => {
                    let events = self.complete_events(data).and_then(|e| self.observe(e));
                    if self.unfinished.len() > MAX_EVENT_BYTES {
                        let error = ProviderError::Unavailable {
                            reason: ProviderError::EVENT_TOO_LONG,
                        };
                        let out = self.fail(events, &error);
                        return Poll::Ready(Some(Ok(Frame::data(out))));
                    }
                    self.sent(events.as_ref());
                    if let Some(events) = events {
                        return Poll::Ready(Some(Ok(Frame::data(events))));
                    }
                }
                Poll::Ready(Some(Err(error))) => {
                    let event = self.fail(None, &error);
                    return Poll::Ready(Some(Ok(Frame::data(event))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.events.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn body(items: Vec<Result<&'static str, ProviderError>>) -> SseBody {
        let stream = futures_util::stream::iter(
            items
                .into_iter()
                .map(|i| i.map(|s: &'static str| Bytes::from_static(s.as_bytes()))),
        );
        SseBody::new(Box::pin(stream), "req-1".into(), None)
    }

    #[tokio::test]
    async fn passes_frames_through_in_order() {
        let mut b = body(vec![
            Ok("data: 1\n\n"),
            Ok("data: 2\n\n"),
            Ok("data: [DONE]\n\n"),
        ]);
        let mut frames = Vec::new();
        while let Some(frame) = b.frame().await {
            frames.push(frame.unwrap().into_data().unwrap());
        }
        assert_eq!(frames, ["data: 1\n\n", "data: 2\n\n", "data: [DONE]\n\n"]);
        assert!(b.is_end_stream());
    }

    #[tokio::test]
    async fn a_failure_ends_with_an_error_event() {
        let b = body(vec![
            Ok("data: 1\n\n"),
            Err(ProviderError::Timeout),
            Ok("data: never\n\n"),
        ]);
        let text = b.collect().await.unwrap().to_bytes();
        let text = std::str::from_utf8(&text).unwrap();
        assert!(!text.contains("never"));
        let last = text.trim_end().rsplit("\n\n").next().unwrap();
        let json: serde_json::Value =
            serde_json::from_str(last.strip_prefix("data: ").unwrap()).unwrap();
        assert_eq!(json["error"]["code"], "PROVIDER_TIMEOUT");
        assert_eq!(json["error"]["request_id"], "req-1");
    }

    #[tokio::test]
    async fn an_error_drops_the_unfinished_event() {
        let b = body(vec![
            Ok("data: {\"whole\": 1}\n\ndata: {\"par"),
            Err(ProviderError::Unavailable { reason: "x" }),
        ]);
        let text = b.collect().await.unwrap().to_bytes();
        let text = std::str::from_utf8(&text).unwrap();
        assert!(
            text.starts_with("data: {\"whole\": 1}\n\ndata: {\"error\""),
            "{text}"
        );
        assert!(!text.contains("par"), "{text}");
        for event in text.split_terminator("\n\n") {
            let json = event.strip_prefix("data: ").unwrap();
            assert!(
                serde_json::from_str::<serde_json::Value>(json).is_ok(),
                "{event}"
            );
        }
    }

    #[tokio::test]
    async fn events_split_across_frames_go_out_whole() {
        let mut b = body(vec![
            Ok("data: {\"a\""),
            Ok(": 1}\n"),
            Ok("\ndata: {\"b\": 2}\n\ndata: {"),
            Ok("\"c\": 3}\r\n\r\n"),
            Ok("data: [DONE]\n\n"),
        ]);
        let mut frames = Vec::new();
        while let Some(frame) = b.frame().await {
            frames.push(frame.unwrap().into_data().unwrap());
        }
        assert_eq!(
            frames,
            [
                "data: {\"a\": 1}\n\ndata: {\"b\": 2}\n\n",
                "data: {\"c\": 3}\r\n\r\n",
                "data: [DONE]\n\n",
            ]
        );
    }

    #[tokio::test]
    async fn an_event_over_the_bound_ends_the_stream_with_the_error_event() {
        let huge: &'static str = "x".repeat(MAX_EVENT_BYTES).leak();
        let mut b = body(vec![
            Ok("data: 1\n\ndata: "),
            Ok(huge),
            Ok("\n\ndata: never\n\n"),
        ]);
        let first = b.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(first, "data: 1\n\n");
        let last = b.frame().await.unwrap().unwrap().into_data().unwrap();
        let last = std::str::from_utf8(&last).unwrap();
        assert!(last.starts_with("data: {\"error\""), "{}", &last[..40]);
        assert!(!last.contains("xxx"));
        assert!(b.frame().await.is_none());
        assert_eq!(b.unfinished.capacity(), 0);
    }

    /// The events of `text`: each one's name (if any) and its data.
    fn named_events(text: &[u8]) -> Vec<(Option<&str>, &str)> {
        std::str::from_utf8(text)
            .unwrap()
            .split_terminator("\n\n")
            .map(|event| {
                let name = event.lines().find_map(|l| l.strip_prefix("event: "));
                let data = event.lines().find_map(|l| l.strip_prefix("data: "));
                (name, data.unwrap_or_default())
            })
            .collect()
    }

    #[tokio::test]
    async fn a_messages_stream_fails_with_anthropics_error_event() {
        let b = body(vec![
            Ok("event: message_start\ndata: {\"type\": \"message_start\"}\n\nevent: ping\nda"),
            Err(ProviderError::Timeout),
        ])
        .endpoint(Endpoint::Messages);
        let text = b.collect().await.unwrap().to_bytes();
        let events = named_events(&text);
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(events[0].0, Some("message_start"));
        assert_eq!(events[1].0, Some("error"));
        let error: serde_json::Value = serde_json::from_str(events[1].1).unwrap();
        assert_eq!(error["type"], "error");
        assert_eq!(error["error"]["type"], "timeout_error");
        assert_eq!(error["error"]["code"], "PROVIDER_TIMEOUT");
        assert_eq!(error["request_id"], "req-1");
    }

    #[tokio::test]
    async fn a_responses_stream_fails_with_response_failed_numbered_after_what_was_sent() {
        let huge: &'static str = "x".repeat(MAX_EVENT_BYTES).leak();
        let b = body(vec![
            Ok("event: response.created\ndata: {\"sequence_number\": 0}\n\n"),
            Ok("event: response.in_progress\ndata: {\"sequence_number\": 1}\n\ndata: "),
            Ok(huge),
        ])
        .endpoint(Endpoint::Responses);
        let text = b.collect().await.unwrap().to_bytes();
        let events = named_events(&text);
        let names: Vec<_> = events.iter().map(|e| e.0).collect();
        assert_eq!(
            names,
            [
                Some("response.created"),
                Some("response.in_progress"),
                Some("response.failed"),
                Some("error")
            ]
        );
        let failed: serde_json::Value = serde_json::from_str(events[2].1).unwrap();
        assert_eq!(failed["sequence_number"], 2);
        assert_eq!(failed["response"]["error"]["code"], "PROVIDER_UNAVAILABLE");
        let error: serde_json::Value = serde_json::from_str(events[3].1).unwrap();
        assert_eq!(error["sequence_number"], 3);
        assert_eq!(error["code"], "PROVIDER_UNAVAILABLE");
        assert_eq!(error["error"]["request_id"], "req-1");
    }

    #[test]
    fn boundaries_are_found_in_one_pass() {
        for (data, end) in [
            (&b"data: 1\n\n"[..], Some(9)),
            (b"a\r\n\r\nb", Some(5)),
            (b"a\r\rb", Some(3)),
            (b"a\r\n\nb", Some(4)),
            (b"a\r\nb\n", None),
            (b"", None),
        ] {
            assert_eq!(first_boundary_end(data), end, "{data:?}");
        }
    }

    #[tokio::test]
    async fn a_clean_end_passes_the_last_bytes_on() {
        let b = body(vec![Ok("data: 1\n\n"), Ok("data: [DONE]")]);
        let text = b.collect().await.unwrap().to_bytes();
        assert_eq!(text, "data: 1\n\ndata: [DONE]");
    }

    #[test]
    fn streaming_headers() {
        let response = body(vec![]).into_response(StatusCode::OK);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/event-stream"
        );
        assert_eq!(response.headers()[header::CACHE_CONTROL], "no-cache");
        assert_eq!(response.headers()["x-accel-buffering"], "no");
    }
}
