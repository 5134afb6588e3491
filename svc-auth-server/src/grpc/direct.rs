//! ValidateToken answered in front of tonic's router and codec.
//!
//! Every protected request through a gateway makes this call, and at one connection the
//! request waits for it. Through tonic's routes a call passes axum's router, the generated
//! service's dispatch, the interceptor, tonic's streaming decoder and its encoding body: about
//! 8,000 instructions a call (of 107,000 in the auth server) more than here. Here the request's
//! one DATA frame is decoded where it arrives, the handler is called as tonic calls it, and the
//! answer is one DATA frame and its trailers, as tonic writes them.
//!
//! Only the plain call takes this path: no `grpc-encoding`, one uncompressed message within
//! tonic's 4 MiB limit in the first DATA frame, nothing after it. Anything else goes to tonic
//! with the frames already read handed back in front of the rest, so its answers (a
//! compressed message, a split one, one too large or not protobuf) are tonic's own. The
//! layers around the routes (tonic's deadline, the stall watch, error reports) wrap this one.

use std::collections::VecDeque;
use std::future::{poll_fn, ready};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures_util::future::{BoxFuture, Either};
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body::{Body as _, Frame};
use http_body_util::{BodyExt, Full};
use prometheus_client::metrics::counter::Counter;
use prost::Message;
use svc_proto::v1::ValidateTokenRequest;
use svc_proto::v1::auth_service_server::AuthService;
use tonic::Status;
use tonic::body::Body;
use tower::{Layer, Service};

/// The path this layer answers.
const PATH: &str = "/svc.auth.v1.AuthService/ValidateToken";
/// tonic's default limit on a decoded message.
const MAX_MESSAGE: usize = 4 * 1024 * 1024;
/// A gRPC message's prefix: the compressed flag and the length.
const PREFIX: usize = 5;

/// Answers ValidateToken with `api` in front of the routes it wraps.
#[derive(Debug)]
pub struct DirectValidateLayer<A> {
    api: Arc<A>,
    requests: Counter,
}

impl<A> Clone for DirectValidateLayer<A> {
    fn clone(&self) -> DirectValidateLayer<A> {
        DirectValidateLayer {
            api: self.api.clone(),
            requests: self.requests.clone(),
        }
    }
}

impl<A> DirectValidateLayer<A> {
    /// `requests` counts the calls answered here, as the routes' interceptor counts the rest.
    pub fn new(api: Arc<A>, requests: Counter) -> DirectValidateLayer<A> {
        DirectValidateLayer { api, requests }
    }
}

impl<A, S> Layer<S> for DirectValidateLayer<A> {
    type Service = DirectValidate<A, S>;

    fn layer(&self, inner: S) -> DirectValidate<A, S> {
        DirectValidate {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`DirectValidateLayer`] makes.
#[derive(Debug)]
pub struct DirectValidate<A, S> {
    inner: S,
    layer: DirectValidateLayer<A>,
}

impl<A, S: Clone> Clone for DirectValidate<A, S> {
    fn clone(&self) -> DirectValidate<A, S> {
        DirectValidate {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
        }
    }
}

impl<A, S> Service<Request<Body>> for DirectValidate<A, S>
where
    A: AuthService,
    S: Service<Request<Body>, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Either<S::Future, BoxFuture<'static, Result<Response<Body>, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        if !plain_validate(&request) {
            return Either::Left(self.inner.call(request));
        }
        // The clone takes the readied service's place; the readied one answers this call.
        let ready = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, ready);
        let layer = self.layer.clone();
        Either::Right(Box::pin(async move {
            let (parts, body) = request.into_parts();
            let message = match read_message(body).await {
                Read::Message(message) => message,
                Read::Other(replay) => {
                    return inner.call(Request::from_parts(parts, replay)).await;
                }
            };
            layer.requests.inc();
            let call = tonic::Request::from_http(Request::from_parts(parts, message));
            Ok(match layer.api.validate_token(call).await {
                Ok(answer) => answered(answer),
                Err(status) => status.into_http(),
            })
        }))
    }
}

/// ValidateToken with no message encoding named.
fn plain_validate(request: &Request<Body>) -> bool {
    request.uri().path() == PATH
        && request
            .headers()
            .get("grpc-encoding")
            .is_none_or(|encoding| encoding == "identity")
}

enum Read {
    /// The call's one message, and the body ended after it.
    Message(ValidateTokenRequest),
    /// Anything else: the body with what was read put back in front.
    Other(Body),
}

/// Reads the first frame, and the next when the first is one whole message.
async fn read_message(mut body: Body) -> Read {
    let mut read = VecDeque::with_capacity(2);
    let first = match next_frame(&mut body).await {
        Some(Ok(frame)) => frame,
        Some(Err(status)) => return Read::Other(Replay::body(read, Err(status), body)),
        None => return Read::Other(Replay::body(read, Ok(()), body)),
    };
    let message = first.data_ref().and_then(whole_message);
    read.push_back(first);
    let Some(message) = message else {
        return Read::Other(Replay::body(read, Ok(()), body));
    };
    if body.is_end_stream() {
        return Read::Message(message);
    }
    match next_frame(&mut body).await {
        None => Read::Message(message),
        Some(Ok(frame)) => {
            read.push_back(frame);
            Read::Other(Replay::body(read, Ok(()), body))
        }
        Some(Err(status)) => Read::Other(Replay::body(read, Err(status), body)),
    }
}

async fn next_frame(body: &mut Body) -> Option<Result<Frame<Bytes>, Status>> {
    poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await
}

/// `data` as exactly one uncompressed message within the limit, decoded.
fn whole_message(data: &Bytes) -> Option<ValidateTokenRequest> {
    let mut prefix = data.get(..PREFIX)?;
    let compressed = prefix.get_u8();
    let length = usize::try_from(prefix.get_u32()).ok()?;
    if compressed != 0 || length > MAX_MESSAGE || data.len() != PREFIX + length {
        return None;
    }
    ValidateTokenRequest::decode(data.slice(PREFIX..)).ok()
}

/// The answer as tonic's unary path writes it: the handler's metadata and the content type,
/// one DATA frame, and `grpc-status: 0` in the trailers.
fn answered<M: Message>(answer: tonic::Response<M>) -> Response<Body> {
    let (metadata, message, extensions) = answer.into_parts();
    let length = message.encoded_len();
    let mut frame = BytesMut::with_capacity(PREFIX + length);
    frame.put_u8(0);
    // A ValidateToken answer is a few hundred bytes; a length past u32 cannot be framed.
    frame.put_u32(u32::try_from(length).unwrap_or(u32::MAX));
    message.encode_raw(&mut frame);
    let mut trailers = HeaderMap::with_capacity(1);
    if let Err(status) = Status::ok("").add_header(&mut trailers) {
        return status.into_http();
    }
    let body = Full::new(frame.freeze()).with_trailers(ready(Some(Ok(trailers))));
    let mut response = Response::new(Body::new(body));
    *response.headers_mut() = metadata.into_headers();
    *response.extensions_mut() = extensions;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    response
}

/// A request body with the frames already read (and an error met reading them) in front.
struct Replay {
    read: VecDeque<Frame<Bytes>>,
    error: Option<Status>,
    rest: Body,
}

impl Replay {
    fn body(read: VecDeque<Frame<Bytes>>, met: Result<(), Status>, rest: Body) -> Body {
        Body::new(Replay {
            read,
            error: met.err(),
            rest,
        })
    }
}

impl http_body::Body for Replay {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if let Some(frame) = self.read.pop_front() {
            return Poll::Ready(Some(Ok(frame)));
        }
        if let Some(status) = self.error.take() {
            return Poll::Ready(Some(Err(status)));
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.read.is_empty() && self.error.is_none() && self.rest.is_end_stream()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(flag: u8, message: &[u8]) -> Bytes {
        let mut frame = vec![flag];
        frame.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
        frame.extend_from_slice(message);
        Bytes::from(frame)
    }

    fn request(token: &str) -> Vec<u8> {
        ValidateTokenRequest {
            access_token: token.to_owned(),
            agent_id: None,
        }
        .encode_to_vec()
    }

    #[test]
    fn only_one_whole_uncompressed_message_is_taken() {
        let message = request("svc_pat_x");
        let taken = whole_message(&framed(0, &message)).unwrap();
        assert_eq!(taken.access_token, "svc_pat_x");
        assert!(whole_message(&framed(1, &message)).is_none(), "compressed");
        let whole = framed(0, &message);
        assert!(
            whole_message(&whole.slice(..whole.len() - 1)).is_none(),
            "short"
        );
        let mut two = whole.to_vec();
        two.extend_from_slice(&whole);
        assert!(whole_message(&Bytes::from(two)).is_none(), "two messages");
        assert!(whole_message(&whole.slice(..3)).is_none(), "no prefix");
        assert!(
            whole_message(&framed(0, &[0xff, 0xff])).is_none(),
            "not protobuf"
        );
        let mut too_long = vec![0u8];
        too_long.extend_from_slice(&u32::try_from(MAX_MESSAGE + 1).unwrap().to_be_bytes());
        assert!(
            whole_message(&Bytes::from(too_long)).is_none(),
            "over the limit"
        );
    }

    #[test]
    fn an_encoding_other_than_identity_goes_to_tonic() {
        let call = |encoding: Option<&'static str>| {
            let mut request = Request::post(PATH);
            if let Some(encoding) = encoding {
                request = request.header("grpc-encoding", encoding);
            }
            plain_validate(&request.body(Body::default()).unwrap())
        };
        assert!(call(None));
        assert!(call(Some("identity")));
        assert!(!call(Some("gzip")));
        let other = Request::post("/svc.auth.v1.AuthService/ValidateAgent")
            .body(Body::default())
            .unwrap();
        assert!(!plain_validate(&other));
    }

    #[tokio::test]
    async fn what_was_read_is_handed_back_in_order() {
        let message = framed(0, &request("svc_pat_x"));
        let split = futures_util::stream::iter([
            Ok::<_, Status>(Frame::data(message.slice(..4))),
            Ok(Frame::data(message.slice(4..))),
        ]);
        let body = Body::new(http_body_util::StreamBody::new(split));
        let Read::Other(mut replay) = read_message(body).await else {
            panic!("a split message is tonic's");
        };
        let mut got = Vec::new();
        while let Some(frame) = next_frame(&mut replay).await {
            got.extend_from_slice(&frame.unwrap().into_data().unwrap());
        }
        assert_eq!(got, message);

        let whole = Body::new(http_body_util::Full::new(message.clone()));
        assert!(matches!(read_message(whole).await, Read::Message(_)));
    }
}
