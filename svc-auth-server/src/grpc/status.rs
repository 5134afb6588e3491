//! The one place errors become gRPC statuses.
//!
//! Rejections say little on purpose: a caller learns "unauthenticated" or "permission denied",
//! never whether a token id exists, which check failed, or what another org holds. Server
//! faults are logged here with their cause and reach the caller as a bare `Internal`.

use std::collections::HashMap;
use std::error::Error;
use std::fmt;

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::store::StoreError;
use crate::verify::{HashError, VerifyError};

pub use svc_core::reasons::{
    AGENT_NOT_AUTHORIZED, AGENT_SUSPENDED, COLD_SHARE_SPENT, ERROR_DOMAIN,
};

/// `error: cause: cause` on one line.
struct Chain<'a>(&'a (dyn Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

/// Logs a server fault and returns a generic Internal.
pub(crate) fn internal(operation: &'static str, error: &(dyn Error + 'static)) -> Status {
    tracing::error!(operation, error = %Chain(error), "request failed");
    Status::internal("internal error")
}

pub(crate) fn missing_token() -> Status {
    Status::unauthenticated("missing token")
}

pub(crate) fn invalid_token() -> Status {
    Status::unauthenticated("invalid token")
}

/// Unauthenticated for a rejected token, Internal for a store or hashing fault, Unavailable
/// when the hashing budget is spent (the token may be valid: the caller retries), with the
/// ErrorInfo reason [`COLD_SHARE_SPENT`] when the token's own org spent its share.
pub(crate) fn verify_error(operation: &'static str, error: VerifyError) -> Status {
    match error {
        VerifyError::Store(ref cause) => internal(operation, cause),
        VerifyError::Hash(ref cause) => internal(operation, cause),
        VerifyError::Busy => {
            tracing::debug!(operation, "hashing budget spent; answered unavailable");
            Status::unavailable("too many secrets being verified; retry")
        }
        VerifyError::ShareSpent => {
            tracing::debug!(
                operation,
                "the org's hashing share spent; answered unavailable"
            );
            Status::with_error_details(
                Code::Unavailable,
                "too many of this org's secrets being verified; retry",
                ErrorDetails::with_error_info(
                    COLD_SHARE_SPENT,
                    ERROR_DOMAIN,
                    HashMap::<String, String>::new(),
                ),
            )
        }
        rejected => {
            tracing::debug!(operation, reason = rejected.reason(), "token rejected");
            invalid_token()
        }
    }
}

/// PermissionDenied for references outside the org, Internal for faults.
pub(crate) fn store_error(operation: &'static str, error: StoreError) -> Status {
    match error {
        StoreError::NotInOrg(reference) => {
            Status::permission_denied(format!("the {reference} is not in the caller's org"))
        }
        StoreError::Precondition(why) => Status::failed_precondition(why),
        StoreError::Forbidden(why) => Status::permission_denied(why),
        StoreError::AlreadyExists(what) => Status::already_exists(format!("the {what} exists")),
        other => internal(operation, &other),
    }
}

pub(crate) fn hash_error(operation: &'static str, error: HashError) -> Status {
    internal(operation, &error)
}

/// PermissionDenied carrying a google.rpc.ErrorInfo with `reason`.
pub(crate) fn agent_denied(reason: &'static str, message: &'static str) -> Status {
    Status::with_error_details(
        Code::PermissionDenied,
        message,
        ErrorDetails::with_error_info(reason, ERROR_DOMAIN, HashMap::<String, String>::new()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_denials_carry_the_reason() {
        let status = agent_denied(AGENT_SUSPENDED, "agent is not active");
        assert_eq!(status.code(), Code::PermissionDenied);
        let info = status.get_error_details().error_info().cloned().unwrap();
        assert_eq!(info.reason, AGENT_SUSPENDED);
        assert_eq!(info.domain, ERROR_DOMAIN);
    }

    #[test]
    fn faults_are_generic_internals() {
        let status = store_error(
            "test",
            StoreError::Unavailable("connect to 10.0.0.1 failed".into()),
        );
        assert_eq!(status.code(), Code::Internal);
        assert_eq!(status.message(), "internal error");
        let status = verify_error("test", VerifyError::Revoked);
        assert_eq!(status.code(), Code::Unauthenticated);
        assert_eq!(status.message(), "invalid token");
        let status = verify_error("test", VerifyError::Busy);
        assert_eq!(status.code(), Code::Unavailable);
        assert!(status.get_error_details().error_info().is_none());
    }

    #[test]
    fn a_spent_share_is_unavailable_with_its_reason() {
        let status = verify_error("test", VerifyError::ShareSpent);
        assert_eq!(status.code(), Code::Unavailable);
        let info = status.get_error_details().error_info().cloned().unwrap();
        assert_eq!(
            (info.reason.as_str(), info.domain.as_str()),
            (COLD_SHARE_SPENT, ERROR_DOMAIN)
        );
    }
}
