//! The token validation backend, and the shape check done before any I/O.

use std::future::Future;

use http::HeaderMap;
use svc_core::bearer::BearerError;
use uuid::Uuid;

use crate::context::{AgentVerdict, OrgContext};
use crate::error::ErrorCode;

/// Why a token was not accepted.
///
/// Only [`TokenError::Invalid`] is the caller's fault (401 `INVALID_TOKEN`); the others mean
/// the answer is unknown, and [`PatAuth`](super::PatAuth) fails closed with 503
/// `SERVICE_DEGRADED`. [`TokenError::Throttled`] is such an unknown that the caller's own
/// traffic earned, so it counts toward the address's failure limit like `Invalid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Malformed, unknown, expired or revoked.
    #[error("the token is invalid, expired or revoked")]
    Invalid,
    /// The validation backend could not be reached.
    #[error("the token validation backend is unavailable")]
    Unavailable,
    /// The validation backend did not answer within its deadline.
    #[error("token validation timed out")]
    Timeout,
    /// The validation backend failed, or answered something unexpected.
    #[error("token validation failed")]
    Internal,
    /// The validation backend would not check the secret now because the token's own tenant
    /// has spent its share of checks with secrets not yet verified (a flood of wrong secrets
    /// on its own tokens, as a rule).
    #[error("the token's tenant has too many secrets being checked")]
    Throttled,
}

impl TokenError {
    /// The `result` label of `svc_proxy_auth_validate_duration_seconds`.
    pub fn label(self) -> &'static str {
        match self {
            TokenError::Invalid => "invalid",
            TokenError::Unavailable => "unavailable",
            TokenError::Timeout => "timeout",
            TokenError::Internal => "error",
            TokenError::Throttled => "throttled",
        }
    }
}

/// Turns a bearer PAT into the [`OrgContext`] of its org.
///
/// Implement it with an `async fn`, or pass a closure `Fn(&str) -> impl Future` (it gets this
/// trait for free). The shipped implementation is `GrpcAuthClient` (feature `grpc`), which asks
/// `svc.auth.v1.AuthService/ValidateToken`.
///
/// ```
/// use svc_tower::auth::{TokenError, TokenValidator};
/// use svc_tower::context::{OrgContext, Permissions};
/// use uuid::Uuid;
///
/// #[derive(Clone)]
/// struct OneToken { token: String, org: OrgContext }
///
/// impl TokenValidator for OneToken {
///     async fn validate(&self, token: &str) -> Result<OrgContext, TokenError> {
///         if token == self.token { Ok(self.org.clone()) } else { Err(TokenError::Invalid) }
///     }
/// }
/// ```
pub trait TokenValidator: Clone + Send + Sync + 'static {
    /// Validates `token`, the full `svc_pat_...` value. The token is a secret: never log it.
    fn validate(&self, token: &str) -> impl Future<Output = Result<OrgContext, TokenError>> + Send;

    /// Validates `token` and, when the backend can, also looks up `agent` in the token's org
    /// in the same round trip. The default asks about the token only.
    fn validate_with_agent(
        &self,
        token: &str,
        agent: Option<Uuid>,
    ) -> impl Future<Output = Result<(OrgContext, Option<AgentVerdict>), TokenError>> + Send {
        let _ = agent;
        let validate = self.validate(token);
        async move { validate.await.map(|context| (context, None)) }
    }
}

impl<F, Fut> TokenValidator for F
where
    F: Fn(&str) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<OrgContext, TokenError>> + Send,
{
    fn validate(&self, token: &str) -> impl Future<Output = Result<OrgContext, TokenError>> + Send {
        self(token)
    }
}

/// The PAT of a request's `Authorization: Bearer ...` header.
///
/// No header is [`ErrorCode::MissingToken`]; a repeated header, another scheme, or a value
/// that is not PAT-shaped is [`ErrorCode::InvalidToken`].
pub fn bearer_token(headers: &HeaderMap) -> Result<&str, ErrorCode> {
    svc_core::bearer::token(headers).map_err(|error| match error {
        BearerError::Missing => ErrorCode::MissingToken,
        BearerError::Invalid => ErrorCode::InvalidToken,
    })
}
