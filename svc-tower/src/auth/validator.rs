//! The token validation backend, and the shape check done before any I/O.

use std::future::Future;

use http::{HeaderMap, header};
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

/// The token prefix of a svc PAT.
pub const PAT_PREFIX: &str = "svc_pat_";

/// The longest secret accepted; real secrets are far shorter, this only bounds what is
/// forwarded to the validator.
const MAX_SECRET_LEN: usize = 256;

/// True when `token` has the PAT shape `svc_pat_<uuid>_<secret>` (hyphenated UUID, ASCII
/// alphanumeric secret). A token failing this is refused without asking the validator.
pub fn is_pat_shaped(token: &str) -> bool {
    let Some(rest) = token.strip_prefix(PAT_PREFIX) else {
        return false;
    };
    let (Some(id), Some(tail)) = (rest.get(..36), rest.get(36..)) else {
        return false;
    };
    let Some(secret) = tail.strip_prefix('_') else {
        return false;
    };
    Uuid::try_parse(id).is_ok()
        && (1..=MAX_SECRET_LEN).contains(&secret.len())
        && secret.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// The PAT of a request's `Authorization: Bearer ...` header.
///
/// No header is [`ErrorCode::MissingToken`]; a repeated header, another scheme, or a value
/// that is not PAT-shaped is [`ErrorCode::InvalidToken`].
pub fn bearer_token(headers: &HeaderMap) -> Result<&str, ErrorCode> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Err(ErrorCode::MissingToken);
    };
    if values.next().is_some() {
        return Err(ErrorCode::InvalidToken);
    }
    let value = value.to_str().map_err(|_| ErrorCode::InvalidToken)?;
    let (scheme, token) = value.split_once(' ').ok_or(ErrorCode::InvalidToken)?;
    let token = token.trim();
    if scheme.eq_ignore_ascii_case("bearer") && is_pat_shaped(token) {
        Ok(token)
    } else {
        Err(ErrorCode::InvalidToken)
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    const GOOD: &str = "svc_pat_0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b_AbC123xyz";

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for v in values {
            map.append(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        }
        map
    }

    #[test]
    fn accepts_a_bearer_pat_in_any_scheme_case() {
        for value in [
            format!("Bearer {GOOD}"),
            format!("bearer {GOOD}"),
            format!("BEARER  {GOOD} "),
        ] {
            assert_eq!(bearer_token(&headers(&[&value])), Ok(GOOD), "{value}");
        }
    }

    #[test]
    fn no_header_is_missing_token() {
        assert_eq!(
            bearer_token(&HeaderMap::new()),
            Err(ErrorCode::MissingToken)
        );
    }

    #[test]
    fn anything_else_is_invalid_token() {
        let cases = [
            String::new(),
            "Bearer".to_owned(),
            format!("Basic {GOOD}"),
            "Bearer sk-live-abcdef".to_owned(),
            "Bearer svc_pat_not-a-uuid_secret".to_owned(),
            "Bearer svc_pat_0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b_".to_owned(),
            "Bearer svc_pat_0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b-secret".to_owned(),
            "Bearer svc_pat_0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b_sec ret".to_owned(),
            format!("Bearer {GOOD}{}", "x".repeat(300)),
        ];
        for value in cases {
            assert_eq!(
                bearer_token(&headers(&[&value])),
                Err(ErrorCode::InvalidToken),
                "{value}"
            );
        }
        let twice = format!("Bearer {GOOD}");
        assert_eq!(
            bearer_token(&headers(&[&twice, &twice])),
            Err(ErrorCode::InvalidToken)
        );
    }

    #[test]
    fn non_ascii_tokens_are_not_pat_shaped() {
        assert!(!is_pat_shaped(
            "svc_pat_0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5é_x"
        ));
        assert!(!is_pat_shaped("svc_pat_é"));
        assert!(is_pat_shaped(GOOD));
    }
}
