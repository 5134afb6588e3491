//! What a new token inherits from the token that issues it: never more time, never another
//! agent, never a higher rate limit.
//!
//! Permissions are checked where the request is read (a subset of the issuer's); this module
//! decides expiry, agent binding and rate limits. An admin token that expires in five minutes,
//! is bound to one agent or may send 10 requests a minute would otherwise mint a permanent,
//! unbound, unlimited token and outlive its own limits.
//!
//! Limits are clamped like expiry rather than refused like another agent: asking for more than
//! the issuer has, or for nothing, yields the issuer's limit, and CreateToken's answer carries
//! the limits the token got, so the caller sees the difference.

use chrono::{DateTime, Utc};
use tonic::Status;
use uuid::Uuid;

use crate::store::TokenLimits;
use crate::verify::ValidToken;

/// The expiry, agent binding and limits a new token gets, given its issuer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Scope {
    pub(crate) agent_id: Option<Uuid>,
    pub(crate) expires_at: Option<DateTime<Utc>>,
    pub(crate) limits: TokenLimits,
}

/// The smaller of a requested and an inherited bound, where `None` is unbounded.
fn at_most<T: Ord>(asked: Option<T>, limit: Option<T>) -> Option<T> {
    match (asked, limit) {
        (Some(asked), Some(limit)) => Some(asked.min(limit)),
        (asked, limit) => asked.or(limit),
    }
}

/// Clamps a requested expiry to the issuer's (no expiry, or a later one, becomes the issuer's)
/// and binds the token to the issuer's agent. Asking for another agent than the issuer's is
/// PermissionDenied rather than silently rebound: the caller would get a token for an agent it
/// did not name. Limits are clamped as expiry is.
pub(crate) fn within_issuer(
    issuer: &ValidToken,
    agent_id: Option<Uuid>,
    expires_at: Option<DateTime<Utc>>,
    limits: TokenLimits,
) -> Result<Scope, Status> {
    let agent_id = match (issuer.agent_id, agent_id) {
        (Some(bound), Some(asked)) if bound != asked => {
            return Err(Status::permission_denied(
                "the caller's token is bound to another agent",
            ));
        }
        (Some(bound), _) => Some(bound),
        (None, asked) => asked,
    };
    Ok(Scope {
        agent_id,
        expires_at: at_most(expires_at, issuer.expires_at),
        limits: TokenLimits {
            rpm: at_most(limits.rpm, issuer.limits.rpm),
            tpm: at_most(limits.tpm, issuer.limits.tpm),
        },
    })
}

#[cfg(test)]
mod tests {
    use chrono::Duration;
    use svc_core::permissions::Permissions;

    use super::*;

    fn issuer(agent_id: Option<Uuid>, expires_at: Option<DateTime<Utc>>) -> ValidToken {
        ValidToken {
            token_id: Uuid::new_v4(),
            org_id: Uuid::new_v4(),
            permissions: Permissions::TOKEN_CREATE,
            user_id: None,
            agent_id,
            expires_at,
            limits: TokenLimits::default(),
            budgets: Vec::new(),
        }
    }

    const NONE: TokenLimits = TokenLimits {
        rpm: None,
        tpm: None,
    };

    #[test]
    fn an_unbounded_issuer_passes_the_request_through() {
        let (agent, at) = (Uuid::new_v4(), Utc::now() + Duration::days(1));
        let scope = within_issuer(&issuer(None, None), Some(agent), Some(at), NONE).unwrap();
        assert_eq!(scope.agent_id, Some(agent));
        assert_eq!(scope.expires_at, Some(at));
        let scope = within_issuer(&issuer(None, None), None, None, NONE).unwrap();
        assert_eq!(scope.agent_id, None);
        assert_eq!(scope.expires_at, None);
    }

    #[test]
    fn expiry_is_clamped_to_the_issuers() {
        let limit = Utc::now() + Duration::minutes(5);
        let admin = issuer(None, Some(limit));
        for asked in [None, Some(limit + Duration::days(365))] {
            let scope = within_issuer(&admin, None, asked, NONE).unwrap();
            assert_eq!(scope.expires_at, Some(limit));
        }
        let sooner = limit - Duration::minutes(1);
        let scope = within_issuer(&admin, None, Some(sooner), NONE).unwrap();
        assert_eq!(scope.expires_at, Some(sooner));
    }

    #[test]
    fn the_agent_binding_is_inherited_and_another_agent_is_denied() {
        let bound = Uuid::new_v4();
        let admin = issuer(Some(bound), None);
        assert_eq!(
            within_issuer(&admin, None, None, NONE).unwrap().agent_id,
            Some(bound)
        );
        assert_eq!(
            within_issuer(&admin, Some(bound), None, NONE)
                .unwrap()
                .agent_id,
            Some(bound)
        );
        let status = within_issuer(&admin, Some(Uuid::new_v4()), None, NONE).unwrap_err();
        assert_eq!(status.code(), tonic::Code::PermissionDenied);
    }

    fn limited(rpm: Option<u32>, tpm: Option<u64>) -> ValidToken {
        ValidToken {
            limits: TokenLimits { rpm, tpm },
            ..issuer(None, None)
        }
    }

    fn limits_for(issuer: &ValidToken, rpm: Option<u32>, tpm: Option<u64>) -> TokenLimits {
        within_issuer(issuer, None, None, TokenLimits { rpm, tpm })
            .unwrap()
            .limits
    }

    #[test]
    fn an_unlimited_issuer_grants_what_is_asked() {
        let issuer = limited(None, None);
        assert_eq!(limits_for(&issuer, None, None), TokenLimits::default());
        let asked = limits_for(&issuer, Some(1_000_000), Some(u64::MAX));
        assert_eq!(asked.rpm, Some(1_000_000));
        assert_eq!(asked.tpm, Some(u64::MAX));
    }

    #[test]
    fn limits_are_inherited_and_clamped_to_the_issuers() {
        let issuer = limited(Some(60), Some(10_000));
        let inherited = limits_for(&issuer, None, None);
        assert_eq!((inherited.rpm, inherited.tpm), (Some(60), Some(10_000)));
        let clamped = limits_for(&issuer, Some(600), Some(1_000_000));
        assert_eq!((clamped.rpm, clamped.tpm), (Some(60), Some(10_000)));
        let lower = limits_for(&issuer, Some(6), Some(100));
        assert_eq!((lower.rpm, lower.tpm), (Some(6), Some(100)));
        // Each limit on its own: an issuer with only a request limit leaves tokens free.
        let issuer = limited(Some(60), None);
        let mixed = limits_for(&issuer, None, Some(5));
        assert_eq!((mixed.rpm, mixed.tpm), (Some(60), Some(5)));
    }
}
