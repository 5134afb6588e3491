//! What a new token inherits from the token that issues it: never more time, never another
//! agent.
//!
//! Permissions are checked where the request is read (a subset of the issuer's); this module
//! decides expiry and agent binding. An admin token that expires in five minutes, or is bound
//! to one agent, would otherwise mint a permanent, unbound token and outlive its own limits.

use chrono::{DateTime, Utc};
use tonic::Status;
use uuid::Uuid;

use crate::verify::ValidToken;

/// The expiry and agent binding a new token gets, given its issuer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Scope {
    pub(crate) agent_id: Option<Uuid>,
    pub(crate) expires_at: Option<DateTime<Utc>>,
}

/// Clamps a requested expiry to the issuer's (no expiry, or a later one, becomes the issuer's)
/// and binds the token to the issuer's agent. Asking for another agent than the issuer's is
/// PermissionDenied rather than silently rebound: the caller would get a token for an agent it
/// did not name.
pub(crate) fn within_issuer(
    issuer: &ValidToken,
    agent_id: Option<Uuid>,
    expires_at: Option<DateTime<Utc>>,
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
    let expires_at = match (issuer.expires_at, expires_at) {
        (Some(limit), Some(asked)) => Some(asked.min(limit)),
        (Some(limit), None) => Some(limit),
        (None, asked) => asked,
    };
    Ok(Scope {
        agent_id,
        expires_at,
    })
}

#[cfg(test)]
mod tests {
    use chrono::Duration;
    use svc_tower::context::Permissions;

    use super::*;

    fn issuer(agent_id: Option<Uuid>, expires_at: Option<DateTime<Utc>>) -> ValidToken {
        ValidToken {
            token_id: Uuid::new_v4(),
            org_id: Uuid::new_v4(),
            permissions: Permissions::TOKEN_CREATE,
            user_id: None,
            agent_id,
            expires_at,
        }
    }

    #[test]
    fn an_unbounded_issuer_passes_the_request_through() {
        let (agent, at) = (Uuid::new_v4(), Utc::now() + Duration::days(1));
        let scope = within_issuer(&issuer(None, None), Some(agent), Some(at)).unwrap();
        assert_eq!(scope.agent_id, Some(agent));
        assert_eq!(scope.expires_at, Some(at));
        let scope = within_issuer(&issuer(None, None), None, None).unwrap();
        assert_eq!(scope.agent_id, None);
        assert_eq!(scope.expires_at, None);
    }

    #[test]
    fn expiry_is_clamped_to_the_issuers() {
        let limit = Utc::now() + Duration::minutes(5);
        let admin = issuer(None, Some(limit));
        for asked in [None, Some(limit + Duration::days(365))] {
            let scope = within_issuer(&admin, None, asked).unwrap();
            assert_eq!(scope.expires_at, Some(limit));
        }
        let sooner = limit - Duration::minutes(1);
        let scope = within_issuer(&admin, None, Some(sooner)).unwrap();
        assert_eq!(scope.expires_at, Some(sooner));
    }

    #[test]
    fn the_agent_binding_is_inherited_and_another_agent_is_denied() {
        let bound = Uuid::new_v4();
        let admin = issuer(Some(bound), None);
        assert_eq!(
            within_issuer(&admin, None, None).unwrap().agent_id,
            Some(bound)
        );
        assert_eq!(
            within_issuer(&admin, Some(bound), None).unwrap().agent_id,
            Some(bound)
        );
        let status = within_issuer(&admin, Some(Uuid::new_v4()), None).unwrap_err();
        assert_eq!(status.code(), tonic::Code::PermissionDenied);
    }
}
