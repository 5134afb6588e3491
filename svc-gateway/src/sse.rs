//! The response body of a streamed completion: provider frames out as they arrive.
//!
//! [`SseBody`] yields each provider frame as its own HTTP body frame, so hyper writes (and,
//! with TCP_NODELAY, sends) it at once: nothing is buffered whole. When the provider fails
//! after the stream has started the status line is long gone, so the failure is told as a
//! final event, `data: {"error": {...}}`, in the envelope's shape. Dropping the body (the
//! client went away) drops the provider stream and with it the upstream request.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body::{Body, Frame};

use crate::provider::{EventStream, ProviderError};

/// `X-Accel-Buffering`: tells nginx-style proxies in front not to buffer the stream.
pub static X_ACCEL_BUFFERING: http::HeaderName = http::HeaderName::from_static("x-accel-buffering");

/// A provider event stream as an HTTP body.
pub struct SseBody {
    events: Option<EventStream>,
    request_id: String,
    docs_base: Option<Arc<str>>,
    /// True when everything sent so far ends on an event boundary.
    at_boundary: bool,
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
            at_boundary: true,
        }
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
        let envelope = error
            .to_api_error()
            .envelope(&self.request_id, self.docs_base.as_deref());
        // A frame cut mid-event would swallow the error line; a blank line closes it first.
        let prefix: &[u8] = if self.at_boundary { b"" } else { b"\n\n" };
        let mut event = Vec::with_capacity(prefix.len() + envelope.len() + 8);
        event.extend_from_slice(prefix);
        event.extend_from_slice(b"data: ");
        event.extend_from_slice(&envelope);
        event.extend_from_slice(b"\n\n");
        Bytes::from(event)
    }
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let Some(events) = self.events.as_mut() else {
            return Poll::Ready(None);
        };
        match events.as_mut().poll_next(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                self.events = None;
                Poll::Ready(None)
            }
            Poll::Ready(Some(Ok(data))) => {
                self.at_boundary = data.ends_with(b"\n\n") || data.ends_with(b"\r\n\r\n");
                Poll::Ready(Some(Ok(Frame::data(data))))
            }
            Poll::Ready(Some(Err(error))) => {
                tracing::warn!(error = %error, "provider stream ended with an error");
                let event = self.error_event(&error);
                self.events = None;
                Poll::Ready(Some(Ok(Frame::data(event))))
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
    async fn an_error_after_a_partial_event_starts_a_new_one() {
        let b = body(vec![
            Ok("data: {\"par"),
            Err(ProviderError::Unavailable { reason: "x" }),
        ]);
        let text = b.collect().await.unwrap().to_bytes();
        assert!(text.starts_with(b"data: {\"par\n\ndata: {\"error\""));
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
