//! Who may call what: each administrative RPC's permission, and the audit action under which
//! its grants and refusals are recorded.

use svc_core::permissions::Permissions;
use tonic::Status;
use uuid::Uuid;

use super::convert::parse_id;
use crate::store::AuditAction;
use crate::verify::ValidToken;

/// An administrative RPC as the access check sees it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Op {
    /// The RPC's name, for logs.
    pub(super) name: &'static str,
    /// The permission it needs.
    pub(super) needed: Permissions,
    /// That permission's name, for the refusal.
    pub(super) needed_name: &'static str,
    /// The audit action it is recorded as; reads are not recorded.
    pub(super) action: Option<AuditAction>,
}

impl Op {
    /// A read: checked, never recorded.
    pub(super) const fn read(
        name: &'static str,
        needed: Permissions,
        needed_name: &'static str,
    ) -> Op {
        Op {
            name,
            needed,
            needed_name,
            action: None,
        }
    }

    /// An act: recorded in the audit trail whether it is carried out or refused.
    pub(super) const fn act(
        name: &'static str,
        needed: Permissions,
        needed_name: &'static str,
        action: AuditAction,
    ) -> Op {
        Op {
            name,
            needed,
            needed_name,
            action: Some(action),
        }
    }
}

/// The org a request names: empty means the caller's; another org is PermissionDenied, never
/// answered as if it were empty.
pub(super) fn own_org(caller: &ValidToken, org_id: &str) -> Result<Uuid, Status> {
    if org_id.is_empty() || parse_id("org_id", org_id)? == caller.org_id {
        Ok(caller.org_id)
    } else {
        Err(Status::permission_denied("org_id is not the caller's org"))
    }
}
