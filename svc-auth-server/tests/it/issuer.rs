//! A token cannot outlive or out-scope the token that issued it, through the real gRPC server:
//! CreateToken clamps the expiry to the issuer's, binds the issuer's agent, and records the
//! issuer, which ListTokens shows; a child's rate limits are clamped to its issuer's.

use crate::common::*;
use chrono::{DateTime, Duration, Utc};
use prost_types::Timestamp;
use svc_proto::v1;
use tonic::Code;

const CHAT: i64 = 1;
const CREATE: i64 = 1 << 1;
const LIST: i64 = 1 << 3;

fn timestamp(at: DateTime<Utc>) -> Timestamp {
    Timestamp {
        seconds: at.timestamp(),
        nanos: at.timestamp_subsec_nanos() as i32,
    }
}

/// An admin token minted by the seeded (unbounded) admin with `tweak` applied.
async fn issuer(h: &mut Harness, tweak: impl FnOnce(&mut v1::CreateTokenRequest)) -> String {
    let mut request = create_request(h.seed.org_id, CHAT | CREATE | LIST);
    tweak(&mut request);
    create_token(&mut h.client, &h.seed.admin_token, request)
        .await
        .unwrap()
        .token
}

#[tokio::test]
async fn a_child_never_outlives_its_issuer() {
    let mut h = start().await;
    let limit = Utc::now() + Duration::minutes(5);
    let admin = issuer(&mut h, |r| r.expires_at = Some(timestamp(limit))).await;
    let limit = validate(&mut h.client, &admin)
        .await
        .unwrap()
        .expires_at
        .expect("the issuer expires");

    // No expiry asked, or a later one: the issuer's.
    for asked in [None, Some(timestamp(Utc::now() + Duration::days(3650)))] {
        let mut request = create_request(h.seed.org_id, CHAT);
        request.expires_at = asked;
        let created = create_token(&mut h.client, &admin, request).await.unwrap();
        assert_eq!(created.expires_at, Some(limit));
        let valid = validate(&mut h.client, &created.token).await.unwrap();
        assert_eq!(valid.expires_at, Some(limit));
    }
    // A sooner one is kept.
    let sooner = timestamp(Utc::now() + Duration::minutes(1));
    let mut request = create_request(h.seed.org_id, CHAT);
    request.expires_at = Some(sooner);
    let created = create_token(&mut h.client, &admin, request).await.unwrap();
    assert_eq!(created.expires_at.map(|t| t.seconds), Some(sooner.seconds));
}

#[tokio::test]
async fn a_child_inherits_its_issuers_agent_and_cannot_name_another() {
    let mut h = start().await;
    let agent = agent_id(&h.seed, "active");
    let admin = issuer(&mut h, |r| r.agent_id = Some(agent.to_string())).await;

    let created = create_token(&mut h.client, &admin, create_request(h.seed.org_id, CHAT))
        .await
        .unwrap();
    assert_eq!(created.agent_id, Some(agent.to_string()));
    let valid = validate(&mut h.client, &created.token).await.unwrap();
    assert_eq!(valid.agent_id, Some(agent.to_string()));

    let mut same = create_request(h.seed.org_id, CHAT);
    same.agent_id = Some(agent.to_string());
    assert!(create_token(&mut h.client, &admin, same).await.is_ok());

    let mut other = create_request(h.seed.org_id, CHAT);
    other.agent_id = Some(agent_id(&h.seed, "paused").to_string());
    let status = create_token(&mut h.client, &admin, other)
        .await
        .expect_err("another agent than the issuer's");
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");

    // An unbound issuer still binds what is asked.
    let mut bound = create_request(h.seed.org_id, CHAT);
    bound.agent_id = Some(agent.to_string());
    let created = create_token(&mut h.client, &h.seed.admin_token, bound)
        .await
        .unwrap();
    assert_eq!(created.agent_id, Some(agent.to_string()));
}

#[tokio::test]
async fn list_tokens_shows_each_tokens_issuer() {
    let mut h = start().await;
    let admin = issuer(&mut h, |_| {}).await;
    let admin_id = validate(&mut h.client, &admin).await.unwrap().token_id;
    let seeded_admin_id = validate(&mut h.client, &h.seed.admin_token)
        .await
        .unwrap()
        .token_id;
    let child = create_token(&mut h.client, &admin, create_request(h.seed.org_id, CHAT))
        .await
        .unwrap();

    let request = v1::ListTokensRequest {
        page_size: 500,
        page_token: String::new(),
    };
    let listed = h
        .client
        .list_tokens(bearer(request, &admin))
        .await
        .unwrap()
        .into_inner()
        .tokens;
    let issuer_of = |id: &str| {
        listed
            .iter()
            .find(|t| t.token_id == id)
            .map(|t| t.issuer_token_id.clone())
            .expect("listed")
    };
    assert_eq!(issuer_of(&child.token_id), Some(admin_id.clone()));
    assert_eq!(issuer_of(&admin_id), Some(seeded_admin_id.clone()));
    // Seeded tokens were not issued through the API.
    assert_eq!(issuer_of(&seeded_admin_id), None);
}

#[tokio::test]
async fn limits_are_stored_validated_listed_and_clamped_to_the_issuers() {
    let mut h = start().await;
    // The seeded admin has no limits: what is asked is what is stored.
    let admin = issuer(&mut h, |r| {
        r.rpm_limit = Some(60);
        r.tpm_limit = Some(10_000);
    })
    .await;
    let valid = validate(&mut h.client, &admin).await.unwrap();
    assert_eq!((valid.rpm_limit, valid.tpm_limit), (Some(60), Some(10_000)));

    // Absent: inherited. More than the issuer's: clamped. Less: kept.
    for (asked, got) in [
        ((None, None), (Some(60), Some(10_000))),
        ((Some(600), Some(1_000_000)), (Some(60), Some(10_000))),
        ((Some(6), None), (Some(6), Some(10_000))),
        ((Some(5), Some(500)), (Some(5), Some(500))),
    ] {
        let mut request = create_request(h.seed.org_id, CHAT);
        (request.rpm_limit, request.tpm_limit) = asked;
        let created = create_token(&mut h.client, &admin, request).await.unwrap();
        assert_eq!((created.rpm_limit, created.tpm_limit), got, "{asked:?}");
        let valid = validate(&mut h.client, &created.token).await.unwrap();
        assert_eq!((valid.rpm_limit, valid.tpm_limit), got, "{asked:?}");
    }

    let listed = h
        .client
        .list_tokens(bearer(
            v1::ListTokensRequest {
                page_size: 100,
                page_token: String::new(),
            },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner();
    let limits: Vec<_> = listed
        .tokens
        .iter()
        .map(|t| (t.rpm_limit, t.tpm_limit))
        .collect();
    assert!(limits.contains(&(Some(5), Some(500))), "{limits:?}");

    // A limit of zero could never be used.
    for zero in [(Some(0), None), (None, Some(0))] {
        let mut request = create_request(h.seed.org_id, CHAT);
        (request.rpm_limit, request.tpm_limit) = zero;
        let status = create_token(&mut h.client, &admin, request)
            .await
            .expect_err("zero refused");
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    }
    // A token without limits validates without them.
    let plain = create_token(
        &mut h.client,
        &h.seed.admin_token,
        create_request(h.seed.org_id, CHAT),
    )
    .await
    .unwrap();
    let valid = validate(&mut h.client, &plain.token).await.unwrap();
    assert_eq!((valid.rpm_limit, valid.tpm_limit), (None, None));
}
