//! Server-sent events passed through one at a time, each event's data offered to a function
//! that may replace it: how a streamed `tools/list` answer is filtered and a streamed
//! `tools/call` outcome is read, while notifications and progress events flow on in order.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_util::Stream;

/// Offered each event's data (its `data:` lines joined); `Some` replaces it.
pub trait OnEvent: Send + 'static {
    /// What to send instead of `data`, if anything.
    fn on_data(&mut self, data: &str) -> Option<String>;
}

pin_project_lite::pin_project! {
    /// The events of `inner`, rewritten by an [`OnEvent`].
    pub struct Events<S, F> {
        #[pin]
        inner: S,
        on_event: F,
        buffer: BytesMut,
        done: bool,
    }
}

impl<S, F> Events<S, F> {
    /// Rewrites the events of `inner` with `on_event`.
    pub fn new(inner: S, on_event: F) -> Events<S, F> {
        Events {
            inner,
            on_event,
            buffer: BytesMut::new(),
            done: false,
        }
    }
}

/// The end of the first whole event in `buffer` and where the next one starts.
fn boundary(buffer: &[u8]) -> Option<(usize, usize)> {
    let find = |needle: &[u8]| buffer.windows(needle.len()).position(|w| w == needle);
    match (find(b"\n\n"), find(b"\r\n\r\n")) {
        (Some(lf), Some(crlf)) if crlf < lf => Some((crlf, crlf + 4)),
        (Some(lf), _) => Some((lf, lf + 2)),
        (None, Some(crlf)) => Some((crlf, crlf + 4)),
        (None, None) => None,
    }
}

/// One whole event (with its separator), passed through `on_event`.
fn rewrite<F: OnEvent>(event: Bytes, end: usize, on_event: &mut F) -> Bytes {
    let Ok(text) = std::str::from_utf8(&event[..end]) else {
        return event;
    };
    let lines: Vec<&str> = text.split('\n').map(|l| l.trim_end_matches('\r')).collect();
    let data: Vec<&str> = lines
        .iter()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|d| d.strip_prefix(' ').unwrap_or(d))
        .collect();
    if data.is_empty() {
        return event;
    }
    let Some(replaced) = on_event.on_data(&data.join("\n")) else {
        return event;
    };
    let mut out = String::with_capacity(replaced.len() + 64);
    for line in lines.iter().filter(|line| !line.starts_with("data:")) {
        out.push_str(line);
        out.push('\n');
    }
    for line in replaced.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
}

impl<S, E, F> Stream for Events<S, F>
where
    S: Stream<Item = Result<Bytes, E>>,
    F: OnEvent,
{
    type Item = Result<Bytes, E>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        loop {
            if let Some((end, next)) = boundary(this.buffer) {
                let event = this.buffer.split_to(next).freeze();
                return Poll::Ready(Some(Ok(rewrite(event, end, this.on_event))));
            }
            if *this.done {
                if this.buffer.is_empty() {
                    return Poll::Ready(None);
                }
                // A last event without its blank line: offered like any other.
                let end = this.buffer.len();
                let event = this.buffer.split().freeze();
                return Poll::Ready(Some(Ok(rewrite(event, end, this.on_event))));
            }
            match this.inner.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(chunk))) => this.buffer.extend_from_slice(&chunk),
                Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error))),
                Poll::Ready(None) => *this.done = true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    struct Upper;

    impl OnEvent for Upper {
        fn on_data(&mut self, data: &str) -> Option<String> {
            data.starts_with('x').then(|| data.to_uppercase())
        }
    }

    #[tokio::test]
    async fn events_split_across_chunks_are_rewritten_in_order() {
        let chunks = [
            "event: message\r\ndata: xa\r\n\r\nda",
            "ta: keep\n\nid: 3\ndata: xb\n\n",
            "data: tail",
        ]
        .map(|c| Ok::<_, std::convert::Infallible>(Bytes::from(c)));
        let out: Vec<_> = Events::new(futures_util::stream::iter(chunks), Upper)
            .map(|chunk| String::from_utf8(chunk.unwrap().to_vec()).unwrap())
            .collect()
            .await;
        assert_eq!(
            out,
            [
                "event: message\ndata: XA\n\n",
                "data: keep\n\n",
                "id: 3\ndata: XB\n\n",
                "data: tail",
            ]
        );
    }
}
