//! Streams at the shutdown deadline: a stream still open when the grace period ends gets the
//! final error event every failed stream gets (`PROVIDER_UNAVAILABLE` in the envelope's
//! shape), instead of a connection cut mid-event.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::Stream;
use svc_runtime::shutdown::{Drain, Phase};

use crate::provider::{EventStream, ProviderError};

/// The reason logged for a stream ended by the deadline.
pub const SHUTTING_DOWN: &str = "gateway shutting down";

/// `events`, ended with [`SHUTTING_DOWN`] when `drain` reaches its deadline.
pub fn until_deadline(events: EventStream, drain: &Drain) -> EventStream {
    Box::pin(UntilDeadline {
        events: Some(events),
        deadline: Box::pin(drain.reached(Phase::Deadline)),
    })
}

struct UntilDeadline {
    events: Option<EventStream>,
    deadline: Pin<Box<dyn Future<Output = ()> + Send>>,
}

impl Stream for UntilDeadline {
    type Item = Result<Bytes, ProviderError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let Some(events) = this.events.as_mut() else {
            return Poll::Ready(None);
        };
        if this.deadline.as_mut().poll(cx).is_ready() {
            this.events = None;
            let reason = SHUTTING_DOWN;
            return Poll::Ready(Some(Err(ProviderError::Unavailable { reason })));
        }
        let next = events.as_mut().poll_next(cx);
        if let Poll::Ready(None) = next {
            this.events = None;
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;

    use super::*;

    #[tokio::test]
    async fn the_deadline_ends_a_stream_with_an_error() {
        let drain = Drain::new();
        let pending: EventStream = Box::pin(
            futures_util::stream::iter([Ok(Bytes::from_static(b"data: 1\n\n"))])
                .chain(futures_util::stream::pending()),
        );
        let mut events = until_deadline(pending, &drain);
        assert!(matches!(events.next().await, Some(Ok(_))));
        drain.start();
        drain.reach_deadline();
        assert!(matches!(
            events.next().await,
            Some(Err(ProviderError::Unavailable {
                reason: SHUTTING_DOWN
            }))
        ));
        assert!(events.next().await.is_none());
    }
}
