//! Running an org for real, over gRPC on loopback against PostgreSQL: agents and their status,
//! users, tokens bound to them, and the audit trail every administrative act leaves.

use std::collections::HashMap;

use crate::common::*;
use svc_core::permissions::Permissions;
use svc_proto::v1;
use tonic::Code;
use uuid::Uuid;

fn create_agent(name: Option<&str>, status: Option<&str>) -> v1::CreateAgentRequest {
    v1::CreateAgentRequest {
        org_id: String::new(),
        name: name.map(str::to_owned),
        status: status.map(str::to_owned),
    }
}

fn set_status(agent_id: &str, status: &str, reason: Option<&str>) -> v1::SetAgentStatusRequest {
    v1::SetAgentStatusRequest {
        agent_id: agent_id.to_owned(),
        status: status.to_owned(),
        reason: reason.map(str::to_owned),
    }
}

async fn new_agent(h: &mut Harness, admin: &str, name: &str) -> v1::Agent {
    h.client
        .create_agent(bearer(create_agent(Some(name), None), admin))
        .await
        .expect("agent created")
        .into_inner()
}

async fn move_agent(
    h: &mut Harness,
    admin: &str,
    agent_id: &str,
    status: &str,
    reason: Option<&str>,
) -> Result<v1::Agent, tonic::Status> {
    h.client
        .set_agent_status(bearer(set_status(agent_id, status, reason), admin))
        .await
        .map(tonic::Response::into_inner)
}

/// A token of the harness org holding only `permissions`.
async fn token_with(h: &mut Harness, permissions: Permissions) -> String {
    let admin = h.seed.admin_token.clone();
    create_token(
        &mut h.client,
        &admin,
        create_request(h.seed.org_id, permissions.bits()),
    )
    .await
    .expect("token created")
    .token
}

/// Every audit event the token's org holds, newest first.
async fn audit_trail(h: &mut Harness, admin: &str) -> Vec<v1::AuditEvent> {
    let mut events = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = h
            .client
            .list_audit_events(bearer(
                v1::ListAuditEventsRequest {
                    page_size: 3,
                    page_token: page_token.clone(),
                    ..Default::default()
                },
                admin,
            ))
            .await
            .expect("audit events listed")
            .into_inner();
        events.extend(page.events);
        if page.next_page_token.is_empty() {
            return events;
        }
        page_token = page.next_page_token;
    }
}

fn token_id_of(token: &str) -> String {
    svc_auth_server::pat::Pat::parse(token)
        .expect("a PAT")
        .token_id()
        .to_string()
}

#[tokio::test]
async fn agents_are_created_read_listed_and_filtered_in_their_org() {
    let mut h = start().await;
    let admin = h.seed.admin_token.clone();
    let created = new_agent(&mut h, &admin, "billing bot").await;
    assert_eq!(created.org_id, h.seed.org_id.to_string());
    assert_eq!(created.name.as_deref(), Some("billing bot"));
    assert_eq!(created.status, "active");
    assert_eq!(created.created_at, created.updated_at);
    assert_eq!(created.status_reason, None);

    let got = h
        .client
        .get_agent(bearer(
            v1::GetAgentRequest {
                agent_id: created.agent_id.clone(),
            },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got, created);

    // Created paused: the status is taken as given.
    let paused = h
        .client
        .create_agent(bearer(create_agent(None, Some("paused")), &admin))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(paused.status, "paused");
    assert_eq!(paused.name, None);

    // The seed made four agents (one per status); two more here. Pages of two, oldest first.
    let mut seen = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = h
            .client
            .list_agents(bearer(
                v1::ListAgentsRequest {
                    page_size: 2,
                    page_token: page_token.clone(),
                    status: None,
                },
                &admin,
            ))
            .await
            .unwrap()
            .into_inner();
        assert!(page.agents.len() <= 2);
        seen.extend(page.agents.into_iter().map(|a| a.agent_id));
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    assert_eq!(seen.len(), 6, "{seen:?}");
    assert_eq!(seen[4], created.agent_id);
    assert_eq!(seen[5], paused.agent_id);

    let only_paused = h
        .client
        .list_agents(bearer(
            v1::ListAgentsRequest {
                status: Some("paused".into()),
                ..Default::default()
            },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(only_paused.agents.len(), 2, "{only_paused:?}");
    assert!(only_paused.agents.iter().all(|a| a.status == "paused"));
}

#[tokio::test]
async fn the_status_table_holds_and_archived_is_final() {
    let mut h = start().await;
    let admin = h.seed.admin_token.clone();
    let agent = new_agent(&mut h, &admin, "worker").await;
    let id = agent.agent_id.clone();

    // Every status may move to every other, archived excepted.
    let path = [
        "paused",
        "suspended",
        "active",
        "suspended",
        "paused",
        "active",
    ];
    for status in path {
        let moved = move_agent(&mut h, &admin, &id, status, Some("drill"))
            .await
            .unwrap();
        assert_eq!(moved.status, status);
        assert_eq!(moved.status_reason.as_deref(), Some("drill"));
    }

    // The status it has already: a no-op that succeeds and changes nothing.
    let before = move_agent(&mut h, &admin, &id, "paused", Some("runaway loop"))
        .await
        .unwrap();
    let same = move_agent(&mut h, &admin, &id, "paused", Some("again"))
        .await
        .unwrap();
    assert_eq!(same.status, "paused");
    assert_eq!(same.updated_at, before.updated_at);
    assert_eq!(same.status_reason.as_deref(), Some("runaway loop"));

    let archived = move_agent(&mut h, &admin, &id, "archived", None)
        .await
        .unwrap();
    assert_eq!(archived.status, "archived");
    assert_eq!(archived.status_reason, None);
    for status in ["active", "paused", "suspended"] {
        let refused = move_agent(&mut h, &admin, &id, status, None)
            .await
            .expect_err("archived is final");
        assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    }
    let again = move_agent(&mut h, &admin, &id, "archived", None)
        .await
        .unwrap();
    assert_eq!(again.status, "archived");

    // The kill switch as the gateway sees it: ValidateAgent answers each change at once.
    let active = new_agent(&mut h, &admin, "killable").await;
    let validate_agent =
        |agent_id: String, org_id: String| v1::ValidateAgentRequest { agent_id, org_id };
    let org = h.seed.org_id.to_string();
    for (status, passes) in [("paused", false), ("active", true), ("suspended", false)] {
        move_agent(&mut h, &admin, &active.agent_id, status, None)
            .await
            .unwrap();
        let answer = h
            .client
            .validate_agent(validate_agent(active.agent_id.clone(), org.clone()))
            .await;
        match answer {
            Ok(_) => assert!(passes, "{status} passed"),
            Err(status_answer) => {
                assert!(!passes, "{status}: {status_answer:?}");
                assert_eq!(
                    error_reason(&status_answer).as_deref(),
                    Some("AGENT_SUSPENDED")
                );
            }
        }
    }
}

#[tokio::test]
async fn bad_agent_requests_are_invalid_arguments() {
    let mut h = start().await;
    let admin = h.seed.admin_token.clone();
    let agent = new_agent(&mut h, &admin, "ok").await;
    let long_name = "n".repeat(129);
    let refused = h
        .client
        .create_agent(bearer(create_agent(Some(&long_name), None), &admin))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    let edge = h
        .client
        .create_agent(bearer(create_agent(Some(&"n".repeat(128)), None), &admin))
        .await;
    assert!(edge.is_ok(), "{edge:?}");
    let refused = h
        .client
        .create_agent(bearer(create_agent(None, Some("sleeping")), &admin))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    let refused = h
        .client
        .get_agent(bearer(
            v1::GetAgentRequest {
                agent_id: "not-a-uuid".into(),
            },
            &admin,
        ))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(!refused.message().contains("not-a-uuid"));
    for (id, status, reason) in [
        ("nope", "paused", None),
        (agent.agent_id.as_str(), "sleeping", None),
        (agent.agent_id.as_str(), "paused", Some("r".repeat(257))),
    ] {
        let refused = move_agent(&mut h, &admin, id, status, reason.as_deref())
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{id} {status}");
    }
    let refused = h
        .client
        .list_agents(bearer(
            v1::ListAgentsRequest {
                page_token: "garbage".into(),
                ..Default::default()
            },
            &admin,
        ))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
}

#[tokio::test]
async fn another_orgs_agents_and_users_are_permission_denied() {
    let mut h = start().await;
    let other = seed_org(&h.config, None).await;
    let admin = h.seed.admin_token.clone();
    let mine = new_agent(&mut h, &admin, "mine").await;
    let theirs = agent_id(&other, "active").to_string();

    for agent_id in [theirs.clone(), Uuid::new_v4().to_string()] {
        let refused = h
            .client
            .get_agent(bearer(
                v1::GetAgentRequest {
                    agent_id: agent_id.clone(),
                },
                &admin,
            ))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::PermissionDenied, "{agent_id}");
        let refused = move_agent(&mut h, &admin, &agent_id, "paused", None)
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::PermissionDenied, "{agent_id}");
    }
    // The other org's agent did not move.
    let theirs_now = h
        .client
        .get_agent(bearer(
            v1::GetAgentRequest {
                agent_id: theirs.clone(),
            },
            &other.admin_token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(theirs_now.status, "active");

    let elsewhere = |org: Uuid| v1::CreateAgentRequest {
        org_id: org.to_string(),
        name: None,
        status: None,
    };
    let refused = h
        .client
        .create_agent(bearer(elsewhere(other.org_id), &admin))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied);
    let own = h
        .client
        .create_agent(bearer(elsewhere(h.seed.org_id), &admin))
        .await;
    assert!(own.is_ok(), "naming its own org is fine: {own:?}");
    let refused = h
        .client
        .create_user(bearer(
            v1::CreateUserRequest {
                org_id: other.org_id.to_string(),
                name: None,
            },
            &admin,
        ))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied);

    // Another org lists none of ours.
    let listed = h
        .client
        .list_agents(bearer(v1::ListAgentsRequest::default(), &other.admin_token))
        .await
        .unwrap()
        .into_inner();
    assert!(listed.agents.iter().all(|a| a.agent_id != mine.agent_id));
    assert!(
        listed
            .agents
            .iter()
            .all(|a| a.org_id == other.org_id.to_string())
    );
}

#[tokio::test]
async fn each_rpc_needs_its_permission_bit() {
    let mut h = start().await;
    let admin = h.seed.admin_token.clone();
    let agent = new_agent(&mut h, &admin, "target").await;
    // Everything but the bit each call needs.
    let without =
        |bit: Permissions| Permissions::from_bits(Permissions::ALL_KNOWN.bits() & !bit.bits());
    let no_manage = token_with(&mut h, without(Permissions::AGENT_MANAGE)).await;
    let no_read = token_with(&mut h, without(Permissions::AGENT_READ)).await;
    let no_users = token_with(&mut h, without(Permissions::USER_MANAGE)).await;
    let no_audit = token_with(&mut h, without(Permissions::AUDIT_READ)).await;

    let denied = |result: Result<(), tonic::Status>| {
        let status = result.expect_err("denied");
        assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    };
    let c = &mut h.client;
    denied(
        c.create_agent(bearer(create_agent(None, None), &no_manage))
            .await
            .map(drop),
    );
    denied(
        c.set_agent_status(bearer(
            set_status(&agent.agent_id, "paused", None),
            &no_manage,
        ))
        .await
        .map(drop),
    );
    let get = v1::GetAgentRequest {
        agent_id: agent.agent_id.clone(),
    };
    denied(c.get_agent(bearer(get.clone(), &no_read)).await.map(drop));
    denied(
        c.list_agents(bearer(v1::ListAgentsRequest::default(), &no_read))
            .await
            .map(drop),
    );
    denied(
        c.create_user(bearer(v1::CreateUserRequest::default(), &no_users))
            .await
            .map(drop),
    );
    denied(
        c.list_users(bearer(v1::ListUsersRequest::default(), &no_users))
            .await
            .map(drop),
    );
    denied(
        c.list_audit_events(bearer(v1::ListAuditEventsRequest::default(), &no_audit))
            .await
            .map(drop),
    );
    // The same tokens do what their bits allow.
    assert!(c.get_agent(bearer(get, &no_manage)).await.is_ok());
    assert!(
        c.create_agent(bearer(create_agent(None, None), &no_read))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn users_are_created_and_listed_and_tokens_bind_only_their_orgs_users_and_live_agents() {
    let mut h = start().await;
    let other = seed_org(&h.config, None).await;
    let admin = h.seed.admin_token.clone();
    let alice = h
        .client
        .create_user(bearer(
            v1::CreateUserRequest {
                org_id: String::new(),
                name: Some("Alice".into()),
            },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(alice.org_id, h.seed.org_id.to_string());
    assert_eq!(alice.name.as_deref(), Some("Alice"));
    let refused = h
        .client
        .create_user(bearer(
            v1::CreateUserRequest {
                org_id: String::new(),
                name: Some("x".repeat(129)),
            },
            &admin,
        ))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);

    // The seeded owner, then Alice; one per page.
    let first = h
        .client
        .list_users(bearer(
            v1::ListUsersRequest {
                page_size: 1,
                page_token: String::new(),
            },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.users[0].user_id, h.seed.user_id.to_string());
    assert!(!first.next_page_token.is_empty());
    let second = h
        .client
        .list_users(bearer(
            v1::ListUsersRequest {
                page_size: 1,
                page_token: first.next_page_token,
            },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(second.users.len(), 1);
    assert_eq!(second.users[0].user_id, alice.user_id);
    assert!(second.next_page_token.is_empty());

    // CreateToken: Alice works; another org's user or agent is PermissionDenied; an archived
    // agent cannot be bound.
    let mut request = create_request(h.seed.org_id, 1);
    request.user_id = Some(alice.user_id.clone());
    assert!(create_token(&mut h.client, &admin, request).await.is_ok());
    let mut request = create_request(h.seed.org_id, 1);
    request.user_id = Some(other.user_id.to_string());
    let refused = create_token(&mut h.client, &admin, request)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied);
    let mut request = create_request(h.seed.org_id, 1);
    request.agent_id = Some(agent_id(&other, "active").to_string());
    let refused = create_token(&mut h.client, &admin, request)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied);
    let mut request = create_request(h.seed.org_id, 1);
    request.agent_id = Some(agent_id(&h.seed, "archived").to_string());
    let refused = create_token(&mut h.client, &admin, request)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition);
    for live in ["active", "paused", "suspended"] {
        let mut request = create_request(h.seed.org_id, 1);
        request.agent_id = Some(agent_id(&h.seed, live).to_string());
        let minted = create_token(&mut h.client, &admin, request).await;
        assert!(minted.is_ok(), "{live}: {minted:?}");
    }
}

#[tokio::test]
async fn every_act_leaves_exactly_one_event_and_refusals_are_recorded() {
    let mut h = start().await;
    let other = seed_org(&h.config, None).await;
    let admin = h.seed.admin_token.clone();
    let admin_id = token_id_of(&admin);
    let baseline = audit_trail(&mut h, &admin).await.len();

    let agent = new_agent(&mut h, &admin, "audited").await;
    move_agent(
        &mut h,
        &admin,
        &agent.agent_id,
        "paused",
        Some("cost spike"),
    )
    .await
    .unwrap();
    let user = h
        .client
        .create_user(bearer(v1::CreateUserRequest::default(), &admin))
        .await
        .unwrap()
        .into_inner();
    let minted = create_token(
        &mut h.client,
        &admin,
        create_request(h.seed.org_id, Permissions::CHAT_COMPLETIONS.bits()),
    )
    .await
    .unwrap();
    h.client
        .revoke_token(bearer(
            v1::RevokeTokenRequest {
                token_id: minted.token_id.clone(),
                keep_issued: false,
            },
            &admin,
        ))
        .await
        .unwrap();
    // Refused: a token without AGENT_MANAGE, and an agent of another org.
    let chat_only = minted_chat_token(&mut h).await;
    h.client
        .create_agent(bearer(create_agent(None, None), &chat_only))
        .await
        .unwrap_err();
    move_agent(
        &mut h,
        &admin,
        &agent_id(&other, "active").to_string(),
        "paused",
        None,
    )
    .await
    .unwrap_err();
    // Reads and invalid requests record nothing.
    h.client
        .list_agents(bearer(v1::ListAgentsRequest::default(), &admin))
        .await
        .unwrap();
    move_agent(&mut h, &admin, "bad-id", "paused", None)
        .await
        .unwrap_err();

    let trail = audit_trail(&mut h, &admin).await;
    // agent.create, agent.status, user.create, token.create (revoked), token.revoke,
    // token.create (the chat-only token), and the two refusals.
    assert_eq!(trail.len(), baseline + 8, "{trail:#?}");
    let newest: Vec<&v1::AuditEvent> = trail.iter().take(8).collect();
    let summary: Vec<(&str, &str)> = newest
        .iter()
        .map(|e| (e.action.as_str(), e.outcome.as_str()))
        .collect();
    assert_eq!(
        summary,
        [
            ("agent.status", "denied"),
            ("agent.create", "denied"),
            ("token.create", "ok"),
            ("token.revoke", "ok"),
            ("token.create", "ok"),
            ("user.create", "ok"),
            ("agent.status", "ok"),
            ("agent.create", "ok"),
        ]
    );
    let org = h.seed.org_id.to_string();
    let chat_only_id = token_id_of(&chat_only);
    let actors: Vec<&str> = newest
        .iter()
        .map(|e| e.actor_token_id.as_deref().unwrap_or(""))
        .collect();
    assert_eq!(
        actors,
        [
            admin_id.as_str(),
            chat_only_id.as_str(),
            admin_id.as_str(),
            admin_id.as_str(),
            admin_id.as_str(),
            admin_id.as_str(),
            admin_id.as_str(),
            admin_id.as_str(),
        ]
    );
    assert!(newest.iter().all(|e| e.org_id == org));
    let status_event = newest[6];
    assert_eq!(
        status_event.target_id.as_deref(),
        Some(agent.agent_id.as_str())
    );
    let detail: HashMap<&str, &str> = status_event
        .detail
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        detail,
        HashMap::from([
            ("from", "active"),
            ("to", "paused"),
            ("reason", "cost spike")
        ])
    );
    assert_eq!(
        newest[7].target_id.as_deref(),
        Some(agent.agent_id.as_str())
    );
    assert_eq!(newest[5].target_id.as_deref(), Some(user.user_id.as_str()));
    assert_eq!(
        newest[4].target_id.as_deref(),
        Some(minted.token_id.as_str())
    );
    assert_eq!(
        newest[3].target_id.as_deref(),
        Some(minted.token_id.as_str())
    );
    // No event holds a secret.
    for event in &trail {
        let text = format!("{event:?}");
        assert!(!text.contains("svc_pat_"), "{text}");
    }

    // The action filter and the time range.
    let filtered = h
        .client
        .list_audit_events(bearer(
            v1::ListAuditEventsRequest {
                action: Some("agent.status".into()),
                ..Default::default()
            },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(filtered.events.len(), 2);
    assert!(filtered.events.iter().all(|e| e.action == "agent.status"));
    let since = newest[0].occurred_at;
    let recent = h
        .client
        .list_audit_events(bearer(
            v1::ListAuditEventsRequest {
                start_time: since,
                ..Default::default()
            },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(recent.events.len(), 1);
    let refused = h
        .client
        .list_audit_events(bearer(
            v1::ListAuditEventsRequest {
                action: Some("everything".into()),
                ..Default::default()
            },
            &admin,
        ))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);

    // The other org sees none of these: its own trail holds only its own act.
    h.client
        .create_agent(bearer(create_agent(None, None), &other.admin_token))
        .await
        .unwrap();
    let theirs = h
        .client
        .list_audit_events(bearer(
            v1::ListAuditEventsRequest::default(),
            &other.admin_token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(theirs.events.len(), 1, "{theirs:?}");
    assert_eq!(theirs.events[0].org_id, other.org_id.to_string());
    assert_eq!(theirs.events[0].action, "agent.create");
}

/// A chat-only token of the harness org.
async fn minted_chat_token(h: &mut Harness) -> String {
    token_with(h, Permissions::CHAT_COMPLETIONS).await
}

#[tokio::test]
async fn no_application_or_gateway_role_changes_an_event_and_the_gateway_reads_none() {
    let mut h = start().await;
    let admin = h.seed.admin_token.clone();
    new_agent(&mut h, &admin, "leaves a trail").await;
    let mut conn = sqlx::PgConnection::connect(h.db.url()).await.unwrap();
    use sqlx::Connection as _;
    let org = h.seed.org_id.to_string();
    for role in ["svc_app", "svc_gateway"] {
        for statement in [
            "UPDATE audit_events SET outcome = 'denied'",
            "DELETE FROM audit_events",
            "TRUNCATE audit_events",
        ] {
            let mut tx = conn.begin().await.unwrap();
            sqlx::query(&format!("SET LOCAL ROLE {role}"))
                .execute(&mut *tx)
                .await
                .unwrap();
            sqlx::query("SELECT set_config('svc.org_id', $1, true)")
                .bind(&org)
                .execute(&mut *tx)
                .await
                .unwrap();
            let error = sqlx::query(statement)
                .execute(&mut *tx)
                .await
                .expect_err("refused");
            let code = error
                .as_database_error()
                .and_then(|e| e.code())
                .map(|c| c.into_owned());
            assert_eq!(
                code.as_deref(),
                Some("42501"),
                "{role}: {statement}: {error}"
            );
            tx.rollback().await.unwrap();
        }
    }
    // The application role reads its org's events; the gateway's role reads none.
    let mut tx = conn.begin().await.unwrap();
    sqlx::query("SET LOCAL ROLE svc_app")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query("SELECT set_config('svc.org_id', $1, true)")
        .bind(&org)
        .execute(&mut *tx)
        .await
        .unwrap();
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_events")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert!(count >= 1);
    tx.rollback().await.unwrap();
    let mut tx = conn.begin().await.unwrap();
    sqlx::query("SET LOCAL ROLE svc_gateway")
        .execute(&mut *tx)
        .await
        .unwrap();
    let error = sqlx::query("SELECT count(*) FROM audit_events")
        .fetch_one(&mut *tx)
        .await
        .expect_err("the gateway reads no event");
    assert_eq!(
        error.as_database_error().and_then(|e| e.code()).as_deref(),
        Some("42501")
    );
    tx.rollback().await.unwrap();
    // Even the owner cannot change an event while the trigger stands.
    let error = sqlx::query("UPDATE audit_events SET outcome = 'denied'")
        .execute(&mut conn)
        .await
        .expect_err("append-only");
    assert!(error.to_string().contains("append-only"), "{error}");
}

/// Mints a token with `permissions` as `issuer`; returns (token_id, token).
async fn mint_as(h: &mut Harness, issuer: &str, permissions: Permissions) -> (String, String) {
    let created = create_token(
        &mut h.client,
        issuer,
        create_request(h.seed.org_id, permissions.bits()),
    )
    .await
    .expect("minted");
    (created.token_id, created.token)
}

async fn revoke_as(
    h: &mut Harness,
    revoker: &str,
    token_id: &str,
    keep_issued: bool,
) -> Result<v1::RevokeTokenResponse, tonic::Status> {
    h.client
        .revoke_token(bearer(
            v1::RevokeTokenRequest {
                token_id: token_id.to_owned(),
                keep_issued,
            },
            revoker,
        ))
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test]
async fn revoking_an_issuer_revokes_what_it_issued_unless_kept() {
    let mut h = start().await;
    let admin = h.seed.admin_token.clone();
    let minting = Permissions::TOKEN_CREATE | Permissions::CHAT_COMPLETIONS;
    let (issuer_id, issuer) = mint_as(&mut h, &admin, minting).await;
    let (child_id, child) = mint_as(&mut h, &issuer, minting).await;
    let (grandchild_id, grandchild) = mint_as(&mut h, &child, Permissions::CHAT_COMPLETIONS).await;
    let (sibling_id, sibling) = mint_as(&mut h, &admin, minting).await;

    let revoked = revoke_as(&mut h, &admin, &issuer_id, false).await.unwrap();
    let mut cascaded = revoked.issued_revoked.clone();
    cascaded.sort();
    let mut expected = vec![child_id.clone(), grandchild_id.clone()];
    expected.sort();
    assert_eq!(cascaded, expected);
    for token in [&issuer, &child, &grandchild] {
        assert_unauthenticated(&mut h.client, token).await;
    }
    assert!(
        validate(&mut h.client, &sibling).await.is_ok(),
        "a sibling lives"
    );
    // One event per revoked token; the children say what they went with.
    let trail = audit_trail(&mut h, &admin).await;
    let revokes: Vec<&v1::AuditEvent> = trail
        .iter()
        .filter(|e| e.action == "token.revoke")
        .collect();
    assert_eq!(revokes.len(), 3, "{revokes:#?}");
    assert_eq!(revokes[0].target_id.as_deref(), Some(issuer_id.as_str()));
    for event in &revokes[1..] {
        assert_eq!(
            event.detail.get("revoked_with").map(String::as_str),
            Some(issuer_id.as_str())
        );
    }
    // Revoking again is idempotent and revokes nothing more.
    let again = revoke_as(&mut h, &admin, &issuer_id, false).await.unwrap();
    assert!(again.issued_revoked.is_empty());

    // A deliberate rotation keeps the children.
    let (kept_child_id, kept_child) = mint_as(&mut h, &sibling, minting).await;
    let rotated = revoke_as(&mut h, &admin, &sibling_id, true).await.unwrap();
    assert!(rotated.issued_revoked.is_empty());
    assert_unauthenticated(&mut h.client, &sibling).await;
    let kept = validate(&mut h.client, &kept_child).await.unwrap();
    assert_eq!(kept.token_id, kept_child_id);
}

#[tokio::test]
async fn a_narrower_token_cannot_revoke_a_wider_one() {
    let mut h = start().await;
    let admin = h.seed.admin_token.clone();
    let admin_id = token_id_of(&admin);
    let (_, revoke_only) = mint_as(&mut h, &admin, Permissions::TOKEN_REVOKE).await;
    let refused = revoke_as(&mut h, &revoke_only, &admin_id, false)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    assert!(
        validate(&mut h.client, &admin).await.is_ok(),
        "the admin lives"
    );
    let newest = audit_trail(&mut h, &admin).await;
    assert_eq!(newest[0].action, "token.revoke");
    assert_eq!(newest[0].outcome, "denied");
    // Within its own scope it revokes: a chat token, or itself.
    let (chat_id, chat) = mint_as(&mut h, &admin, Permissions::CHAT_COMPLETIONS).await;
    let denied_wider = Permissions::CHAT_COMPLETIONS | Permissions::TOKEN_REVOKE;
    let (_, wide_revoker) = mint_as(&mut h, &admin, denied_wider).await;
    revoke_as(&mut h, &wide_revoker, &chat_id, false)
        .await
        .unwrap();
    assert_unauthenticated(&mut h.client, &chat).await;
    let own_id = token_id_of(&revoke_only);
    revoke_as(&mut h, &revoke_only, &own_id, false)
        .await
        .unwrap();
    assert_unauthenticated(&mut h.client, &revoke_only).await;
}

#[tokio::test]
async fn tool_grants_are_replaced_whole_audited_and_carried_by_validate_token() {
    let mut h = start().await;
    let admin = h.seed.admin_token.clone();
    let agent = new_agent(&mut h, &admin, "tooling").await;
    assert!(agent.tools.is_empty());
    let set = |tools: &[&str]| v1::SetAgentToolsRequest {
        agent_id: agent.agent_id.clone(),
        tools: tools.iter().map(|t| (*t).to_owned()).collect(),
    };
    let granted = h
        .client
        .set_agent_tools(bearer(set(&["srv/echo", "gh/*", "srv/echo"]), &admin))
        .await
        .expect("tools set")
        .into_inner();
    assert_eq!(granted.tools, ["srv/echo", "gh/*"]);
    let read = h
        .client
        .get_agent(bearer(
            v1::GetAgentRequest {
                agent_id: agent.agent_id.clone(),
            },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(read.tools, ["srv/echo", "gh/*"]);

    // ValidateToken's verdict on the agent carries its grants.
    let verdict = |h: &mut Harness| {
        let request = v1::ValidateTokenRequest {
            access_token: h.seed.chat_token.clone(),
            agent_id: Some(agent.agent_id.clone()),
        };
        let mut client = h.client.clone();
        async move {
            client
                .validate_token(request)
                .await
                .unwrap()
                .into_inner()
                .agent
                .expect("a verdict")
        }
    };
    assert_eq!(verdict(&mut h).await.tools, ["srv/echo", "gh/*"]);
    let cleared = h
        .client
        .set_agent_tools(bearer(set(&[]), &admin))
        .await
        .unwrap()
        .into_inner();
    assert!(cleared.tools.is_empty());
    assert!(verdict(&mut h).await.tools.is_empty());

    // Malformed grants, another org's agent, and a token without AGENT_MANAGE are refused.
    for bad in ["srv", "srv/", "srv/a b", "s.v/echo", "srv/ec*"] {
        let refused = h
            .client
            .set_agent_tools(bearer(set(&["ok/fine", bad]), &admin))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{bad}");
        assert!(
            refused.message().contains("tools[1]"),
            "{}",
            refused.message()
        );
    }
    let other = seed_org(&h.config, None).await;
    let theirs = v1::SetAgentToolsRequest {
        agent_id: agent_id(&other, "active").to_string(),
        tools: vec!["srv/*".into()],
    };
    let refused = h
        .client
        .set_agent_tools(bearer(theirs, &admin))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied);
    let reader = token_with(&mut h, Permissions::AGENT_READ).await;
    let refused = h
        .client
        .set_agent_tools(bearer(set(&["srv/*"]), &reader))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied);

    // Each change is one agent.tools event with the new list.
    let changes: Vec<_> = audit_trail(&mut h, &admin)
        .await
        .into_iter()
        .filter(|e| e.action == "agent.tools" && e.outcome == "ok")
        .collect();
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert_eq!(changes[0].detail["tools"], "");
    assert_eq!(changes[1].detail["tools"], "srv/echo gh/*");
    assert!(
        changes
            .iter()
            .all(|e| e.target_id.as_deref() == Some(agent.agent_id.as_str()))
    );
}
