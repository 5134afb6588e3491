//! How a revocation runs, written once for every backend: the target is read, a revoker
//! narrower than it is refused, the target is marked revoked and (unless kept) every token it
//! issued, transitively, with one audit event each, all in the caller's transaction. A token
//! minted by a token that is later revoked would otherwise live on and could mint again.

use std::future::Future;

use uuid::Uuid;

use super::agent_moves::AgentStatements;
use super::{AuditEntry, Revocation, Revoked, StoreError, TokenMetadata};

/// The statements a revocation needs, on a connection inside an org-scoped transaction.
pub(super) trait RevocationStatements: AgentStatements {
    /// The token, if visible in `org_id`.
    fn token(
        &mut self,
        org_id: Uuid,
        token_id: Uuid,
    ) -> impl Future<Output = Result<Option<TokenMetadata>, StoreError>> + Send;

    /// Marks it revoked, keeping the first revocation time, and returns it.
    fn mark_revoked(
        &mut self,
        org_id: Uuid,
        token_id: Uuid,
    ) -> impl Future<Output = Result<TokenMetadata, StoreError>> + Send;

    /// Revokes every token `token_id` issued, transitively, that is not revoked yet; their ids.
    fn revoke_issued(
        &mut self,
        org_id: Uuid,
        token_id: Uuid,
    ) -> impl Future<Output = Result<Vec<Uuid>, StoreError>> + Send;
}

/// [`Store::revoke`](super::Store::revoke) on one connection.
pub(super) async fn revoke<C: RevocationStatements>(
    conn: &mut C,
    org_id: Uuid,
    revocation: Revocation,
    audit: Option<AuditEntry>,
) -> Result<Option<Revoked>, StoreError> {
    let Some(target) = conn.token(org_id, revocation.token_id).await? else {
        return Ok(None);
    };
    if let Some(revoker) = revocation.revoker
        && !revoker.contains(target.permissions)
    {
        return Err(StoreError::Forbidden(
            "the token holds permissions the caller lacks",
        ));
    }
    let token = conn.mark_revoked(org_id, revocation.token_id).await?;
    let issued = if revocation.keep_issued {
        Vec::new()
    } else {
        conn.revoke_issued(org_id, revocation.token_id).await?
    };
    if let Some(audit) = audit {
        let audit = if revocation.keep_issued {
            audit.detail("keep_issued", "true")
        } else {
            audit
        };
        for child in &issued {
            let event = audit
                .about(child)
                .detail("revoked_with", revocation.token_id.to_string());
            conn.insert_audit(org_id, &event).await?;
        }
        conn.insert_audit(org_id, &audit).await?;
    }
    Ok(Some(Revoked { token, issued }))
}
