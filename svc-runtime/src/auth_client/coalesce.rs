//! One write for what the HTTP/2 connection sends in one turn of the runtime.
//!
//! A unary gRPC call leaves the client as two frames from two tasks: HEADERS from the
//! connection task, then DATA from the task that streams the body, which the connection only
//! wakes once the stream is open. hyper's HTTP/2 connection flushes after each, so every call
//! cost two `writev`s here and, on the auth server, a read and an `epoll_wait` more when they
//! arrived apart. [`Coalesced`] holds what is written until the writer flushes twice: the first
//! flush yields once to the other ready tasks (the body's among them), the second writes
//! everything held in one call. A yield costs a poll of the connection task, not a system call.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Bytes held at most before a write goes through without waiting for a flush.
const HOLD: usize = 16 * 1024;

/// The transport under [`Coalesced`]: a TCP stream with TCP_NODELAY and keepalive, dialed as
/// tonic's own connector dials it (tonic adds TLS above it and bounds the dial).
pub(super) fn connector(
    keepalive: Option<std::time::Duration>,
) -> impl tower::Service<
    Uri,
    Response = Coalesced<TokioIo<TcpStream>>,
    Error = Box<dyn std::error::Error + Send + Sync>,
    Future = impl Send,
> + Clone
+ Send
+ 'static {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_keepalive(keepalive);
    let dial = move |uri: Uri| {
        let mut http = http.clone();
        async move {
            let stream = tower::Service::call(&mut http, uri).await?;
            Ok(Coalesced::new(stream))
        }
    };
    tower::service_fn(dial)
}

/// An I/O whose writes are held until the second flush of a turn; see the [module](self).
#[derive(Debug)]
pub(super) struct Coalesced<T> {
    inner: T,
    held: Vec<u8>,
    written: usize,
    yielded: bool,
}

impl<T> Coalesced<T> {
    fn new(inner: T) -> Coalesced<T> {
        Coalesced {
            inner,
            held: Vec::new(),
            written: 0,
            yielded: false,
        }
    }
}

impl<T: Write + Unpin> Coalesced<T> {
    /// Writes out everything held.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.held.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.held[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.held.clear();
        self.written = 0;
        Poll::Ready(Ok(()))
    }
}

impl<T: Write + Unpin> Write for Coalesced<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.held.len() >= HOLD {
            ready!(self.poll_drain(cx))?;
        }
        self.held.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.held.len() >= HOLD {
            ready!(self.poll_drain(cx))?;
        }
        let mut n = 0;
        for buf in bufs {
            self.held.extend_from_slice(buf);
            n += buf.len();
        }
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.held.is_empty() {
            return Pin::new(&mut self.inner).poll_flush(cx);
        }
        if !self.yielded {
            self.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        ready!(self.poll_drain(cx))?;
        self.yielded = false;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<T: Read + Unpin> Read for Coalesced<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: Connection> Connection for Coalesced<T> {
    fn connected(&self) -> Connected {
        self.inner.connected()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Records each write it is given as one call.
    #[derive(Default, Clone)]
    struct Calls(Arc<Mutex<Vec<Vec<u8>>>>);

    impl Write for Calls {
        fn poll_write(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.0.lock().unwrap().push(buf.to_vec());
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn what_is_written_before_the_second_flush_leaves_in_one_write() {
        let calls = Calls::default();
        let mut io = Coalesced::new(calls.clone());
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut io = Pin::new(&mut io);
        assert!(io.as_mut().poll_write(&mut cx, b"HEADERS").is_ready());
        assert!(io.as_mut().poll_flush(&mut cx).is_pending());
        assert!(calls.0.lock().unwrap().is_empty());
        let data = [io::IoSlice::new(b"DA"), io::IoSlice::new(b"TA")];
        assert!(io.as_mut().poll_write_vectored(&mut cx, &data).is_ready());
        assert!(io.as_mut().poll_flush(&mut cx).is_ready());
        assert_eq!(*calls.0.lock().unwrap(), [b"HEADERSDATA".to_vec()]);
        // Nothing held: a flush goes straight through.
        assert!(io.as_mut().poll_flush(&mut cx).is_ready());
        assert!(io.as_mut().poll_shutdown(&mut cx).is_ready());
    }
}
