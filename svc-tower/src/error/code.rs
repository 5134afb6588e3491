use std::borrow::Cow;
use std::fmt;

use http::StatusCode;

/// Every error code of the svc error tables, each with its HTTP status.
///
/// [`ErrorCode::Other`] carries a code this crate does not know; it renders with that code
/// and HTTP 500, so an unexpected code is never mistaken for a client error.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// 400: the body is not well-formed JSON.
    InvalidJson,
    /// 400: semantic validation failed; the envelope carries `field_errors`.
    ValidationError,
    /// 400: `X-SVC-Agent-ID` is missing on a protected route.
    MissingAgentId,
    /// 401: no `Authorization` header.
    MissingToken,
    /// 401: the bearer token is malformed, expired or revoked.
    InvalidToken,
    /// 403: the token lacks the permission the route needs.
    InsufficientPermissions,
    /// 403: the agent is unknown or belongs to another org.
    AgentNotAuthorized,
    /// 403: the agent is paused, suspended or archived.
    AgentSuspended,
    /// 404: no such route.
    NotFound,
    /// 405: wrong method for the route.
    MethodNotAllowed,
    /// 409: the idempotency key was used with a different request.
    IdempotencyKeyReuse,
    /// 409: a request with the same idempotency key is still being processed.
    IdempotencyInProgress,
    /// 408: the request body stopped arriving.
    RequestTimeout,
    /// 413: the body exceeds the configured limit.
    PayloadTooLarge,
    /// 415: the body is not `application/json`.
    UnsupportedMediaType,
    /// 429: the org's rate limit, or the provider's, was exceeded.
    RateLimited,
    /// 429: a money budget that applies to the request cannot hold its worst-case cost.
    BudgetExceeded,
    /// 400: the provider rejected the payload.
    InvalidRequest,
    /// 500: an unhandled fault.
    InternalError,
    /// 501: the requested model is not registered with the active provider registry.
    ProviderNotConfigured,
    /// 503: token validation failed unexpectedly or hit its deadline.
    ServiceDegraded,
    /// 503: agent validation could not reach the auth service.
    AuthUnavailable,
    /// 503: the provider is unreachable or refused our credentials.
    ProviderUnavailable,
    /// 504: the provider did not answer within its deadline.
    ProviderTimeout,
    /// 503: a budget applies to the request and its store cannot be reached.
    BudgetUnavailable,
    /// A code outside the tables; always HTTP 500.
    Other(Cow<'static, str>),
}

impl ErrorCode {
    /// Every code of the tables, in table order (excluding [`ErrorCode::Other`]).
    pub const ALL: [ErrorCode; 25] = [
        ErrorCode::InvalidJson,
        ErrorCode::ValidationError,
        ErrorCode::MissingAgentId,
        ErrorCode::MissingToken,
        ErrorCode::InvalidToken,
        ErrorCode::InsufficientPermissions,
        ErrorCode::AgentNotAuthorized,
        ErrorCode::AgentSuspended,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::IdempotencyKeyReuse,
        ErrorCode::IdempotencyInProgress,
        ErrorCode::RequestTimeout,
        ErrorCode::PayloadTooLarge,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::RateLimited,
        ErrorCode::BudgetExceeded,
        ErrorCode::InvalidRequest,
        ErrorCode::InternalError,
        ErrorCode::ProviderNotConfigured,
        ErrorCode::ServiceDegraded,
        ErrorCode::AuthUnavailable,
        ErrorCode::ProviderUnavailable,
        ErrorCode::ProviderTimeout,
        ErrorCode::BudgetUnavailable,
    ];

    /// The UPPER_SNAKE_CASE wire form.
    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::InvalidJson => "INVALID_JSON",
            ErrorCode::ValidationError => "VALIDATION_ERROR",
            ErrorCode::MissingAgentId => "MISSING_AGENT_ID",
            ErrorCode::MissingToken => "MISSING_TOKEN",
            ErrorCode::InvalidToken => "INVALID_TOKEN",
            ErrorCode::InsufficientPermissions => "INSUFFICIENT_PERMISSIONS",
            ErrorCode::AgentNotAuthorized => "AGENT_NOT_AUTHORIZED",
            ErrorCode::AgentSuspended => "AGENT_SUSPENDED",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            ErrorCode::IdempotencyKeyReuse => "IDEMPOTENCY_KEY_REUSE",
            ErrorCode::IdempotencyInProgress => "IDEMPOTENCY_IN_PROGRESS",
            ErrorCode::RequestTimeout => "REQUEST_TIMEOUT",
            ErrorCode::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            ErrorCode::UnsupportedMediaType => "UNSUPPORTED_MEDIA_TYPE",
            ErrorCode::RateLimited => "RATE_LIMITED",
            ErrorCode::BudgetExceeded => "BUDGET_EXCEEDED",
            ErrorCode::InvalidRequest => "INVALID_REQUEST",
            ErrorCode::InternalError => "INTERNAL_ERROR",
            ErrorCode::ProviderNotConfigured => "PROVIDER_NOT_CONFIGURED",
            ErrorCode::ServiceDegraded => "SERVICE_DEGRADED",
            ErrorCode::AuthUnavailable => "AUTH_UNAVAILABLE",
            ErrorCode::ProviderUnavailable => "PROVIDER_UNAVAILABLE",
            ErrorCode::ProviderTimeout => "PROVIDER_TIMEOUT",
            ErrorCode::BudgetUnavailable => "BUDGET_UNAVAILABLE",
            ErrorCode::Other(code) => code,
        }
    }

    /// Parses a wire code; a code outside the tables becomes [`ErrorCode::Other`].
    pub fn parse(code: &str) -> ErrorCode {
        ErrorCode::ALL
            .iter()
            .find(|known| known.as_str() == code)
            .cloned()
            .unwrap_or_else(|| ErrorCode::Other(Cow::Owned(code.to_owned())))
    }

    /// The HTTP status of the code.
    pub fn status(&self) -> StatusCode {
        match self {
            ErrorCode::InvalidJson
            | ErrorCode::ValidationError
            | ErrorCode::MissingAgentId
            | ErrorCode::InvalidRequest => StatusCode::BAD_REQUEST,
            ErrorCode::MissingToken | ErrorCode::InvalidToken => StatusCode::UNAUTHORIZED,
            ErrorCode::InsufficientPermissions
            | ErrorCode::AgentNotAuthorized
            | ErrorCode::AgentSuspended => StatusCode::FORBIDDEN,
            ErrorCode::NotFound => StatusCode::NOT_FOUND,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::IdempotencyKeyReuse | ErrorCode::IdempotencyInProgress => {
                StatusCode::CONFLICT
            }
            ErrorCode::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::RateLimited | ErrorCode::BudgetExceeded => StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::InternalError | ErrorCode::Other(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::ProviderNotConfigured => StatusCode::NOT_IMPLEMENTED,
            ErrorCode::ServiceDegraded
            | ErrorCode::AuthUnavailable
            | ErrorCode::ProviderUnavailable
            | ErrorCode::BudgetUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::ProviderTimeout => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    /// A safe one-line summary, used when the error carries no message of its own.
    pub fn default_message(&self) -> &'static str {
        match self {
            ErrorCode::InvalidJson => "The request body is not valid JSON.",
            ErrorCode::ValidationError => "The request failed validation.",
            ErrorCode::MissingAgentId => "The X-SVC-Agent-ID header is required.",
            ErrorCode::MissingToken => "The Authorization header is required.",
            ErrorCode::InvalidToken => "The bearer token is malformed, expired or revoked.",
            ErrorCode::InsufficientPermissions => {
                "The token lacks the permission this route requires."
            }
            ErrorCode::AgentNotAuthorized => "The agent is not authorized for this organization.",
            ErrorCode::AgentSuspended => "The agent is not active.",
            ErrorCode::NotFound => "No route matches this path.",
            ErrorCode::MethodNotAllowed => "This method is not allowed for this route.",
            ErrorCode::IdempotencyKeyReuse => {
                "The idempotency key was already used with a different request."
            }
            ErrorCode::IdempotencyInProgress => {
                "A request with this idempotency key is still being processed."
            }
            ErrorCode::RequestTimeout => "The request body stopped arriving.",
            ErrorCode::PayloadTooLarge => "The request body is too large.",
            ErrorCode::UnsupportedMediaType => "The request body must be application/json.",
            ErrorCode::RateLimited => "Rate limit exceeded.",
            ErrorCode::BudgetExceeded => "A budget that applies to this request is spent.",
            ErrorCode::InvalidRequest => "The provider rejected the request.",
            ErrorCode::InternalError | ErrorCode::Other(_) => "An internal error occurred.",
            ErrorCode::ProviderNotConfigured => "The requested model is not configured.",
            ErrorCode::ServiceDegraded => "Token validation is temporarily unavailable.",
            ErrorCode::AuthUnavailable => "Agent validation is temporarily unavailable.",
            ErrorCode::ProviderUnavailable => "The provider is unavailable.",
            ErrorCode::ProviderTimeout => "The provider did not answer in time.",
            ErrorCode::BudgetUnavailable => "Budgets cannot be checked right now.",
        }
    }

    /// OpenAI's error `type` for the code, which the official SDKs read.
    pub fn openai_type(&self) -> &'static str {
        match self.status().as_u16() {
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            409 => "conflict_error",
            429 => "rate_limit_error",
            400..=499 => "invalid_request_error",
            _ => "api_error",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `code` of one entry of `field_errors`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldErrorCode {
    /// The field is missing.
    Required,
    /// The value is longer than allowed.
    TooLong,
    /// The array has more items than allowed.
    TooMany,
    /// The value is not one of the allowed values.
    InvalidEnum,
    /// The value has the wrong type or shape.
    InvalidFormat,
}

impl FieldErrorCode {
    /// The UPPER_SNAKE_CASE wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            FieldErrorCode::Required => "REQUIRED",
            FieldErrorCode::TooLong => "TOO_LONG",
            FieldErrorCode::TooMany => "TOO_MANY",
            FieldErrorCode::InvalidEnum => "INVALID_ENUM",
            FieldErrorCode::InvalidFormat => "INVALID_FORMAT",
        }
    }
}

impl fmt::Display for FieldErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_wire_form() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::parse(code.as_str()), code);
        }
    }

    #[test]
    fn unknown_codes_are_500() {
        let code = ErrorCode::parse("SOMETHING_NEW");
        assert_eq!(code.as_str(), "SOMETHING_NEW");
        assert_eq!(code.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[test]
    fn statuses_follow_the_tables() {
        let table = [
            ("INVALID_JSON", 400),
            ("VALIDATION_ERROR", 400),
            ("MISSING_AGENT_ID", 400),
            ("MISSING_TOKEN", 401),
            ("INVALID_TOKEN", 401),
            ("INSUFFICIENT_PERMISSIONS", 403),
            ("AGENT_NOT_AUTHORIZED", 403),
            ("AGENT_SUSPENDED", 403),
            ("METHOD_NOT_ALLOWED", 405),
            ("IDEMPOTENCY_KEY_REUSE", 409),
            ("IDEMPOTENCY_IN_PROGRESS", 409),
            ("REQUEST_TIMEOUT", 408),
            ("PAYLOAD_TOO_LARGE", 413),
            ("UNSUPPORTED_MEDIA_TYPE", 415),
            ("RATE_LIMITED", 429),
            ("BUDGET_EXCEEDED", 429),
            ("INTERNAL_ERROR", 500),
            ("PROVIDER_NOT_CONFIGURED", 501),
            ("SERVICE_DEGRADED", 503),
            ("AUTH_UNAVAILABLE", 503),
            ("INVALID_REQUEST", 400),
            ("PROVIDER_UNAVAILABLE", 503),
            ("PROVIDER_TIMEOUT", 504),
            ("BUDGET_UNAVAILABLE", 503),
        ];
        for (code, status) in table {
            assert_eq!(ErrorCode::parse(code).status().as_u16(), status, "{code}");
        }
    }
}
