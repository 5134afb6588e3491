//! One write for what the HTTP/2 connection sends in one turn of the runtime.
//!
//! A unary gRPC call leaves the client as two frames from two tasks: HEADERS from the
//! connection task, then DATA from the task that streams the body, which the connection only
//! wakes once the stream is open. hyper's HTTP/2 connection flushes after each, so every call
//! cost two `writev`s here and, on the auth server, a read and an `epoll_wait` more when they
//! arrived apart. [`Coalesced`] holds what is written until the writer flushes twice: the first
//! flush yields once to the other ready tasks (the body's among them), the second writes
//! everything held in one call. A yield costs a poll of the connection task, not a system call.
//!
//! Reads the other way: the HTTP/2 codec reads into what is left of its buffer, so about one
//! answer in fifty arrived in two reads (the buffer's last few dozen bytes, then the rest). A
//! read with less than 1 KiB of room fills a buffer of 8 KiB here instead and
//! hands out what fits, the rest on the next read without a system call.
//!
//! Both ways to the auth service run over it: tonic's channel (through [`connector`]) and
//! ValidateToken's own connection (`grpc::direct`), where `h2` writes a call's two frames in
//! one turn already and the read-ahead is what counts.

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

/// A read with less room than this is served from [`READ_AHEAD`].
const SMALL_READ: usize = 1024;

/// What one small read asks of the socket.
const READ_AHEAD: usize = 8 * 1024;

/// The transport under [`Coalesced`]: a TCP stream with TCP_NODELAY and keepalive, dialed as
/// tonic's own connector dials it (tonic adds TLS above it and bounds the dial).
pub fn connector(
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
pub struct Coalesced<T> {
    inner: T,
    held: Vec<u8>,
    written: usize,
    yielded: bool,
    /// Zeroed once, at the first read-ahead: what it holds past `filled` is stale but
    /// initialized, so a read into it need not clear it first.
    read_ahead: Vec<u8>,
    filled: usize,
    handed_out: usize,
}

impl<T> Coalesced<T> {
    /// Holds `inner`'s writes and reads ahead for it.
    pub fn new(inner: T) -> Coalesced<T> {
        Coalesced {
            inner,
            held: Vec::new(),
            written: 0,
            yielded: false,
            read_ahead: Vec::new(),
            filled: 0,
            handed_out: 0,
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
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(buf)])
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
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.handed_out == this.filled {
            if buf.remaining() >= SMALL_READ {
                return Pin::new(&mut this.inner).poll_read(cx, buf);
            }
            if this.read_ahead.is_empty() {
                this.read_ahead = vec![0; READ_AHEAD];
            }
            let mut ahead = hyper::rt::ReadBuf::new(&mut this.read_ahead);
            let read = Pin::new(&mut this.inner).poll_read(cx, ahead.unfilled());
            this.filled = ahead.filled().len();
            this.handed_out = 0;
            ready!(read)?;
        }
        let ready = &this.read_ahead[this.handed_out..this.filled];
        let n = ready.len().min(buf.remaining());
        buf.put_slice(&ready[..n]);
        this.handed_out += n;
        Poll::Ready(Ok(()))
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

    /// Hands out `chunks`, one per read, counting the reads.
    struct Chunks(Vec<Vec<u8>>, usize);

    impl Read for Chunks {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            mut buf: ReadBufCursor<'_>,
        ) -> Poll<io::Result<()>> {
            self.1 += 1;
            if !self.0.is_empty() {
                let chunk = self.0.remove(0);
                buf.put_slice(&chunk);
            }
            Poll::Ready(Ok(()))
        }
    }

    fn read(io: &mut Coalesced<Chunks>, room: usize) -> Vec<u8> {
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut bytes = vec![0; room];
        let mut buf = hyper::rt::ReadBuf::new(&mut bytes);
        assert!(Pin::new(io).poll_read(&mut cx, buf.unfilled()).is_ready());
        buf.filled().to_vec()
    }

    #[test]
    fn a_read_with_little_room_is_served_from_one_read_ahead() {
        let answer = vec![7; 204];
        let mut io = Coalesced::new(Chunks(vec![answer.clone(), vec![1; 3000]], 0));
        let mut got = read(&mut io, 44);
        got.extend(read(&mut io, 8192));
        assert_eq!(got, answer);
        assert_eq!(io.inner.1, 1, "one read of the socket");
        // Room enough: straight through.
        assert_eq!(read(&mut io, 8192).len(), 3000);
        assert_eq!(io.inner.1, 2);
        // End of stream reads as empty.
        assert!(read(&mut io, 10).is_empty());
    }

    #[test]
    fn a_shorter_read_ahead_hands_out_only_what_it_read() {
        let mut io = Coalesced::new(Chunks(vec![vec![7; 204], vec![9; 10]], 0));
        assert_eq!(read(&mut io, 44), vec![7; 44]);
        assert_eq!(read(&mut io, 500), vec![7; 160]);
        // The buffer still holds the first answer's bytes past the second's ten.
        assert_eq!(read(&mut io, 500), vec![9; 10]);
        assert_eq!(io.inner.1, 2, "one read of the socket per read-ahead");
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
