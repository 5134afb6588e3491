//! CreateToken, RevokeToken and ListTokens: admin authentication, permission bits, argument
//! checks and pagination.

use crate::common::*;
use chrono::{Duration, Utc};
use svc_auth_server::store::{NewToken, Store};
use svc_core::permissions::Permissions;
use svc_proto::v1;
use tonic::{Code, Request};
use uuid::Uuid;

const CHAT: i64 = 1;
const CREATE: i64 = 1 << 1;
const REVOKE: i64 = 1 << 2;
const LIST: i64 = 1 << 3;

#[tokio::test]
async fn admin_calls_need_a_valid_bearer() {
    let mut h = start().await;
    let request = create_request(h.seed.org_id, CHAT);

    let missing = h
        .client
        .create_token(Request::new(request.clone()))
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::Unauthenticated);

    for bad in [
        "garbage",
        "svc_pat_x",
        &h.seed.admin_token.replace("svc_", "abc_"),
    ] {
        let status = create_token(&mut h.client, bad, request.clone())
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unauthenticated, "{bad}");
    }

    let mut wrong_scheme = Request::new(v1::ListTokensRequest::default());
    wrong_scheme.metadata_mut().insert(
        "authorization",
        format!("Basic {}", h.seed.admin_token).parse().unwrap(),
    );
    let status = h.client.list_tokens(wrong_scheme).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
}

#[tokio::test]
async fn each_call_needs_its_permission_bit() {
    let mut h = start().await;
    let admin = h.seed.admin_token.clone();
    let org = h.seed.org_id;
    // A token holding everything but the bit each call needs.
    let without = |bit: i64| create_request(org, (CHAT | CREATE | REVOKE | LIST) & !bit);
    let no_create = create_token(&mut h.client, &admin, without(CREATE))
        .await
        .unwrap()
        .token;
    let no_revoke = create_token(&mut h.client, &admin, without(REVOKE))
        .await
        .unwrap()
        .token;
    let no_list = create_token(&mut h.client, &admin, without(LIST))
        .await
        .unwrap()
        .token;

    let status = create_token(&mut h.client, &no_create, create_request(org, CHAT))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied);
    let revoke = v1::RevokeTokenRequest {
        token_id: Uuid::new_v4().to_string(),
        keep_issued: false,
    };
    let status = h
        .client
        .revoke_token(bearer(revoke, &no_revoke))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied);
    let status = h
        .client
        .list_tokens(bearer(v1::ListTokensRequest::default(), &no_list))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied);

    // The chat token holds none of them.
    let status = create_token(&mut h.client, &h.seed.chat_token, create_request(org, CHAT))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied);
}

#[tokio::test]
async fn created_permissions_must_be_a_subset_of_the_callers() {
    let mut h = start().await;
    let admin = h.seed.admin_token.clone();
    let org = h.seed.org_id;
    let limited = create_token(&mut h.client, &admin, create_request(org, CREATE | CHAT))
        .await
        .unwrap()
        .token;

    for excess in [LIST, CHAT | REVOKE, 1 << 40, -1] {
        let status = create_token(&mut h.client, &limited, create_request(org, excess))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::PermissionDenied, "{excess:#b}");
    }
    let same = create_token(&mut h.client, &limited, create_request(org, CREATE | CHAT))
        .await
        .unwrap();
    assert_eq!(same.permissions, CREATE | CHAT);
    let none = create_token(&mut h.client, &limited, create_request(org, 0))
        .await
        .unwrap();
    let valid = validate(&mut h.client, &none.token).await.unwrap();
    assert_eq!(valid.permissions, 0);
}

#[tokio::test]
async fn created_tokens_carry_their_bindings() {
    let mut h = start().await;
    let agent = agent_id(&h.seed, "active");
    let mut request = create_request(h.seed.org_id, CHAT);
    request.agent_id = Some(agent.to_string());
    request.user_id = Some(h.seed.user_id.to_string());
    let created = create_token(&mut h.client, &h.seed.admin_token, request)
        .await
        .unwrap();
    assert!(created.created_at.is_some());
    assert_eq!(created.expires_at, None);
    let valid = validate(&mut h.client, &created.token).await.unwrap();
    assert_eq!(valid.agent_id, Some(agent.to_string()));
    assert_eq!(valid.user_id, Some(h.seed.user_id.to_string()));
    assert_eq!(valid.org_id, h.seed.org_id.to_string());
}

#[tokio::test]
async fn malformed_arguments_are_invalid_argument() {
    let mut h = start().await;
    let admin = h.seed.admin_token.clone();
    let org = h.seed.org_id;
    let past = Utc::now() - Duration::minutes(1);
    let mut cases = Vec::new();
    cases.push(create_request(Uuid::nil(), CHAT));
    cases.last_mut().unwrap().org_id = "not-a-uuid".into();
    let mut agent = create_request(org, CHAT);
    agent.agent_id = Some("agent-7".into());
    cases.push(agent);
    let mut user = create_request(org, CHAT);
    user.user_id = Some("42".into());
    cases.push(user);
    let mut expired = create_request(org, CHAT);
    expired.expires_at = Some(prost_types::Timestamp {
        seconds: past.timestamp(),
        nanos: 0,
    });
    cases.push(expired);
    let mut long_name = create_request(org, CHAT);
    long_name.name = Some("x".repeat(257));
    cases.push(long_name);
    for request in cases {
        let status = create_token(&mut h.client, &admin, request.clone())
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{request:?}");
    }

    let revoke = v1::RevokeTokenRequest {
        token_id: "nope".into(),
        keep_issued: false,
    };
    let status = h
        .client
        .revoke_token(bearer(revoke, &admin))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);

    let list = v1::ListTokensRequest {
        page_size: 10,
        page_token: "not a cursor".into(),
    };
    let status = h
        .client
        .list_tokens(bearer(list, &admin))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
}

#[tokio::test]
async fn revocation_is_idempotent_and_unknown_ids_are_permission_denied() {
    let mut h = start().await;
    let admin = h.seed.admin_token.clone();
    let created = create_token(&mut h.client, &admin, create_request(h.seed.org_id, CHAT))
        .await
        .unwrap();
    let revoke = || v1::RevokeTokenRequest {
        token_id: created.token_id.clone(),
        keep_issued: false,
    };
    let first = h
        .client
        .revoke_token(bearer(revoke(), &admin))
        .await
        .unwrap()
        .into_inner();
    let second = h
        .client
        .revoke_token(bearer(revoke(), &admin))
        .await
        .unwrap()
        .into_inner();
    assert!(first.revoked_at.is_some());
    assert_eq!(first.revoked_at, second.revoked_at);

    let unknown = v1::RevokeTokenRequest {
        token_id: Uuid::new_v4().to_string(),
        keep_issued: false,
    };
    let status = h
        .client
        .revoke_token(bearer(unknown, &admin))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied);
}

/// Inserts `n` tokens straight into the store (no hashing, so hundreds are cheap).
async fn insert_tokens(h: &Harness, n: usize) {
    let store = store(&h.config);
    for _ in 0..n {
        store
            .create_token(
                h.seed.org_id,
                NewToken {
                    token_id: Uuid::new_v4(),
                    user_id: None,
                    agent_id: None,
                    permissions: Permissions::CHAT_COMPLETIONS,
                    name: None,
                    secret_hash: "$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHQ$aGFzaA".into(),
                    expires_at: None,
                    issuer_token_id: None,
                    limits: Default::default(),
                },
                None,
            )
            .await
            .unwrap();
    }
}

async fn list(
    client: &mut Client,
    admin: &str,
    page_size: i32,
    page_token: &str,
) -> v1::ListTokensResponse {
    let request = v1::ListTokensRequest {
        page_size,
        page_token: page_token.to_owned(),
    };
    client
        .list_tokens(bearer(request, admin))
        .await
        .unwrap()
        .into_inner()
}

#[tokio::test]
async fn listing_pages_through_every_token_once_with_metadata_only() {
    let mut h = start().await;
    let admin = h.seed.admin_token.clone();
    insert_tokens(&h, 5).await;
    // Two seeded tokens plus five.
    let mut seen = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = list(&mut h.client, &admin, 3, &page_token).await;
        assert!(page.tokens.len() <= 3);
        let shown = format!("{page:?}");
        assert!(!shown.contains(&h.seed.admin_token) && !shown.contains("argon2"));
        seen.extend(page.tokens);
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    assert_eq!(seen.len(), 7);
    let mut ids: Vec<&str> = seen.iter().map(|t| t.token_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 7, "a token was listed twice");
    assert!(seen.iter().all(|t| t.org_id == h.seed.org_id.to_string()));
    assert!(seen.iter().all(|t| t.created_at.is_some()));
}

#[tokio::test]
async fn page_size_defaults_to_50_and_clamps_to_500() {
    let mut h = start().await;
    let admin = h.seed.admin_token.clone();
    insert_tokens(&h, 510).await;

    let default = list(&mut h.client, &admin, 0, "").await;
    assert_eq!(default.tokens.len(), 50);
    assert!(!default.next_page_token.is_empty());

    let clamped = list(&mut h.client, &admin, 10_000, "").await;
    assert_eq!(clamped.tokens.len(), 500);
    let rest = list(&mut h.client, &admin, 10_000, &clamped.next_page_token).await;
    assert_eq!(rest.tokens.len(), 12);
    assert!(rest.next_page_token.is_empty());
}
