//! The limited request body, and the helpers that turn its error into a 413.

use std::error::Error;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Limited};
use pin_project_lite::pin_project;
use tower::BoxError;

use crate::error::{ApiError, ErrorCode};

// The error a `LimitedBody` yields once the body grows past the limit is http-body-util's, so
// axum's own extractors (`Bytes`, `Json`, ...) recognise it too; callers find it in an error
// chain with `is_length_limit_error`, not by its type.
use http_body_util::LengthLimitError;

pin_project! {
    /// A request body that fails with [`LengthLimitError`] once more than the limit has been
    /// read, so no reader ever buffers more than the limit.
    ///
    /// Its error is a [`BoxError`] holding either that or the inner body's error.
    #[derive(Debug)]
    pub struct LimitedBody<B> {
        #[pin]
        inner: Limited<B>,
        tripped: Arc<AtomicBool>,
    }
}

impl<B> LimitedBody<B> {
    /// Limits `body` to `max_bytes`.
    pub fn new(body: B, max_bytes: usize) -> LimitedBody<B> {
        LimitedBody::with_flag(body, max_bytes, Arc::default())
    }

    /// Limits `body`, raising `tripped` when the limit is hit so the layer can answer 413 even
    /// when the reader swallowed the error.
    pub(super) fn with_flag(body: B, max_bytes: usize, tripped: Arc<AtomicBool>) -> LimitedBody<B> {
        LimitedBody {
            inner: Limited::new(body, max_bytes),
            tripped,
        }
    }
}

impl<B> Body for LimitedBody<B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, BoxError>>> {
        let this = self.project();
        let polled = this.inner.poll_frame(cx);
        if let Poll::Ready(Some(Err(err))) = &polled
            && err.is::<LengthLimitError>()
        {
            this.tripped.store(true, Ordering::Relaxed);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// True when `err`, or any error in its `source()` chain, is a [`LengthLimitError`].
///
/// Works through the wrappers a body error usually travels in (a `BoxError`, `axum::Error`).
pub fn is_length_limit_error(err: &(dyn Error + 'static)) -> bool {
    chain_has::<LengthLimitError>(err)
}

/// True when `err`, or any error in its `source()` chain, is tower-http's body timeout: the
/// body sent nothing for the time `RequestBodyTimeoutLayer` allows.
pub fn is_body_timeout_error(err: &(dyn Error + 'static)) -> bool {
    chain_has::<tower_http::timeout::TimeoutError>(err)
}

fn chain_has<E: Error + 'static>(err: &(dyn Error + 'static)) -> bool {
    let mut current = Some(err);
    while let Some(err) = current {
        if err.is::<E>() {
            return true;
        }
        current = err.source();
    }
    false
}

/// Reads a whole body, buffering at most `max_bytes`.
///
/// Over the limit (whether this call's or a [`BodyLimit`](super::BodyLimit) layer's in front)
/// it fails with 413 `PAYLOAD_TOO_LARGE`; a body that stalls past tower-http's
/// `RequestBodyTimeoutLayer` fails with 408 `REQUEST_TIMEOUT`; a body that cannot be read (the
/// client went away mid-stream) fails with 400 `INVALID_JSON`, since what arrived is not a
/// complete document.
/// Return the error's [`into_response`](ApiError::into_response) and the envelope does the
/// rest.
pub async fn collect<B>(body: B, max_bytes: usize) -> Result<Bytes, ApiError>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    match Limited::new(body, max_bytes).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(err) if is_length_limit_error(&*err) => Err(ApiError::new(ErrorCode::PayloadTooLarge)),
        Err(err) if is_body_timeout_error(&*err) => Err(ApiError::new(ErrorCode::RequestTimeout)),
        Err(_) => Err(ApiError::new(ErrorCode::InvalidJson)
            .with_message("The request body could not be read.")),
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use futures_util::{StreamExt, stream};
    use http_body_util::{Full, StreamBody};

    use super::*;

    fn chunks(sizes: &[usize]) -> impl Body<Data = Bytes, Error = Infallible> + use<> {
        let frames: Vec<Result<Frame<Bytes>, Infallible>> = sizes
            .iter()
            .map(|&n| Ok(Frame::data(Bytes::from(vec![b'x'; n]))))
            .collect();
        StreamBody::new(stream::iter(frames))
    }

    #[tokio::test]
    async fn collect_reads_a_body_within_the_limit() {
        let bytes = collect(Full::new(Bytes::from_static(b"0123456789")), 10)
            .await
            .unwrap();
        assert_eq!(bytes, "0123456789");
    }

    #[tokio::test]
    async fn collect_refuses_a_body_over_the_limit() {
        let err = collect(chunks(&[6, 6]), 10).await.unwrap_err();
        assert_eq!(err.code(), &ErrorCode::PayloadTooLarge);
    }

    #[tokio::test]
    async fn the_limited_body_error_is_recognisable_through_wrappers() {
        let body = LimitedBody::new(chunks(&[4, 4, 4]), 10);
        let err = body.collect().await.unwrap_err();
        assert!(is_length_limit_error(&*err));

        #[derive(Debug)]
        struct Wrapper(BoxError);
        impl std::fmt::Display for Wrapper {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("wrapped")
            }
        }
        impl Error for Wrapper {
            fn source(&self) -> Option<&(dyn Error + 'static)> {
                Some(&*self.0)
            }
        }
        assert!(is_length_limit_error(&Wrapper(err)));
        assert!(!is_length_limit_error(&Wrapper("other".into())));
    }

    #[tokio::test(start_paused = true)]
    async fn collect_answers_408_for_a_body_that_stalls() {
        let stalled = StreamBody::new(
            stream::iter([Ok::<_, Infallible>(Frame::data(Bytes::from_static(
                b"{\"model\"",
            )))])
            .chain(stream::pending()),
        );
        let body =
            tower_http::timeout::TimeoutBody::new(std::time::Duration::from_secs(30), stalled);
        let err = collect(LimitedBody::new(body, 1 << 20), 1 << 20)
            .await
            .unwrap_err();
        assert_eq!(err.code(), &ErrorCode::RequestTimeout);
    }

    #[tokio::test]
    async fn collect_under_a_tighter_outer_limit_still_refuses() {
        let body = LimitedBody::new(chunks(&[8, 8]), 10);
        let err = collect(body, 1 << 20).await.unwrap_err();
        assert_eq!(err.code(), &ErrorCode::PayloadTooLarge);
    }
}
