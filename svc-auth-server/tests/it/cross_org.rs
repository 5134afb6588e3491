//! Tenant isolation through the API: org A's admin can do nothing in org B, and agents are
//! validated against the token's org. Cross-org is always PermissionDenied, never NotFound.

use crate::common::*;
use svc_proto::v1;
use tonic::Code;
use uuid::Uuid;

async fn validate_agent(
    client: &mut Client,
    agent_id: impl ToString,
    org_id: impl ToString,
) -> Result<v1::ValidateAgentResponse, tonic::Status> {
    client
        .validate_agent(v1::ValidateAgentRequest {
            agent_id: agent_id.to_string(),
            org_id: org_id.to_string(),
        })
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test]
async fn an_admin_of_one_org_cannot_create_revoke_or_list_in_another() {
    let mut h = start().await;
    let a = h.seed.clone();
    let b = seed_org(&h.config, None).await;
    let b_chat_id = svc_auth_server::pat::Pat::parse(&b.chat_token)
        .unwrap()
        .token_id();

    // Create in B with A's admin.
    let status = create_token(&mut h.client, &a.admin_token, create_request(b.org_id, 1))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied);

    // Create in A bound to B's agent or B's user.
    let mut with_agent = create_request(a.org_id, 1);
    with_agent.agent_id = Some(agent_id(&b, "active").to_string());
    let status = create_token(&mut h.client, &a.admin_token, with_agent)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied);
    let mut with_user = create_request(a.org_id, 1);
    with_user.user_id = Some(b.user_id.to_string());
    let status = create_token(&mut h.client, &a.admin_token, with_user)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied);

    // Revoke B's token with A's admin: denied, and B's token still works.
    let revoke = v1::RevokeTokenRequest {
        token_id: b_chat_id.to_string(),
        keep_issued: false,
    };
    let status = h
        .client
        .revoke_token(bearer(revoke, &a.admin_token))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied);
    validate(&mut h.client, &b.chat_token).await.unwrap();

    // List with A's admin: only A's tokens.
    let listed = h
        .client
        .list_tokens(bearer(v1::ListTokensRequest::default(), &a.admin_token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.tokens.len(), 2);
    assert!(
        listed
            .tokens
            .iter()
            .all(|t| t.org_id == a.org_id.to_string())
    );
    assert!(
        listed
            .tokens
            .iter()
            .all(|t| t.token_id != b_chat_id.to_string())
    );
}

#[tokio::test]
async fn agents_validate_only_in_their_org_and_only_when_active() {
    let mut h = start().await;
    let a = h.seed.clone();
    let b = seed_org(&h.config, None).await;

    let ok = validate_agent(&mut h.client, agent_id(&a, "active"), a.org_id)
        .await
        .unwrap();
    assert_eq!(ok.agent_id, agent_id(&a, "active").to_string());
    assert_eq!(ok.org_id, a.org_id.to_string());
    assert_eq!(ok.status, "active");

    // B's agent with A's org, and an unknown agent: AGENT_NOT_AUTHORIZED.
    for agent in [agent_id(&b, "active"), Uuid::new_v4()] {
        let status = validate_agent(&mut h.client, agent, a.org_id)
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::PermissionDenied);
        assert_eq!(
            error_reason(&status).as_deref(),
            Some("AGENT_NOT_AUTHORIZED")
        );
    }

    // Not active: AGENT_SUSPENDED.
    for state in ["paused", "suspended", "archived"] {
        let status = validate_agent(&mut h.client, agent_id(&a, state), a.org_id)
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::PermissionDenied, "{state}");
        assert_eq!(
            error_reason(&status).as_deref(),
            Some("AGENT_SUSPENDED"),
            "{state}"
        );
    }

    // A suspended agent of another org does not reveal its state.
    let status = validate_agent(&mut h.client, agent_id(&b, "suspended"), a.org_id)
        .await
        .unwrap_err();
    assert_eq!(
        error_reason(&status).as_deref(),
        Some("AGENT_NOT_AUTHORIZED")
    );
}

#[tokio::test]
async fn malformed_agent_or_org_ids_are_invalid_argument() {
    let mut h = start().await;
    let agent = agent_id(&h.seed, "active").to_string();
    let org = h.seed.org_id.to_string();
    for (agent, org) in [("x", org.as_str()), (agent.as_str(), ""), ("", "")] {
        let status = validate_agent(&mut h.client, agent, org).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{agent:?} {org:?}");
    }
}

#[tokio::test]
async fn seeding_an_existing_org_adds_to_it() {
    let mut h = start().await;
    let again = seed_org(&h.config, Some(h.seed.org_id)).await;
    assert_eq!(again.org_id, h.seed.org_id);
    let listed = h
        .client
        .list_tokens(bearer(v1::ListTokensRequest::default(), &again.admin_token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.tokens.len(), 4);
}

/// ValidateToken with an agent id answers what ValidateAgent would, in the token's org only.
#[tokio::test]
async fn validate_token_looks_the_agent_up_in_the_token_org_only() {
    let mut h = start().await;
    let a = h.seed.clone();
    let b = seed_org(&h.config, None).await;
    let mut ask = async |agent: String| {
        h.client
            .validate_token(v1::ValidateTokenRequest {
                access_token: a.chat_token.clone(),
                agent_id: Some(agent),
            })
            .await
            .unwrap()
            .into_inner()
            .agent
    };
    let active = agent_id(&a, "active");
    let verdict = ask(active.to_string()).await.expect("a verdict");
    assert_eq!(verdict.agent_id, active.to_string());
    assert!(verdict.found);
    assert_eq!(verdict.status, "active");

    let suspended = ask(agent_id(&a, "suspended").to_string()).await.unwrap();
    assert!(suspended.found);
    assert_eq!(suspended.status, "suspended");

    // Another org's active agent does not exist for this token.
    let foreign = ask(agent_id(&b, "active").to_string()).await.unwrap();
    assert!(!foreign.found, "{foreign:?}");
    assert_eq!(foreign.status, "");
    let unknown = ask(Uuid::now_v7().to_string()).await.unwrap();
    assert!(!unknown.found);

    // A malformed id gets no verdict: the caller asks ValidateAgent, which says why.
    assert_eq!(ask("not-a-uuid".to_owned()).await, None);
    // Without an agent id the answer carries none.
    let plain = validate(&mut h.client, &a.chat_token).await.unwrap();
    assert_eq!(plain.agent, None);
}
