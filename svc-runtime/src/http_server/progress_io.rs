//! A socket that must keep making progress: a write that stays blocked for the write timeout
//! fails with `TimedOut`, and, when asked, the first bytes of the connection (a handshake)
//! must arrive within a deadline from accept.
//!
//! The error ends the connection that owns the socket: hyper and h2 give up on a transport
//! that fails, so a client that stops reading loses its connection instead of holding it.
//!
//! Hand-written: hyper-timeout keeps its stream type private, and tokio-io-timeout (the same
//! idea for Tokio's traits) has no handshake deadline; neither is a dependency here.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// A stream whose writes may block at most `write_timeout` at a time, and which must read
/// its first bytes within an optional handshake deadline.
#[derive(Debug)]
pub struct ProgressIo<S> {
    inner: S,
    write_timeout: Duration,
    /// Armed while a write is blocked.
    write_stall: Pin<Box<Sleep>>,
    write_blocked: bool,
    handshake: Option<Handshake>,
}

#[derive(Debug)]
struct Handshake {
    deadline: Pin<Box<Sleep>>,
    bytes_left: usize,
}

impl<S> ProgressIo<S> {
    /// `inner`, whose writes may block at most `write_timeout` at a time.
    pub fn new(inner: S, write_timeout: Duration) -> ProgressIo<S> {
        ProgressIo {
            inner,
            write_timeout,
            write_stall: Box::pin(tokio::time::sleep_until(Instant::now())),
            write_blocked: false,
            handshake: None,
        }
    }

    /// The connection fails unless its first `bytes` bytes are read within `timeout` from now.
    pub fn handshake(mut self, bytes: usize, timeout: Duration) -> ProgressIo<S> {
        self.handshake = (bytes > 0).then(|| Handshake {
            deadline: Box::pin(tokio::time::sleep(timeout)),
            bytes_left: bytes,
        });
        self
    }

    /// The wrapped stream.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Runs a write: a blocked one arms the stall timer, a completed one disarms it, and a
    /// write still blocked when the timer fires fails.
    fn guard_write<T>(
        &mut self,
        cx: &mut Context<'_>,
        write: impl FnOnce(&mut S, &mut Context<'_>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match write(&mut self.inner, cx) {
            Poll::Ready(result) => {
                self.write_blocked = false;
                Poll::Ready(result)
            }
            Poll::Pending => {
                if !self.write_blocked {
                    self.write_blocked = true;
                    self.write_stall
                        .as_mut()
                        .reset(Instant::now() + self.write_timeout);
                }
                match self.write_stall.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the peer read nothing for the write timeout",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for ProgressIo<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let Some(handshake) = &mut this.handshake else {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        };
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        match polled {
            Poll::Ready(Ok(())) => {
                let read = buf.filled().len() - before;
                handshake.bytes_left = handshake.bytes_left.saturating_sub(read);
                if handshake.bytes_left == 0 || read == 0 {
                    this.handshake = None;
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => match handshake.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no handshake within the handshake timeout",
                ))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for ProgressIo<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut()
            .guard_write(cx, |inner, cx| Pin::new(inner).poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().guard_write(cx, |inner, cx| {
            Pin::new(inner).poll_write_vectored(cx, bufs)
        })
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut()
            .guard_write(cx, |inner, cx| Pin::new(inner).poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut()
            .guard_write(cx, |inner, cx| Pin::new(inner).poll_shutdown(cx))
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_write_the_peer_never_reads_fails_after_the_timeout() {
        let (near, _far) = tokio::io::duplex(16);
        let mut io = ProgressIo::new(near, Duration::from_secs(30));
        io.write_all(&[0; 16]).await.unwrap();
        let started = Instant::now();
        let error = io.write_all(&[0; 1]).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_that_drains_slowly_but_steadily_never_fails() {
        let (near, mut far) = tokio::io::duplex(4);
        let mut io = ProgressIo::new(near, Duration::from_secs(30));
        let reader = tokio::spawn(async move {
            let mut byte = [0u8; 1];
            for _ in 0..64 {
                tokio::time::sleep(Duration::from_secs(20)).await;
                far.read_exact(&mut byte).await.unwrap();
            }
        });
        io.write_all(&[0; 64]).await.unwrap();
        reader.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_peer_fails_the_handshake() {
        let (near, mut far) = tokio::io::duplex(64);
        let mut io =
            ProgressIo::new(near, Duration::from_secs(30)).handshake(4, Duration::from_secs(5));
        far.write_all(b"PR").await.unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(io.read(&mut buf).await.unwrap(), 2);
        let error = io.read(&mut buf).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);

        // Once the handshake is read, the connection may stay quiet.
        let (near, mut far) = tokio::io::duplex(64);
        let mut io =
            ProgressIo::new(near, Duration::from_secs(30)).handshake(4, Duration::from_secs(5));
        far.write_all(b"PRI ").await.unwrap();
        assert_eq!(io.read(&mut buf).await.unwrap(), 4);
        let quiet = tokio::time::timeout(Duration::from_secs(60), io.read(&mut buf)).await;
        assert!(
            quiet.is_err(),
            "a quiet connection failed after its handshake"
        );
    }
}
