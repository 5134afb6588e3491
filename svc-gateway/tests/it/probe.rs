//! `GET /v1/orgs/{org_id}/auth-probe`: the token's org is authoritative.

use crate::support;

use http::Request;
use http_body_util::Full;
use support::{Env, Reply, assert_envelope, send};

async fn probe(env: &Env, org: &str, token: &str) -> Reply {
    let request = Request::get(env.url(&format!("/v1/orgs/{org}/auth-probe")))
        .header("authorization", format!("Bearer {token}"))
        .header("x-svc-agent-id", env.world.agent_id.to_string())
        .body(Full::default())
        .unwrap();
    send(&env.client, request).await
}

#[tokio::test]
async fn own_org_answers_the_context() {
    let env = Env::mock(&[]).await;
    let reply = probe(&env, &env.world.org_id.to_string(), &env.world.chat_token).await;
    assert_eq!(reply.status, 200);
    let json = reply.json();
    assert_eq!(json["org_id"], env.world.org_id.to_string());
    assert_eq!(json["agent_id"], env.world.agent_id.to_string());
    assert_eq!(json["token_id"], env.world.chat_token_id.to_string());
    assert_eq!(json["permissions"], 1);
}

#[tokio::test]
async fn another_org_is_403_never_404() {
    let env = Env::mock(&[]).await;
    let reply = probe(
        &env,
        &uuid::Uuid::new_v4().to_string(),
        &env.world.chat_token,
    )
    .await;
    assert_envelope(&reply, 403, "INSUFFICIENT_PERMISSIONS");
}

#[tokio::test]
async fn a_non_uuid_org_is_a_validation_error() {
    let env = Env::mock(&[]).await;
    let reply = probe(&env, "not-a-uuid", &env.world.chat_token).await;
    assert_envelope(&reply, 400, "VALIDATION_ERROR");
    assert_eq!(reply.json()["error"]["field_errors"][0]["field"], "org_id");
}

#[tokio::test]
async fn the_probe_needs_no_permission_bit() {
    let env = Env::mock(&[]).await;
    let reply = probe(&env, &env.world.org_id.to_string(), &env.world.bare_token).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json()["permissions"], 0);
}

#[tokio::test]
async fn the_probe_authenticates_first() {
    let env = Env::mock(&[]).await;
    let org = uuid::Uuid::new_v4();
    let request = Request::get(env.url(&format!("/v1/orgs/{org}/auth-probe")))
        .body(Full::default())
        .unwrap();
    assert_envelope(&send(&env.client, request).await, 401, "MISSING_TOKEN");
    let request = Request::get(env.url(&format!("/v1/orgs/{}/auth-probe", env.world.org_id)))
        .header("authorization", format!("Bearer {}", env.world.chat_token))
        .body(Full::default())
        .unwrap();
    assert_envelope(&send(&env.client, request).await, 400, "MISSING_AGENT_ID");
}
