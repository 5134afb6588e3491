//! The responses the layer writes itself.

use http::{HeaderMap, HeaderValue, Response};
use tower::BoxError;

use super::config::{IDEMPOTENT_REPLAYED, STORED_HEADERS};
use super::store::StoredResponse;
use crate::body::ResponseBody;
use crate::body_limit::is_length_limit_error;
use crate::error::{ApiError, ErrorCode, X_SHOULD_RETRY};

pub(crate) fn stored_headers(headers: &HeaderMap) -> HeaderMap {
    let mut stored = HeaderMap::new();
    for name in &STORED_HEADERS {
        for value in headers.get_all(name) {
            stored.append(name.clone(), value.clone());
        }
    }
    stored
}

/// What [`Idempotency`](super::Idempotency) did with a request, in the extensions of every
/// response it returns, so nothing behind it has to guess from statuses or headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdempotencyOutcome {
    /// The inner service was called (under a claim, or without one: no key, no org, or the
    /// store failed open).
    Called,
    /// A committed response was replayed; the inner service was not called.
    Replayed,
    /// The layer answered itself (a conflict, an invalid key, a refused body); the inner
    /// service was not called.
    Refused,
}

/// Marks a response of the inner service.
pub(crate) fn called<B>(mut response: Response<B>) -> Response<B> {
    response.extensions_mut().insert(IdempotencyOutcome::Called);
    response
}

pub(crate) fn replay<B>(stored: StoredResponse) -> Response<ResponseBody<B>> {
    let mut response = Response::new(ResponseBody::full(stored.body));
    response
        .extensions_mut()
        .insert(IdempotencyOutcome::Replayed);
    *response.status_mut() = stored.status;
    *response.headers_mut() = stored.headers;
    response.headers_mut().insert(
        IDEMPOTENT_REPLAYED.clone(),
        HeaderValue::from_static("true"),
    );
    response
}

pub(crate) fn reject<B>(error: ApiError) -> Response<ResponseBody<B>> {
    let mut response = error.into_response_with(ResponseBody::empty());
    response
        .extensions_mut()
        .insert(IdempotencyOutcome::Refused);
    response
}

pub(crate) fn unreadable(error: BoxError) -> ApiError {
    if is_length_limit_error(&*error) {
        ApiError::new(ErrorCode::PayloadTooLarge)
    } else {
        ApiError::new(ErrorCode::InvalidJson).with_message("The request body could not be read.")
    }
}

/// The same request is still running: the OpenAI SDKs retry a 409 after `Retry-After`.
pub(crate) fn in_progress() -> ApiError {
    ApiError::new(ErrorCode::IdempotencyInProgress).with_retry_after(1)
}

/// A different request holds the key: retrying cannot help, and `x-should-retry` says so.
pub(crate) fn key_reuse() -> ApiError {
    ApiError::new(ErrorCode::IdempotencyKeyReuse)
        .with_header(X_SHOULD_RETRY.clone(), HeaderValue::from_static("false"))
}
