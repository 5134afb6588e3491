//! Which of a connection's streams wait on the client, and since when: a response whose frame
//! hyper took and has not come back for (an HTTP/2 stream the client grants no window, an
//! HTTP/1 client that stopped reading), or a request body the server is reading and the client
//! is not sending.
//!
//! A stream waiting on its own source (an SSE stream between events, a handler at work) is not
//! stalled: the server is waiting, not the client. The connection that owns a [`Stalls`]
//! closes itself once [`Stalls::stalled`] completes.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use svc_runtime::http_server::stalls::Stalls;
//!
//! let stalls = Arc::new(Stalls::new());
//! // A response hyper has not taken yet waits on the client from now.
//! let body = stalls.response(http_body_util::Empty::<bytes::Bytes>::new());
//! assert!(stalls.oldest().is_some());
//! drop(body);
//! assert!(stalls.oldest().is_none());
//! # }
//! ```

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use http_body::{Body, Frame, SizeHint};
use tokio::time::Instant;

/// The streams of one connection, each stamped with when it started waiting on the client.
///
/// Stamps are atomics the bodies write on every frame; the connection reads them only when
/// its check timer fires, so a busy stream costs no wake-ups.
#[derive(Debug)]
pub struct Stalls {
    epoch: Instant,
    slots: Mutex<Vec<Arc<AtomicU64>>>,
}

impl Default for Stalls {
    fn default() -> Stalls {
        Stalls::new()
    }
}

impl Stalls {
    /// No streams yet.
    pub fn new() -> Stalls {
        Stalls {
            epoch: Instant::now(),
            slots: Mutex::new(Vec::new()),
        }
    }

    /// A response body that waits on the client from now until hyper first asks for a frame,
    /// and after each frame until hyper comes back for the next.
    pub fn response<B>(self: &Arc<Self>, body: B) -> Progress<B> {
        self.response_holding(body, ())
    }

    /// [`Stalls::response`], holding `held` (a guard, say) until the body is dropped.
    pub fn response_holding<B, H>(self: &Arc<Self>, body: B, held: H) -> Progress<B, H> {
        let slot = self.register(self.stamp());
        Progress {
            inner: body,
            slot,
            side: Side::Response,
            _held: held,
        }
    }

    /// A request body that waits on the client while the server's read of it is pending.
    pub fn request<B>(self: &Arc<Self>, body: B) -> Progress<B> {
        let slot = self.register(0);
        Progress {
            inner: body,
            slot,
            side: Side::Request,
            _held: (),
        }
    }

    /// Since when the longest-waiting stream has waited on the client.
    pub fn oldest(&self) -> Option<Instant> {
        let oldest = self
            .lock()
            .iter()
            .map(|stamp| stamp.load(Ordering::Relaxed))
            .filter(|&stamp| stamp > 0)
            .min()?;
        Some(self.epoch + Duration::from_millis(oldest - 1))
    }

    /// Completes once a stream has waited `timeout` on the client.
    pub async fn stalled(&self, timeout: Duration) {
        loop {
            let now = Instant::now();
            let check = match self.oldest() {
                Some(since) if now >= since + timeout => return,
                Some(since) => since + timeout,
                // A stream that starts waiting after now is due no earlier than this.
                None => now + timeout,
            };
            tokio::time::sleep_until(check).await;
        }
    }

    /// Milliseconds since the epoch, plus one so that 0 means "not waiting".
    fn stamp(&self) -> u64 {
        let millis = self.epoch.elapsed().as_millis();
        u64::try_from(millis).unwrap_or(u64::MAX - 1) + 1
    }

    fn register(self: &Arc<Self>, stamp: u64) -> Slot {
        let waiting = Arc::new(AtomicU64::new(stamp));
        self.lock().push(waiting.clone());
        Slot {
            stalls: self.clone(),
            waiting,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<AtomicU64>>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A stream's place in [`Stalls`], given back on drop.
#[derive(Debug)]
struct Slot {
    stalls: Arc<Stalls>,
    waiting: Arc<AtomicU64>,
}

impl Slot {
    fn wait(&self) {
        self.waiting.store(self.stalls.stamp(), Ordering::Relaxed);
    }

    fn clear(&self) {
        self.waiting.store(0, Ordering::Relaxed);
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.stalls
            .lock()
            .retain(|other| !Arc::ptr_eq(other, &self.waiting));
    }
}

#[derive(Debug, Clone, Copy)]
enum Side {
    Request,
    Response,
}

pin_project_lite::pin_project! {
    /// A body that stamps its stream in [`Stalls`] whenever it waits on the client.
    #[derive(Debug)]
    pub struct Progress<B, H = ()> {
        #[pin]
        inner: B,
        slot: Slot,
        side: Side,
        _held: H,
    }
}

impl<B: Body, H> Body for Progress<B, H> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.project();
        // Whatever happens next, the server is not waiting on the client now.
        this.slot.clear();
        let polled = this.inner.poll_frame(cx);
        match (*this.side, &polled) {
            // Hyper has the frame: until it comes back, it is the client's window it waits on.
            (Side::Response, Poll::Ready(Some(Ok(_)))) => this.slot.wait(),
            // The server reads and the client sends nothing.
            (Side::Request, Poll::Pending) => this.slot.wait(),
            _ => {}
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
