//! How an agent's status moves, written once for every backend: the row is read under the
//! transaction's lock, the move checked (archived is final), the row updated only when the
//! status changes, and the act recorded with its `from` and `to`, all in the caller's
//! transaction. Each backend supplies the statements.

use std::future::Future;

use uuid::Uuid;

use super::{AgentDetail, AgentStatus, AuditEntry, StoreError};

/// The statements a status move needs, on a connection inside an org-scoped transaction.
pub(super) trait AgentStatements: Send {
    /// The agent; `lock` holds its row until the transaction ends.
    fn agent_detail(
        &mut self,
        org_id: Uuid,
        agent_id: Uuid,
        lock: bool,
    ) -> impl Future<Output = Result<Option<AgentDetail>, StoreError>> + Send;

    /// Sets the status, the reason and the change time.
    fn update_agent_status(
        &mut self,
        org_id: Uuid,
        agent_id: Uuid,
        status: AgentStatus,
        reason: Option<&str>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Replaces the tool grants (stored as [`agent_tools::join`](super::agent_tools::join)
    /// makes them) and sets the change time.
    fn update_agent_tools(
        &mut self,
        org_id: Uuid,
        agent_id: Uuid,
        tools: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Writes one audit event.
    fn insert_audit(
        &mut self,
        org_id: Uuid,
        audit: &AuditEntry,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Writes `audit` when there is one.
    fn maybe_audit(
        &mut self,
        org_id: Uuid,
        audit: Option<&AuditEntry>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        async move {
            match audit {
                Some(audit) => self.insert_audit(org_id, audit).await,
                None => Ok(()),
            }
        }
    }
}

/// [`Store::set_agent_status`](super::Store::set_agent_status) on one connection.
pub(super) async fn move_agent<C: AgentStatements>(
    conn: &mut C,
    org_id: Uuid,
    agent_id: Uuid,
    to: AgentStatus,
    reason: Option<String>,
    audit: AuditEntry,
) -> Result<Option<AgentDetail>, StoreError> {
    let Some(before) = conn.agent_detail(org_id, agent_id, true).await? else {
        return Ok(None);
    };
    let from = before.agent.status;
    if from.move_to(to)? {
        conn.update_agent_status(org_id, agent_id, to, reason.as_deref())
            .await?;
    }
    let audit = audit
        .detail("from", from.as_str())
        .detail("to", to.as_str());
    conn.insert_audit(org_id, &audit).await?;
    conn.agent_detail(org_id, agent_id, false).await
}

/// [`Store::set_agent_tools`](super::Store::set_agent_tools) on one connection.
pub(super) async fn set_tools<C: AgentStatements>(
    conn: &mut C,
    org_id: Uuid,
    agent_id: Uuid,
    tools: Vec<String>,
    audit: AuditEntry,
) -> Result<Option<AgentDetail>, StoreError> {
    if conn.agent_detail(org_id, agent_id, true).await?.is_none() {
        return Ok(None);
    }
    let joined = super::agent_tools::join(&tools);
    conn.update_agent_tools(org_id, agent_id, &joined).await?;
    conn.insert_audit(org_id, &audit.detail("tools", joined))
        .await?;
    conn.agent_detail(org_id, agent_id, false).await
}

/// A status column as read back; a word outside the four statuses is a query error, never
/// taken for any status.
pub(super) fn stored_status(word: Option<String>) -> Result<Option<AgentStatus>, StoreError> {
    word.map(|word| word.parse().map_err(|e| StoreError::Query(Box::new(e))))
        .transpose()
}
