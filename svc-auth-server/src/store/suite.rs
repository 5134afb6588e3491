//! The behaviour every [`Store`] backend must show, as generic cases.
//!
//! A backend's test module calls [`run`] with a factory that makes a fresh store (and a guard
//! that keeps its database alive while a case runs).

use std::future::Future;

use chrono::{Duration, Utc};
use svc_core::permissions::Permissions;
use uuid::Uuid;

use super::{
    AgentStatus, AuditAction, AuditEntry, AuditQuery, BootstrapOrg, Budget, BudgetPeriod,
    BudgetTarget, Cursor, MembershipRole, NewAgent, NewToken, NewUser, Reference, Store,
    StoreError, TokenLimits,
};

/// Runs every case, each on a fresh store from `new_store`.
pub(crate) async fn run<S, G, F, Fut>(mut new_store: F)
where
    S: Store,
    F: FnMut() -> Fut,
    Fut: Future<Output = (S, G)>,
{
    macro_rules! case {
        ($name:ident) => {{
            let (store, guard) = new_store().await;
            $name(&store).await;
            drop(guard);
        }};
    }
    case!(ping_answers);
    case!(organizations_are_created_once);
    case!(agents_are_scoped_to_their_org);
    case!(every_agent_status_round_trips);
    case!(duplicate_ids_are_conflicts);
    case!(users_are_members_of_their_org_only);
    case!(tokens_round_trip_with_their_hash);
    case!(token_references_must_be_in_the_org);
    case!(revocation_is_scoped_and_idempotent);
    case!(listing_pages_in_order_within_the_org);
    case!(unknown_tokens_are_none);
    case!(a_tokens_issuer_is_recorded_and_listed);
    case!(the_token_read_with_an_agent_looks_in_the_tokens_org);
    case!(a_tokens_limits_are_stored_validated_and_listed);
    case!(agents_move_and_archived_is_final);
    case!(agents_and_users_list_in_pages_within_the_org);
    case!(acts_and_their_audit_events_land_together);
    case!(bootstrap_creates_or_finds_the_org);
    case!(budgets_are_set_replaced_listed_and_deleted_within_the_org);
}

fn audit(action: AuditAction) -> AuditEntry {
    AuditEntry::ok(Some(Uuid::new_v4()), action)
}

async fn agents_move_and_archived_is_final<S: Store>(store: &S) {
    let (org_id, other) = (new_org(store).await, new_org(store).await);
    let agent_id = Uuid::new_v4();
    let created = store
        .create_agent(
            org_id,
            NewAgent {
                agent_id,
                status: AgentStatus::Active,
                name: Some("mover".into()),
            },
            None,
        )
        .await
        .unwrap();
    assert_eq!(created.updated_at, created.agent.created_at);
    let moved = store
        .set_agent_status(
            org_id,
            agent_id,
            AgentStatus::Paused,
            Some("why".into()),
            audit(AuditAction::AgentStatus),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(moved.agent.status, AgentStatus::Paused);
    assert_eq!(moved.status_reason.as_deref(), Some("why"));
    assert!(moved.updated_at >= created.updated_at);
    // Another org sees no such agent, and moves nothing.
    let elsewhere = store
        .set_agent_status(
            other,
            agent_id,
            AgentStatus::Active,
            None,
            audit(AuditAction::AgentStatus),
        )
        .await
        .unwrap();
    assert!(elsewhere.is_none());
    assert!(store.agent_detail(other, agent_id).await.unwrap().is_none());
    store
        .set_agent_status(
            org_id,
            agent_id,
            AgentStatus::Archived,
            None,
            audit(AuditAction::AgentStatus),
        )
        .await
        .unwrap();
    let refused = store
        .set_agent_status(
            org_id,
            agent_id,
            AgentStatus::Active,
            None,
            audit(AuditAction::AgentStatus),
        )
        .await
        .expect_err("archived is final");
    assert!(
        matches!(refused, StoreError::Precondition(_)),
        "{refused:?}"
    );
    let detail = store.agent_detail(org_id, agent_id).await.unwrap().unwrap();
    assert_eq!(detail.agent.status, AgentStatus::Archived);
    // Two moves landed with their events; the refused one left none.
    let query = AuditQuery {
        start: None,
        end: None,
        action: Some(AuditAction::AgentStatus),
        before: None,
        limit: 10,
    };
    let events = store.audit_events(org_id, &query).await.unwrap();
    let moves: Vec<(&str, &str)> = events
        .iter()
        .map(|e| (e.detail["from"].as_str(), e.detail["to"].as_str()))
        .collect();
    assert_eq!(moves, [("paused", "archived"), ("active", "paused")]);
    assert!(store.audit_events(other, &query).await.unwrap().is_empty());
}

async fn agents_and_users_list_in_pages_within_the_org<S: Store>(store: &S) {
    let (org_id, other) = (new_org(store).await, new_org(store).await);
    for (org, status) in [
        (org_id, AgentStatus::Active),
        (other, AgentStatus::Active),
        (org_id, AgentStatus::Paused),
        (org_id, AgentStatus::Active),
    ] {
        let agent = NewAgent {
            agent_id: Uuid::new_v4(),
            status,
            name: None,
        };
        store.create_agent(org, agent, None).await.unwrap();
        let user = NewUser {
            user_id: Uuid::new_v4(),
            display_name: Some("someone".into()),
            role: MembershipRole::Member,
        };
        store.create_user(org, user, None).await.unwrap();
    }
    let first = store.list_agents(org_id, None, None, 2).await.unwrap();
    assert_eq!(first.len(), 2);
    let rest = store
        .list_agents(org_id, None, Some(first[1].cursor()), 10)
        .await
        .unwrap();
    assert_eq!(rest.len(), 1);
    assert!(first.iter().chain(&rest).all(|a| a.agent.org_id == org_id));
    let paused = store
        .list_agents(org_id, Some(AgentStatus::Paused), None, 10)
        .await
        .unwrap();
    assert_eq!(paused.len(), 1);
    let users = store.list_users(org_id, None, 10).await.unwrap();
    assert_eq!(users.len(), 3);
    assert!(users.iter().all(|u| u.name.as_deref() == Some("someone")));
    let after = store
        .list_users(org_id, Some(users[0].cursor()), 10)
        .await
        .unwrap();
    assert_eq!(after.len(), 2);
}

async fn acts_and_their_audit_events_land_together<S: Store>(store: &S) {
    let org_id = new_org(store).await;
    let token = token(None, None);
    let token_id = token.token_id;
    let entry = audit(AuditAction::TokenCreate)
        .target(token_id)
        .detail("permissions", "1");
    store
        .create_token(org_id, token.clone(), Some(entry.clone()))
        .await
        .unwrap();
    // A duplicate fails, and so its event is not written either.
    let again = store
        .create_token(org_id, token, Some(audit(AuditAction::TokenCreate)))
        .await;
    assert!(again.is_err());
    // A revocation of an unknown token writes nothing.
    let unknown = store
        .revoke_token(
            org_id,
            Uuid::new_v4(),
            Some(audit(AuditAction::TokenRevoke)),
        )
        .await
        .unwrap();
    assert!(unknown.is_none());
    let denied = AuditEntry::denied(Uuid::new_v4(), AuditAction::AgentCreate);
    store.record_audit(org_id, denied.clone()).await.unwrap();

    let query = AuditQuery {
        start: None,
        end: None,
        action: None,
        before: None,
        limit: 10,
    };
    let events = store.audit_events(org_id, &query).await.unwrap();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0].event_id, denied.event_id);
    assert_eq!(events[0].outcome, "denied");
    assert_eq!(events[1].event_id, entry.event_id);
    assert_eq!(events[1].action, "token.create");
    assert_eq!(events[1].target_id, Some(token_id.to_string()));
    assert_eq!(
        events[1].detail.get("permissions").map(String::as_str),
        Some("1")
    );
    let older = AuditQuery {
        before: Some(events[0].cursor()),
        ..query
    };
    let page = store.audit_events(org_id, &older).await.unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0].event_id, entry.event_id);
}

async fn bootstrap_creates_or_finds_the_org<S: Store>(store: &S) {
    let org_id = Uuid::new_v4();
    let new = BootstrapOrg::New {
        org_id,
        name: "Acme".into(),
    };
    let (org, admin) = store
        .bootstrap(
            new.clone(),
            token(None, None),
            audit(AuditAction::OrgBootstrap),
        )
        .await
        .unwrap()
        .expect("created");
    assert_eq!(org.name.as_deref(), Some("Acme"));
    assert_eq!(admin.org_id, org_id);
    let taken = store
        .bootstrap(new, token(None, None), audit(AuditAction::OrgBootstrap))
        .await;
    assert!(
        matches!(taken, Err(StoreError::AlreadyExists(_))),
        "{taken:?}"
    );
    let found = store
        .bootstrap(
            BootstrapOrg::Existing(org_id),
            token(None, None),
            audit(AuditAction::OrgBootstrap),
        )
        .await
        .unwrap();
    assert!(found.is_some());
    let missing = store
        .bootstrap(
            BootstrapOrg::Existing(Uuid::new_v4()),
            token(None, None),
            audit(AuditAction::OrgBootstrap),
        )
        .await
        .unwrap();
    assert!(missing.is_none());
    let query = AuditQuery {
        start: None,
        end: None,
        action: Some(AuditAction::OrgBootstrap),
        before: None,
        limit: 10,
    };
    assert_eq!(store.audit_events(org_id, &query).await.unwrap().len(), 2);
}

async fn new_org<S: Store>(store: &S) -> Uuid {
    let org_id = Uuid::new_v4();
    store.ensure_organization(org_id).await.unwrap();
    org_id
}

async fn new_agent<S: Store>(store: &S, org_id: Uuid, status: AgentStatus) -> Uuid {
    let agent_id = Uuid::new_v4();
    store
        .create_agent(
            org_id,
            NewAgent {
                agent_id,
                status,
                name: Some("agent".into()),
            },
            None,
        )
        .await
        .unwrap();
    agent_id
}

async fn new_user<S: Store>(store: &S, org_id: Uuid) -> Uuid {
    let user_id = Uuid::new_v4();
    store
        .create_user(
            org_id,
            NewUser {
                user_id,
                display_name: None,
                role: MembershipRole::Member,
            },
            None,
        )
        .await
        .unwrap();
    user_id
}

fn token(user_id: Option<Uuid>, agent_id: Option<Uuid>) -> NewToken {
    NewToken {
        token_id: Uuid::new_v4(),
        user_id,
        agent_id,
        permissions: Permissions::CHAT_COMPLETIONS | Permissions::from_bits(1 << 40),
        name: Some("ci".into()),
        secret_hash: format!("$argon2id$v=19$m=8,t=1,p=1${}", Uuid::new_v4().simple()),
        expires_at: Some(Utc::now() + Duration::hours(1)),
        issuer_token_id: None,
        limits: Default::default(),
    }
}

async fn ping_answers<S: Store>(store: &S) {
    store.ping().await.unwrap();
}

async fn organizations_are_created_once<S: Store>(store: &S) {
    let org_id = Uuid::new_v4();
    let first = store.ensure_organization(org_id).await.unwrap();
    let second = store.ensure_organization(org_id).await.unwrap();
    assert_eq!(first.org_id, org_id);
    assert_eq!(first, second);
}

async fn agents_are_scoped_to_their_org<S: Store>(store: &S) {
    let (a, b) = (new_org(store).await, new_org(store).await);
    let agent_id = new_agent(store, a, AgentStatus::Active).await;

    let found = store.agent(a, agent_id).await.unwrap().unwrap();
    assert_eq!(found.agent_id, agent_id);
    assert_eq!(found.org_id, a);
    assert_eq!(found.status, AgentStatus::Active);
    assert_eq!(found.name.as_deref(), Some("agent"));

    assert!(store.agent(b, agent_id).await.unwrap().is_none());
    assert!(store.agent(a, Uuid::new_v4()).await.unwrap().is_none());
}

async fn every_agent_status_round_trips<S: Store>(store: &S) {
    let org_id = new_org(store).await;
    for status in AgentStatus::ALL {
        let agent_id = new_agent(store, org_id, status).await;
        let found = store.agent(org_id, agent_id).await.unwrap().unwrap();
        assert_eq!(found.status, status);
    }
}

async fn duplicate_ids_are_conflicts<S: Store>(store: &S) {
    let org_id = new_org(store).await;
    let agent_id = new_agent(store, org_id, AgentStatus::Active).await;
    let again = store
        .create_agent(
            org_id,
            NewAgent {
                agent_id,
                status: AgentStatus::Active,
                name: None,
            },
            None,
        )
        .await;
    assert!(matches!(again, Err(StoreError::AlreadyExists("agent"))));

    let new = token(None, None);
    store.create_token(org_id, new.clone(), None).await.unwrap();
    let again = store.create_token(org_id, new, None).await;
    assert!(matches!(again, Err(StoreError::AlreadyExists("token"))));
}

async fn users_are_members_of_their_org_only<S: Store>(store: &S) {
    let (a, b) = (new_org(store).await, new_org(store).await);
    let user_id = new_user(store, a).await;
    assert!(store.is_member(a, user_id).await.unwrap());
    assert!(!store.is_member(b, user_id).await.unwrap());
    assert!(!store.is_member(a, Uuid::new_v4()).await.unwrap());
}

async fn tokens_round_trip_with_their_hash<S: Store>(store: &S) {
    let org_id = new_org(store).await;
    let user_id = new_user(store, org_id).await;
    let agent_id = new_agent(store, org_id, AgentStatus::Active).await;
    let new = token(Some(user_id), Some(agent_id));

    let created = store.create_token(org_id, new.clone(), None).await.unwrap();
    assert_eq!(created.token_id, new.token_id);
    assert_eq!(created.org_id, org_id);
    assert_eq!(created.user_id, Some(user_id));
    assert_eq!(created.agent_id, Some(agent_id));
    assert_eq!(created.permissions, new.permissions);
    assert_eq!(created.name.as_deref(), Some("ci"));
    assert!(created.revoked_at.is_none());
    let expires_at = new.expires_at.unwrap();
    let stored_expiry = created.expires_at.unwrap();
    assert!((stored_expiry - expires_at).num_milliseconds().abs() < 1);

    let record = store
        .token_for_validation(new.token_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.token_id, new.token_id);
    assert_eq!(record.org_id, org_id);
    assert_eq!(record.user_id, Some(user_id));
    assert_eq!(record.agent_id, Some(agent_id));
    assert_eq!(record.permissions, new.permissions);
    assert_eq!(record.secret_hash, new.secret_hash);
    assert_eq!(record.expires_at, created.expires_at);
    assert!(record.revoked_at.is_none());
    assert!(!format!("{record:?}").contains(&new.secret_hash));
}

async fn token_references_must_be_in_the_org<S: Store>(store: &S) {
    let (a, b) = (new_org(store).await, new_org(store).await);
    let foreign_agent = new_agent(store, b, AgentStatus::Active).await;
    let foreign_user = new_user(store, b).await;

    let cases = [
        (token(None, Some(foreign_agent)), Reference::Agent),
        (token(None, Some(Uuid::new_v4())), Reference::Agent),
        (token(Some(foreign_user), None), Reference::User),
        (token(Some(Uuid::new_v4()), None), Reference::User),
    ];
    for (new, reference) in cases {
        let token_id = new.token_id;
        match store.create_token(a, new, None).await {
            Err(StoreError::NotInOrg(got)) => assert_eq!(got, reference),
            other => panic!("expected NotInOrg({reference}), got {other:?}"),
        }
        assert!(
            store
                .token_for_validation(token_id)
                .await
                .unwrap()
                .is_none()
        );
    }
}

async fn revocation_is_scoped_and_idempotent<S: Store>(store: &S) {
    let (a, b) = (new_org(store).await, new_org(store).await);
    let new = token(None, None);
    let token_id = new.token_id;
    store.create_token(a, new, None).await.unwrap();

    assert!(
        store
            .revoke_token(b, token_id, None)
            .await
            .unwrap()
            .is_none()
    );
    let record = store.token_for_validation(token_id).await.unwrap().unwrap();
    assert!(record.revoked_at.is_none(), "another org revoked it");

    let first = store
        .revoke_token(a, token_id, None)
        .await
        .unwrap()
        .unwrap();
    let revoked_at = first.revoked_at.expect("revoked_at set");
    let second = store
        .revoke_token(a, token_id, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(second.revoked_at, Some(revoked_at));

    let record = store.token_for_validation(token_id).await.unwrap().unwrap();
    assert_eq!(record.revoked_at, Some(revoked_at));
    assert!(
        store
            .revoke_token(a, Uuid::new_v4(), None)
            .await
            .unwrap()
            .is_none()
    );
}

async fn listing_pages_in_order_within_the_org<S: Store>(store: &S) {
    let (a, b) = (new_org(store).await, new_org(store).await);
    let mut created = Vec::new();
    for _ in 0..5 {
        created.push(
            store
                .create_token(a, token(None, None), None)
                .await
                .unwrap(),
        );
    }
    for _ in 0..2 {
        store
            .create_token(b, token(None, None), None)
            .await
            .unwrap();
    }
    created.sort_by_key(|t| (t.created_at, t.token_id));

    let mut seen = Vec::new();
    let mut after: Option<Cursor> = None;
    loop {
        let page = store.list_tokens(a, after, 2).await.unwrap();
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        after = Some(last.cursor());
        seen.extend(page);
    }
    assert_eq!(seen, created);
    assert!(seen.iter().all(|t| t.org_id == a));

    let other = store.list_tokens(b, None, 100).await.unwrap();
    assert_eq!(other.len(), 2);
    assert!(other.iter().all(|t| t.org_id == b));

    let empty = store
        .list_tokens(new_org(store).await, None, 10)
        .await
        .unwrap();
    assert!(empty.is_empty());
}

async fn unknown_tokens_are_none<S: Store>(store: &S) {
    assert!(
        store
            .token_for_validation(Uuid::new_v4())
            .await
            .unwrap()
            .is_none()
    );
}

async fn a_tokens_issuer_is_recorded_and_listed<S: Store>(store: &S) {
    let org_id = new_org(store).await;
    let admin = store
        .create_token(org_id, token(None, None), None)
        .await
        .unwrap();
    assert_eq!(admin.issuer_token_id, None);
    let child = NewToken {
        issuer_token_id: Some(admin.token_id),
        ..token(None, None)
    };
    let created = store.create_token(org_id, child, None).await.unwrap();
    assert_eq!(created.issuer_token_id, Some(admin.token_id));

    let listed = store.list_tokens(org_id, None, 10).await.unwrap();
    let issuers: Vec<_> = listed
        .iter()
        .map(|t| (t.token_id, t.issuer_token_id))
        .collect();
    assert!(issuers.contains(&(admin.token_id, None)), "{issuers:?}");
    assert!(
        issuers.contains(&(created.token_id, Some(admin.token_id))),
        "{issuers:?}"
    );
    let revoked = store
        .revoke_token(org_id, created.token_id, None)
        .await
        .unwrap();
    assert_eq!(revoked.unwrap().issuer_token_id, Some(admin.token_id));
}

async fn the_token_read_with_an_agent_looks_in_the_tokens_org<S: Store>(store: &S) {
    let org_id = new_org(store).await;
    let other_org = new_org(store).await;
    let active = new_agent(store, org_id, AgentStatus::Active).await;
    let paused = new_agent(store, org_id, AgentStatus::Paused).await;
    let foreign = new_agent(store, other_org, AgentStatus::Active).await;
    let new = token(None, None);
    store.create_token(org_id, new.clone(), None).await.unwrap();

    let (record, agent) = store
        .token_with_agent(new.token_id, active)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.token_id, new.token_id);
    assert_eq!(record.secret_hash, new.secret_hash);
    let agent = agent.unwrap();
    assert_eq!((agent.agent_id, agent.org_id), (active, org_id));
    assert_eq!(agent.status, AgentStatus::Active);

    let (_, agent) = store
        .token_with_agent(new.token_id, paused)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(agent.unwrap().status, AgentStatus::Paused);
    // Another org's agent, and no agent at all, are both absent for this token.
    for agent_id in [foreign, Uuid::new_v4()] {
        let (record, agent) = store
            .token_with_agent(new.token_id, agent_id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(record.org_id, org_id);
        assert!(agent.is_none(), "{agent_id}");
    }
    assert!(
        store
            .token_with_agent(Uuid::new_v4(), active)
            .await
            .unwrap()
            .is_none()
    );
}

async fn a_tokens_limits_are_stored_validated_and_listed<S: Store>(store: &S) {
    let org_id = new_org(store).await;
    let limits = TokenLimits {
        rpm: Some(30),
        tpm: Some(u64::from(u32::MAX) + 1),
    };
    let limited = NewToken {
        limits,
        ..token(None, None)
    };
    let created = store.create_token(org_id, limited, None).await.unwrap();
    assert_eq!(created.limits, limits);
    let unlimited = store
        .create_token(org_id, token(None, None), None)
        .await
        .unwrap();
    assert_eq!(unlimited.limits, TokenLimits::default());
    let record = store.token_for_validation(created.token_id).await.unwrap();
    assert_eq!(record.unwrap().limits, limits);
    let listed = store.list_tokens(org_id, None, 10).await.unwrap();
    assert!(
        listed
            .iter()
            .any(|t| t.token_id == created.token_id && t.limits == limits)
    );
}

async fn budgets_are_set_replaced_listed_and_deleted_within_the_org<S: Store>(store: &S) {
    let (org_id, other) = (new_org(store).await, new_org(store).await);
    let agent_id = new_agent(store, org_id, AgentStatus::Active).await;
    let foreign_agent = new_agent(store, other, AgentStatus::Active).await;
    let token = token(None, None);
    let token_id = token.token_id;
    store.create_token(org_id, token, None).await.unwrap();
    let budget = |target, limit, period| Budget {
        target,
        limit_usd_micros: limit,
        period,
    };
    let set = |b: Budget| store.set_budget(org_id, b, audit(AuditAction::BudgetSet));

    let org = budget(BudgetTarget::Org, 5_000_000, BudgetPeriod::Month);
    assert_eq!(set(org).await.unwrap(), org);
    set(budget(
        BudgetTarget::Agent(agent_id),
        1_000,
        BudgetPeriod::Day,
    ))
    .await
    .unwrap();
    let replaced = budget(BudgetTarget::Agent(agent_id), 2_000, BudgetPeriod::Week);
    set(replaced).await.unwrap();
    let on_token = budget(BudgetTarget::Token(token_id), 0, BudgetPeriod::Total);
    set(on_token).await.unwrap();

    // Another org's agent, another org's token and an unknown token are not in the org.
    let foreign = set(budget(
        BudgetTarget::Agent(foreign_agent),
        1,
        BudgetPeriod::Day,
    ))
    .await;
    assert!(
        matches!(foreign, Err(StoreError::NotInOrg(Reference::Agent))),
        "{foreign:?}"
    );
    let unknown = set(budget(
        BudgetTarget::Token(Uuid::new_v4()),
        1,
        BudgetPeriod::Day,
    ))
    .await;
    assert!(
        matches!(unknown, Err(StoreError::NotInOrg(Reference::Token))),
        "{unknown:?}"
    );

    let now = Utc::now();
    let listed = store.list_budgets(org_id, now).await.unwrap();
    let budgets: Vec<Budget> = listed.iter().map(|b| b.budget).collect();
    assert_eq!(budgets.len(), 3, "{listed:?}");
    assert_eq!(budgets[0], org, "the org's first");
    assert!(
        budgets.contains(&replaced) && budgets.contains(&on_token),
        "{budgets:?}"
    );
    assert!(listed.iter().all(|b| b.spent_usd_micros == 0));
    assert!(store.list_budgets(other, now).await.unwrap().is_empty());

    // A validation read carries the budgets a call draws on: the org's, the token's and the
    // agent's it acts as.
    let (record, _) = store
        .token_with_agent(token_id, agent_id)
        .await
        .unwrap()
        .unwrap();
    let mut read = record.budgets.clone();
    read.sort_by_key(|b| b.target.scope());
    assert_eq!(read, vec![replaced, org, on_token]);
    let record = store.token_for_validation(token_id).await.unwrap().unwrap();
    assert_eq!(record.budgets.len(), 2, "no agent: {:?}", record.budgets);
    let spend = store.budget_spend(org_id, read, now).await.unwrap();
    assert!(spend.iter().all(|b| b.spent_usd_micros == 0));

    let delete = |target| store.delete_budget(org_id, target, audit(AuditAction::BudgetDelete));
    assert!(delete(BudgetTarget::Agent(agent_id)).await.unwrap());
    assert!(
        !delete(BudgetTarget::Agent(agent_id)).await.unwrap(),
        "gone already"
    );
    // Another org deletes nothing of this one.
    let theirs = store
        .delete_budget(
            other,
            BudgetTarget::Token(token_id),
            audit(AuditAction::BudgetDelete),
        )
        .await
        .unwrap();
    assert!(!theirs);
    assert_eq!(store.list_budgets(org_id, now).await.unwrap().len(), 2);

    // Four sets and one delete were recorded; the refused and empty acts wrote nothing.
    let query = AuditQuery {
        start: None,
        end: None,
        action: None,
        before: None,
        limit: 20,
    };
    let events = store.audit_events(org_id, &query).await.unwrap();
    let actions: Vec<&str> = events.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(
        actions,
        [
            "budget.delete",
            "budget.set",
            "budget.set",
            "budget.set",
            "budget.set"
        ]
    );
    assert_eq!(
        events[0].detail.get("scope").map(String::as_str),
        Some("agent")
    );
    assert_eq!(
        events[1].detail.get("period").map(String::as_str),
        Some("total")
    );
}
