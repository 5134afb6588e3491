//! What a new token may point at: an agent of its own org that is not archived, a member of
//! its own org.
//!
//! Each backend answers the two lookups with its own SQL (each naming `org_id`); the rule that
//! combines them, and the error each failure gives, live here once.

use std::future::Future;

use uuid::Uuid;

use super::{AgentStatus, NewToken, Reference, StoreError};

/// The lookups a token's references are checked with, on a connection already scoped to the
/// org (inside its transaction).
pub(super) trait ReferenceLookups {
    /// The status of `agent_id` if it is an agent of `org_id`.
    fn agent_in_org(
        &mut self,
        org_id: Uuid,
        agent_id: Uuid,
    ) -> impl Future<Output = Result<Option<AgentStatus>, StoreError>> + Send;

    /// Whether `user_id` is a member of `org_id`.
    fn user_in_org(
        &mut self,
        org_id: Uuid,
        user_id: Uuid,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;
}

/// Refuses a token whose agent or user is not in `org_id`, saying which; the agent is checked
/// first. Checked before the insert so the caller learns which reference is foreign: the
/// schema's keys would refuse the row too, without saying which. An id unknown everywhere and an
/// id of another org give the same answer, so existence in other orgs is not revealed. An
/// archived agent is retired for good: no new token may act as it.
pub(super) async fn check_token_references<C: ReferenceLookups>(
    conn: &mut C,
    org_id: Uuid,
    token: &NewToken,
) -> Result<(), StoreError> {
    if let Some(agent_id) = token.agent_id {
        match conn.agent_in_org(org_id, agent_id).await? {
            None => return Err(StoreError::NotInOrg(Reference::Agent)),
            Some(AgentStatus::Archived) => {
                return Err(StoreError::Precondition("the agent is archived"));
            }
            Some(_) => {}
        }
    }
    if let Some(user_id) = token.user_id
        && !conn.user_in_org(org_id, user_id).await?
    {
        return Err(StoreError::NotInOrg(Reference::User));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use svc_core::permissions::Permissions;

    use super::*;

    /// Answers from fixed sets and records what it was asked.
    #[derive(Default)]
    struct Lookups {
        agents: Vec<(Uuid, Uuid)>,
        members: Vec<(Uuid, Uuid)>,
        asked: Vec<Reference>,
    }

    impl ReferenceLookups for Lookups {
        async fn agent_in_org(
            &mut self,
            org_id: Uuid,
            agent_id: Uuid,
        ) -> Result<Option<AgentStatus>, StoreError> {
            self.asked.push(Reference::Agent);
            Ok(self
                .agents
                .contains(&(org_id, agent_id))
                .then_some(AgentStatus::Active))
        }

        async fn user_in_org(&mut self, org_id: Uuid, user_id: Uuid) -> Result<bool, StoreError> {
            self.asked.push(Reference::User);
            Ok(self.members.contains(&(org_id, user_id)))
        }
    }

    fn token(user_id: Option<Uuid>, agent_id: Option<Uuid>) -> NewToken {
        NewToken {
            token_id: Uuid::new_v4(),
            user_id,
            agent_id,
            permissions: Permissions::CHAT_COMPLETIONS,
            name: None,
            secret_hash: "$argon2id$placeholder".into(),
            expires_at: None,
            issuer_token_id: None,
            limits: Default::default(),
        }
    }

    #[tokio::test]
    async fn a_token_without_references_needs_no_lookup() {
        let mut lookups = Lookups::default();
        check_token_references(&mut lookups, Uuid::new_v4(), &token(None, None))
            .await
            .unwrap();
        assert!(lookups.asked.is_empty());
    }

    #[tokio::test]
    async fn references_in_the_org_pass() {
        let (org, agent, user) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let mut lookups = Lookups {
            agents: vec![(org, agent)],
            members: vec![(org, user)],
            ..Lookups::default()
        };
        check_token_references(&mut lookups, org, &token(Some(user), Some(agent)))
            .await
            .unwrap();
        assert_eq!(lookups.asked, [Reference::Agent, Reference::User]);
    }

    #[tokio::test]
    async fn a_foreign_agent_is_named_before_the_user_is_looked_up() {
        let (org, other, agent) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let mut lookups = Lookups {
            agents: vec![(other, agent)],
            ..Lookups::default()
        };
        let error =
            check_token_references(&mut lookups, org, &token(Some(Uuid::new_v4()), Some(agent)))
                .await
                .expect_err("foreign agent");
        assert!(
            matches!(error, StoreError::NotInOrg(Reference::Agent)),
            "{error:?}"
        );
        assert_eq!(lookups.asked, [Reference::Agent]);
    }

    #[tokio::test]
    async fn a_user_of_another_org_is_named() {
        let (org, other, user) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let mut lookups = Lookups {
            members: vec![(other, user)],
            ..Lookups::default()
        };
        let error = check_token_references(&mut lookups, org, &token(Some(user), None))
            .await
            .expect_err("foreign user");
        assert!(
            matches!(error, StoreError::NotInOrg(Reference::User)),
            "{error:?}"
        );
    }
}
