//! Sticky sessions: `X-SVC-Session-ID` on every chat response, and, with `POSTGRES_DSN`, a
//! durable record of each session and one metadata checkpoint per completed call.
//!
//! A valid inbound id (1 to 64 characters of `[A-Za-z0-9._:-]`) is kept; anything else,
//! or nothing, is replaced by a fresh UUID v7. Either way the id is echoed, so a client can
//! adopt the minted one. Checkpoints hold metadata only (request id, model, message count,
//! status, latency, usage), never content; a replayed idempotent answer writes none. They are
//! written in batches by one [`writer`] task.

pub mod store;
pub mod writer;

use http::{HeaderMap, HeaderName, HeaderValue, Request, Response};
use tower::Layer;

pub use store::{Checkpoint, Entry, SessionStore, Usage};
pub use writer::{CheckpointWriter, WriterTask};

use crate::carry::{Carried, Carry};

/// The session header.
pub static X_SVC_SESSION_ID: HeaderName = HeaderName::from_static("x-svc-session-id");
/// Longest accepted session id.
pub const MAX_SESSION_ID_CHARS: usize = 64;

/// The session of one chat request, in the request extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionId(HeaderValue);

impl SessionId {
    /// The client's id when valid, else a fresh UUID v7.
    pub fn from_headers(headers: &HeaderMap) -> SessionId {
        headers
            .get(&X_SVC_SESSION_ID)
            .filter(|v| is_valid(v.as_bytes()))
            .map(|v| SessionId(v.clone()))
            .unwrap_or_else(SessionId::mint)
    }

    /// A fresh UUID v7 id.
    pub fn mint() -> SessionId {
        let id = svc_core::id::uuid_v7().hyphenated().to_string();
        // A hyphenated UUID is always a valid header value.
        SessionId(HeaderValue::from_str(&id).unwrap_or_else(|_| HeaderValue::from_static("-")))
    }

    /// The id as text (always ASCII).
    pub fn as_str(&self) -> &str {
        self.0.to_str().unwrap_or_default()
    }
}

/// 1 to 64 characters of `[A-Za-z0-9._:-]`.
pub fn is_valid(id: &[u8]) -> bool {
    (1..=MAX_SESSION_ID_CHARS).contains(&id.len())
        && id
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// Resolves the session id before anything else on the chat route can reject, so every chat
/// response, rejections included, echoes it.
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionLayer;

impl<S> Layer<S> for SessionLayer {
    type Service = Carry<S, SessionLayer>;

    fn layer(&self, inner: S) -> Carry<S, SessionLayer> {
        Carry::new(inner, *self)
    }
}

impl Carried for SessionLayer {
    type Value = HeaderValue;

    fn take<B>(&self, request: &mut Request<B>) -> HeaderValue {
        let id = SessionId::from_headers(request.headers());
        let header = id.0.clone();
        request.extensions_mut().insert(id);
        header
    }

    fn give<B>(header: HeaderValue, response: &mut Response<B>) {
        response
            .headers_mut()
            .insert(X_SVC_SESSION_ID.clone(), header);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_ids_are_kept() {
        for ok in ["a", "sess-1", "user:42.thread_7", &"x".repeat(64)] {
            let mut h = HeaderMap::new();
            h.insert(&X_SVC_SESSION_ID, HeaderValue::from_str(ok).unwrap());
            assert_eq!(SessionId::from_headers(&h).as_str(), ok);
        }
    }

    #[test]
    fn invalid_ids_are_replaced_by_a_v7() {
        for bad in [
            "",
            "has space",
            "semi;colon",
            "slash/",
            "é",
            &"x".repeat(65),
        ] {
            let mut h = HeaderMap::new();
            if let Ok(v) = HeaderValue::from_str(bad) {
                h.insert(&X_SVC_SESSION_ID, v);
            }
            let id = SessionId::from_headers(&h);
            assert_ne!(id.as_str(), bad);
            let uuid = uuid::Uuid::parse_str(id.as_str()).unwrap();
            assert_eq!(uuid.get_version_num(), 7);
        }
        assert_eq!(
            uuid::Uuid::parse_str(SessionId::from_headers(&HeaderMap::new()).as_str())
                .unwrap()
                .get_version_num(),
            7
        );
    }
}
