//! ValidateToken over an HTTP/2 connection of its own, straight on `h2`.
//!
//! Every protected request makes this call, and at one connection the request waits for it.
//! Through tonic's channel a call passes a buffer task, the reconnecting service, hyper's
//! client dispatch and body pump, and tonic's streaming codec before `h2` sees it: about 25,000
//! instructions a call more than `h2` alone, which the gateway, sharing its CPU with the rest of
//! the chain, runs on cold caches. Here the request is one HEADERS and one DATA frame handed to
//! `h2` in the caller's task, and the answer is read as one message and its trailers.
//!
//! What the channel did besides, this keeps: TCP_NODELAY, the connect timeout, TCP keepalive,
//! HTTP/2 keepalive pings (idle too), and a new connection when the last one is gone (the call
//! that finds it gone dials, the calls behind it wait for that dial). The answer's status is
//! read by tonic ([`Status::from_header_map`]), so the details the mapping depends on (the
//! `ErrorInfo` of `COLD_SHARE_SPENT`) arrive as through the channel. Over TLS (rustls, the
//! `grpc-tls` feature) as over plaintext; several addresses stay on the channel.

use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::header::{CONTENT_TYPE, TE, USER_AGENT};
use http::{HeaderValue, Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use prost::Message;
use svc_proto::v1::{ValidateTokenRequest, ValidateTokenResponse};
use tokio::net::TcpStream;
use tonic::{Code, Status};

use super::coalesce::Coalesced;
use super::{DEFAULT_CONNECT_TIMEOUT, KEEPALIVE_INTERVAL, KEEPALIVE_TIMEOUT, TCP_KEEPALIVE};

/// The largest answer read, as tonic's default decoding limit.
const MAX_MESSAGE: usize = 4 * 1024 * 1024;

/// The receive windows hyper's HTTP/2 client (so tonic's channel) opens with.
const STREAM_WINDOW: u32 = 2 * 1024 * 1024;
const CONNECTION_WINDOW: u32 = 5 * 1024 * 1024;

const PATH: &str = "/svc.auth.v1.AuthService/ValidateToken";

const CLIENT: &str = concat!("svc-tower/", env!("CARGO_PKG_VERSION"));

/// The connection ValidateToken calls share; cheap to clone.
#[derive(Clone)]
pub(super) struct DirectCalls {
    inner: Arc<Inner>,
}

struct Inner {
    addr: SocketAddr,
    tls: Option<TokenTls>,
    uri: Uri,
    /// The live connection's handle; `None` before the first call and after one is found gone.
    sender: Mutex<Option<h2::client::SendRequest<Bytes>>>,
    /// Held while dialing, so calls that find the connection gone at once dial it once.
    dialing: tokio::sync::Mutex<()>,
}

impl fmt::Debug for DirectCalls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DirectCalls")
            .field("addr", &self.inner.addr)
            .finish_non_exhaustive()
    }
}

impl DirectCalls {
    /// Calls to `addr`, over TLS when `tls` is set; not yet connected.
    pub(super) fn new(addr: SocketAddr, tls: Option<TokenTls>) -> DirectCalls {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let uri = Uri::builder()
            .scheme(scheme)
            .authority(addr.to_string())
            .path_and_query(PATH)
            .build()
            .unwrap_or_else(|_| Uri::from_static(PATH));
        DirectCalls {
            inner: Arc::new(Inner {
                addr,
                tls,
                uri,
                sender: Mutex::new(None),
                dialing: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// One ValidateToken call, `timeout` sent as `grpc-timeout` (the caller enforces it).
    pub(super) async fn validate_token(
        &self,
        message: &ValidateTokenRequest,
        timeout: Duration,
        traceparent: Option<HeaderValue>,
    ) -> Result<ValidateTokenResponse, Status> {
        let request = || {
            let mut request = Request::builder()
                .method(Method::POST)
                .uri(self.inner.uri.clone())
                .header(CONTENT_TYPE, "application/grpc")
                .header(TE, "trailers")
                .header(USER_AGENT, CLIENT)
                .header("grpc-timeout", grpc_timeout(timeout));
            if let Some(traceparent) = &traceparent {
                request = request.header(&crate::trace_context::TRACEPARENT, traceparent);
            }
            request
                .body(())
                .map_err(|_| Status::internal("request could not be built"))
        };
        let (response, mut body) = self.open(request).await?;
        body.send_data(frame(message), true).map_err(transport)?;
        let (head, mut answer) = response.await.map_err(transport)?.into_parts();
        if head.status != StatusCode::OK {
            return Err(http_status(head.status));
        }
        // A trailers-only answer: the status is in the headers and there is no message.
        if let Some(status) = Status::from_header_map(&head.headers)
            && status.code() != Code::Ok
        {
            return Err(status);
        }
        let mut read = BytesMut::new();
        while let Some(chunk) = answer.data().await {
            let chunk = chunk.map_err(transport)?;
            let _ = answer.flow_control().release_capacity(chunk.len());
            if read.len() + chunk.len() > MAX_MESSAGE + 5 {
                return Err(Status::resource_exhausted("answer larger than allowed"));
            }
            read.extend_from_slice(&chunk);
        }
        let trailers = answer.trailers().await.map_err(transport)?;
        match trailers.as_ref().and_then(Status::from_header_map) {
            Some(status) if status.code() == Code::Ok => {}
            Some(status) => return Err(status),
            None => return Err(Status::internal("answer without grpc-status")),
        }
        message_of(read.freeze())
    }

    /// Opens the call's stream. A connection that refuses new streams (it received a GOAWAY:
    /// the server is draining) is dropped and the stream opened on a new one, once; nothing of
    /// the call has left yet.
    async fn open(
        &self,
        request: impl Fn() -> Result<Request<()>, Status>,
    ) -> Result<(h2::client::ResponseFuture, h2::SendStream<Bytes>), Status> {
        let mut sender = self.ready_sender().await?;
        match sender.send_request(request()?, false) {
            Ok(opened) => Ok(opened),
            Err(_) => {
                self.set(None);
                let mut sender = self.ready_sender().await?;
                sender.send_request(request()?, false).map_err(transport)
            }
        }
    }

    /// The live connection ready for a stream, dialing a new one when it is gone.
    async fn ready_sender(&self) -> Result<h2::client::SendRequest<Bytes>, Status> {
        if let Some(sender) = self.current()
            && let Ok(ready) = sender.ready().await
        {
            return Ok(ready);
        }
        let _dialing = self.inner.dialing.lock().await;
        // Another call may have dialed while this one waited.
        if let Some(sender) = self.current()
            && let Ok(ready) = sender.ready().await
        {
            return Ok(ready);
        }
        self.set(None);
        // Boxed: dialing (TCP, TLS, the HTTP/2 handshake) is most of this future's size, and
        // every call's future would otherwise carry it.
        let sender = Box::pin(dial(self.inner.addr, self.inner.tls.as_ref())).await?;
        self.set(Some(sender.clone()));
        sender.ready().await.map_err(transport)
    }

    fn current(&self) -> Option<h2::client::SendRequest<Bytes>> {
        let sender = self
            .inner
            .sender
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        sender.clone()
    }

    fn set(&self, sender: Option<h2::client::SendRequest<Bytes>>) {
        *self
            .inner
            .sender
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = sender;
    }
}

/// A new connection to `addr`, over TLS when `tls` is set, its driver spawned with the
/// keepalive pings beside it.
async fn dial(
    addr: SocketAddr,
    tls: Option<&TokenTls>,
) -> Result<h2::client::SendRequest<Bytes>, Status> {
    let stream = tokio::time::timeout(DEFAULT_CONNECT_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| Status::unavailable("connect timed out"))?
        .map_err(|_| Status::unavailable("connect failed"))?;
    let _ = stream.set_nodelay(true);
    let keepalive = socket2::TcpKeepalive::new().with_time(TCP_KEEPALIVE);
    let _ = socket2::SockRef::from(&stream).set_tcp_keepalive(&keepalive);
    match tls {
        None => handshake(stream).await,
        #[cfg(feature = "grpc-tls")]
        Some(tls) => {
            let secured = tokio::time::timeout(
                DEFAULT_CONNECT_TIMEOUT,
                tls.connector.connect(tls.name.clone(), stream),
            )
            .await
            .map_err(|_| Status::unavailable("TLS handshake timed out"))?
            .map_err(|_| Status::unavailable("TLS handshake failed"))?;
            handshake(secured).await
        }
        #[cfg(not(feature = "grpc-tls"))]
        Some(never) => match *never {},
    }
}

/// The HTTP/2 handshake over `io`, the connection's driver spawned.
async fn handshake<T>(io: T) -> Result<h2::client::SendRequest<Bytes>, Status>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    // The channel's transport, so a call leaves in one write and its answer arrives in one read.
    let io = TokioIo::new(Coalesced::new(TokioIo::new(io)));
    // hyper's windows: with h2's own 64 KiB, the answers' DATA would call for a WINDOW_UPDATE,
    // a write of its own, about every hundred calls.
    let (sender, mut connection) = h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .enable_push(false)
        .handshake::<_, Bytes>(io)
        .await
        .map_err(transport)?;
    let pings = connection.ping_pong();
    tokio::spawn(async move {
        // Either ending drops the connection: its streams fail and the next call dials anew.
        tokio::select! {
            _ = connection => {}
            () = keep_alive(pings) => {}
        }
    });
    Ok(sender)
}

/// TLS, or mutual TLS, for the token connection: rustls with ring, HTTP/2 by ALPN.
#[cfg(feature = "grpc-tls")]
pub(super) struct TokenTls {
    connector: tokio_rustls::TlsConnector,
    name: rustls::pki_types::ServerName<'static>,
}

/// Without the `grpc-tls` feature there is no TLS to set.
#[cfg(not(feature = "grpc-tls"))]
pub(super) enum TokenTls {}

#[cfg(feature = "grpc-tls")]
impl TokenTls {
    /// Trusting `ca_pem`, presenting `identity` (certificate and key, PEM) when given, and
    /// expecting a certificate for `name` (a DNS name or an IP address).
    pub(super) fn new(
        name: &str,
        ca_pem: &[u8],
        identity: Option<(&[u8], &[u8])>,
    ) -> Result<TokenTls, &'static str> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem) {
            let cert = cert.map_err(|_| "the CA is not PEM")?;
            roots.add(cert).map_err(|_| "a CA certificate is refused")?;
        }
        if roots.is_empty() {
            return Err("the CA holds no certificate");
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|_| "no TLS version to offer")?
            .with_root_certificates(roots);
        let mut config = match identity {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = CertificateDer::pem_slice_iter(cert)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| "the client certificate is not PEM")?;
                let key =
                    PrivateKeyDer::from_pem_slice(key).map_err(|_| "the client key is not PEM")?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|_| "the client certificate and key are refused")?
            }
        };
        config.alpn_protocols = vec![b"h2".to_vec()];
        let name = ServerName::try_from(name.to_owned()).map_err(|_| "not a server name")?;
        Ok(TokenTls {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            name,
        })
    }
}

/// Pings every [`KEEPALIVE_INTERVAL`], busy or idle; returns when one goes unanswered for
/// [`KEEPALIVE_TIMEOUT`].
async fn keep_alive(pings: Option<h2::PingPong>) {
    let Some(mut pings) = pings else {
        return std::future::pending().await;
    };
    loop {
        tokio::time::sleep(KEEPALIVE_INTERVAL).await;
        let answered = tokio::time::timeout(KEEPALIVE_TIMEOUT, pings.ping(h2::Ping::opaque()));
        if !matches!(answered.await, Ok(Ok(_))) {
            tracing::debug!("auth service connection missed its keepalive; dropping it");
            return;
        }
    }
}

/// The message in gRPC's length-prefixed framing, uncompressed.
fn frame(message: &ValidateTokenRequest) -> Bytes {
    let len = message.encoded_len();
    let mut frame = BytesMut::with_capacity(5 + len);
    frame.put_u8(0);
    frame.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    message.encode_raw(&mut frame);
    frame.freeze()
}

/// The one message of a unary answer.
fn message_of(mut read: Bytes) -> Result<ValidateTokenResponse, Status> {
    if read.len() < 5 {
        return Err(Status::internal("answer without a message"));
    }
    let compressed = read.get_u8();
    let len = read.get_u32() as usize;
    if compressed != 0 {
        return Err(Status::internal("compressed answer not asked for"));
    }
    if len != read.len() {
        return Err(Status::internal("answer is not one whole message"));
    }
    ValidateTokenResponse::decode(read).map_err(|_| Status::internal("answer does not decode"))
}

/// `grpc-timeout` in milliseconds, rounded up, at most eight digits as the spec allows.
fn grpc_timeout(timeout: Duration) -> String {
    let millis = timeout.as_micros().div_ceil(1000).min(99_999_999);
    format!("{millis}m")
}

/// An HTTP status other than 200, as gRPC's HTTP-to-status table reads it.
fn http_status(status: StatusCode) -> Status {
    let code = match status.as_u16() {
        400 => Code::Internal,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::Unimplemented,
        429 | 502..=504 => Code::Unavailable,
        _ => Code::Unknown,
    };
    Status::new(code, format!("HTTP status {}", status.as_u16()))
}

/// A connection or stream failure: the call did not reach an answer.
fn transport(error: h2::Error) -> Status {
    let code = match error.reason() {
        Some(h2::Reason::CANCEL) => Code::Cancelled,
        _ => Code::Unavailable,
    };
    Status::new(code, "auth service connection failed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_frames_as_one_uncompressed_message() {
        let message = ValidateTokenRequest {
            access_token: "svc_pat_x".into(),
            agent_id: None,
        };
        let framed = frame(&message);
        assert_eq!(framed[0], 0);
        assert_eq!(
            u32::from_be_bytes([framed[1], framed[2], framed[3], framed[4]]) as usize,
            framed.len() - 5
        );
        assert_eq!(ValidateTokenRequest::decode(&framed[5..]).unwrap(), message);
    }

    #[test]
    fn an_answer_is_one_whole_message() {
        let answer = ValidateTokenResponse {
            org_id: "o".into(),
            ..Default::default()
        };
        let mut framed = BytesMut::new();
        framed.put_u8(0);
        framed.put_u32(answer.encoded_len() as u32);
        answer.encode_raw(&mut framed);
        assert_eq!(message_of(framed.clone().freeze()).unwrap(), answer);

        let mut extra = framed.clone();
        extra.put_u8(0);
        assert_eq!(
            message_of(extra.freeze()).unwrap_err().code(),
            Code::Internal
        );
        let mut compressed = framed.clone();
        compressed[0] = 1;
        assert_eq!(
            message_of(compressed.freeze()).unwrap_err().code(),
            Code::Internal
        );
        assert_eq!(
            message_of(Bytes::from_static(b"\0\0")).unwrap_err().code(),
            Code::Internal
        );
    }

    #[test]
    fn the_deadline_travels_in_whole_milliseconds_rounded_up() {
        assert_eq!(grpc_timeout(Duration::from_millis(50)), "50m");
        assert_eq!(grpc_timeout(Duration::from_micros(1)), "1m");
        assert_eq!(grpc_timeout(Duration::from_secs(1_000_000)), "99999999m");
    }

    #[test]
    fn http_statuses_map_as_grpc_reads_them() {
        assert_eq!(
            http_status(StatusCode::BAD_GATEWAY).code(),
            Code::Unavailable
        );
        assert_eq!(
            http_status(StatusCode::NOT_FOUND).code(),
            Code::Unimplemented
        );
        assert_eq!(
            http_status(StatusCode::INTERNAL_SERVER_ERROR).code(),
            Code::Unknown
        );
    }
}
