//! SPEC's token state table through the real gRPC server, and the verification guarantees:
//! wrong secrets never pass, revocation is immediate across processes, a down database fails
//! closed, unknown ids cost no hashing.

use std::time::Duration;

use crate::common::*;
use chrono::Utc;
use svc_auth_server::Server;
use svc_auth_server::pat::Pat;
use svc_proto::v1;
use svc_testkit::{FaultProxy, eventually};
use tonic::Code;
use uuid::Uuid;

#[tokio::test]
async fn a_seeded_token_validates_with_its_identity() {
    let mut h = start().await;
    let token = validate(&mut h.client, &h.seed.chat_token).await.unwrap();
    assert_eq!(token.org_id, h.seed.org_id.to_string());
    assert_eq!(
        token.permissions,
        svc_auth_server::seed::CHAT_PERMISSIONS.bits()
    );
    assert_eq!(token.user_id, Some(h.seed.user_id.to_string()));
    assert_eq!(
        token.token_id,
        Pat::parse(&h.seed.chat_token)
            .unwrap()
            .token_id()
            .to_string()
    );
    assert_eq!(token.agent_id, None);
    assert_eq!(token.expires_at, None);
}

#[tokio::test]
async fn create_gives_a_valid_token_and_revoke_invalidates_it_at_once() {
    let mut h = start().await;
    let admin = h.seed.admin_token.clone();
    // (none) -> valid: CreateToken with an admin holding TOKEN_CREATE; plaintext returned once.
    let created = create_token(&mut h.client, &admin, create_request(h.seed.org_id, 1))
        .await
        .unwrap();
    assert!(created.token.starts_with("svc_pat_"));
    assert!(created.token.contains(&created.token_id));
    let valid = validate(&mut h.client, &created.token).await.unwrap();
    assert_eq!(valid.token_id, created.token_id);

    // valid -> revoked: RevokeToken; ValidateToken then returns Unauthenticated.
    let revoke = v1::RevokeTokenRequest {
        token_id: created.token_id.clone(),
        keep_issued: false,
    };
    let revoked = h
        .client
        .revoke_token(bearer(revoke, &admin))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(revoked.token_id, created.token_id);
    assert!(revoked.revoked_at.is_some());
    assert_unauthenticated(&mut h.client, &created.token).await;
}

#[tokio::test]
async fn a_token_expires_while_the_test_watches() {
    let mut h = start().await;
    let expires_at = Utc::now() + chrono::Duration::milliseconds(1500);
    let mut request = create_request(h.seed.org_id, 1);
    request.expires_at = Some(prost_types::Timestamp {
        seconds: expires_at.timestamp(),
        nanos: expires_at.timestamp_subsec_nanos() as i32,
    });
    let created = create_token(&mut h.client, &h.seed.admin_token, request)
        .await
        .unwrap();
    assert!(created.expires_at.is_some());

    let valid = validate(&mut h.client, &created.token).await.unwrap();
    assert_eq!(valid.expires_at, created.expires_at);

    // valid -> expired by time passing.
    let client = h.client.clone();
    let token = created.token.clone();
    let expired = eventually(Duration::from_secs(5), || {
        let (mut client, token) = (client.clone(), token.clone());
        async move {
            matches!(validate(&mut client, &token).await, Err(s) if s.code() == Code::Unauthenticated)
        }
    })
    .await;
    assert!(expired, "the token never expired");
    assert!(Utc::now() >= expires_at);
}

#[tokio::test]
async fn missing_and_malformed_tokens_are_unauthenticated_without_io() {
    let mut h = start().await;
    let good = h.seed.chat_token.clone();
    let mut bad_checksum = good.clone().into_bytes();
    let last = bad_checksum.len() - 1;
    bad_checksum[last] = if bad_checksum[last] == b'0' {
        b'1'
    } else {
        b'0'
    };
    let cases = [
        String::new(),
        "garbage".to_owned(),
        format!("Bearer {good}"),
        good[..good.len() - 1].to_owned(),
        String::from_utf8(bad_checksum).unwrap(),
        good.replace("svc_pat_", "svc_pak_"),
    ];
    let runs = h.server.argon2_runs();
    for token in &cases {
        assert_unauthenticated(&mut h.client, token).await;
    }
    let missing = validate(&mut h.client, "").await.unwrap_err();
    assert_eq!(missing.message(), "missing token");
    assert_eq!(h.server.argon2_runs(), runs, "malformed tokens were hashed");
}

#[tokio::test]
async fn an_unknown_token_id_is_rejected_without_argon2() {
    let mut h = start().await;
    let runs = h.server.argon2_runs();
    for _ in 0..5 {
        let unknown = Pat::generate(Uuid::new_v4()).expose();
        assert_unauthenticated(&mut h.client, &unknown).await;
    }
    assert_eq!(h.server.argon2_runs(), runs);
}

#[tokio::test]
async fn a_wrong_secret_is_never_accepted_even_while_the_right_one_is_cached() {
    let mut h = start().await;
    let right = h.seed.chat_token.clone();
    let token_id = Pat::parse(&right).unwrap().token_id();

    validate(&mut h.client, &right).await.unwrap();
    let warm = h.server.argon2_runs();
    validate(&mut h.client, &right).await.unwrap();
    assert_eq!(h.server.argon2_runs(), warm, "the warm path ran Argon2");

    for _ in 0..3 {
        // Same id, valid checksum, different secret.
        let wrong = Pat::generate(token_id).expose();
        assert_unauthenticated(&mut h.client, &wrong).await;
    }
    assert!(h.server.argon2_runs() > warm, "wrong secrets were verified");
    validate(&mut h.client, &right).await.unwrap();
}

#[tokio::test]
async fn wrong_secrets_are_remembered_by_what_was_tried_and_never_lock_out_the_right_one() {
    let mut h = start().await;
    // The right secret is never checked before the flood: this server has not seen it succeed.
    let right = fresh_token(&mut h).await;
    let token_id = Pat::parse(&right).unwrap().token_id();

    // The same wrong secret twice is hashed once.
    let wrong = Pat::generate(token_id).expose();
    let before = h.server.argon2_runs();
    assert_unauthenticated(&mut h.client, &wrong).await;
    assert_unauthenticated(&mut h.client, &wrong).await;
    assert_eq!(h.server.argon2_runs(), before + 1);

    // Many more wrong secrets than the old per-id limit of ten...
    for _ in 0..15 {
        assert_unauthenticated(&mut h.client, &Pat::generate(token_id).expose()).await;
    }
    assert_eq!(h.server.argon2_runs(), before + 16);
    // ... and the right secret still validates, here and on another token id.
    validate(&mut h.client, &right).await.unwrap();
    validate(&mut h.client, &h.seed.admin_token).await.unwrap();
    // Every one of them is still refused from memory, without hashing.
    let runs = h.server.argon2_runs();
    assert_unauthenticated(&mut h.client, &wrong).await;
    assert_eq!(h.server.argon2_runs(), runs);
}

#[tokio::test]
async fn a_token_revoked_through_one_process_is_rejected_at_once_by_another() {
    let mut h = start().await;
    let second = Server::start(h.config.clone()).await.unwrap();
    let mut other = connect(second.grpc_addr).await;

    let created = create_token(
        &mut h.client,
        &h.seed.admin_token,
        create_request(h.seed.org_id, 1),
    )
    .await
    .unwrap();
    // Warm the second process's cache.
    validate(&mut other, &created.token).await.unwrap();
    validate(&mut other, &created.token).await.unwrap();

    h.client
        .revoke_token(bearer(
            v1::RevokeTokenRequest {
                token_id: created.token_id.clone(),
                keep_issued: false,
            },
            &h.seed.admin_token,
        ))
        .await
        .unwrap();
    assert_unauthenticated(&mut other, &created.token).await;
    second.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_unreachable_database_fails_closed() {
    let db = migrated_db().await;
    let (proxy, proxied) = FaultProxy::for_postgres(db.url()).await;
    let mut config = svc_auth_server::Config::local(proxied);
    config.pool.acquire_timeout = Duration::from_millis(300);
    let server = Server::start(config.clone()).await.unwrap();
    let seed = seed_org(&config, None).await;
    let mut client = connect(server.grpc_addr).await;

    // Cached and valid while the database answers...
    validate(&mut client, &seed.chat_token).await.unwrap();
    validate(&mut client, &seed.chat_token).await.unwrap();

    // ... an error, never OK, once it does not.
    proxy.cut();
    for token in [&seed.chat_token, &seed.admin_token] {
        let status = validate(&mut client, token).await.unwrap_err();
        assert_eq!(status.code(), Code::Internal, "{status:?}");
        assert_eq!(status.message(), "internal error");
    }
    let agent = client
        .validate_agent(v1::ValidateAgentRequest {
            agent_id: agent_id(&seed, "active").to_string(),
            org_id: seed.org_id.to_string(),
        })
        .await
        .unwrap_err();
    assert_eq!(agent.code(), Code::Internal);

    // And it recovers when the database is back.
    proxy.restore();
    let recovered = eventually(Duration::from_secs(5), || {
        let (mut client, token) = (client.clone(), seed.chat_token.clone());
        async move { validate(&mut client, &token).await.is_ok() }
    })
    .await;
    assert!(recovered);
    server.shutdown().await.unwrap();
}
