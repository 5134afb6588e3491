//! The response body of the layers that answer on their own.
//!
//! [`ResponseBody`] is either the inner service's body, untouched, or a body the layer wrote
//! itself: the empty placeholder of a rejection, or the envelope
//! [`ErrorEnvelope`](crate::envelope::ErrorEnvelope) renders in its place. It is an enum, not a
//! boxed body, so forwarding costs nothing on the hot path.
//!
//! ```
//! use bytes::Bytes;
//! use http_body::Body as _;
//! use http_body_util::{BodyExt, Full};
//! use svc_tower::body::ResponseBody;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let inner: ResponseBody<Full<Bytes>> = ResponseBody::inner(Full::from("hello"));
//! assert_eq!(inner.size_hint().exact(), Some(5));
//! let bytes = inner.collect().await.unwrap().to_bytes();
//! assert_eq!(bytes, "hello");
//! assert!(ResponseBody::<Full<Bytes>>::empty().is_end_stream());
//! # }
//! ```

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use pin_project_lite::pin_project;

pin_project! {
    /// The inner service's body, or one written by the layer (see the [module docs](self)).
    #[derive(Debug)]
    pub struct ResponseBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project! {
    #[project = KindProj]
    #[derive(Debug)]
    enum Kind<B> {
        Own { #[pin] body: Full<Bytes> },
        Inner { #[pin] body: B },
    }
}

impl<B> ResponseBody<B> {
    /// The inner service's body, forwarded as is.
    pub fn inner(body: B) -> ResponseBody<B> {
        ResponseBody {
            kind: Kind::Inner { body },
        }
    }

    /// An empty body: the placeholder of a rejection, replaced when the envelope is rendered.
    pub fn empty() -> ResponseBody<B> {
        ResponseBody::full(Bytes::new())
    }

    /// A body the layer wrote in full.
    pub fn full(bytes: Bytes) -> ResponseBody<B> {
        ResponseBody {
            kind: Kind::Own {
                body: Full::new(bytes),
            },
        }
    }
}

impl<B> Default for ResponseBody<B> {
    fn default() -> ResponseBody<B> {
        ResponseBody::empty()
    }
}

impl<B> Body for ResponseBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project().kind.project() {
            KindProj::Own { body } => body.poll_frame(cx).map_err(|never| match never {}),
            KindProj::Inner { body } => body.poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Own { body } => body.is_end_stream(),
            Kind::Inner { body } => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Own { body } => body.size_hint(),
            Kind::Inner { body } => body.size_hint(),
        }
    }
}
