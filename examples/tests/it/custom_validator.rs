//! The custom-validator example over real loopback HTTP: 200 for a token holding the route's
//! permission, 401 INVALID_TOKEN and 403 INSUFFICIENT_PERMISSIONS envelopes otherwise.

use crate::common;

use std::net::SocketAddr;

use bytes::Bytes;
use common::Reply;
use http::{Method, Request, StatusCode};
use http_body_util::Empty;
use svc_examples::custom_validator::{self, KeyTable};
use svc_tower::context::Permissions;
use uuid::Uuid;

/// Serves the example over `keys` on a fresh loopback port for the rest of the test.
async fn start(keys: &KeyTable) -> SocketAddr {
    let keys = keys.clone();
    common::start(move |listener| async move { custom_validator::serve(listener, &keys).await })
        .await
}

async fn send(addr: SocketAddr, method: Method, path: &str, token: Option<&str>) -> Reply {
    let mut request = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    common::send(request.body(Empty::<Bytes>::new()).unwrap()).await
}

async fn chat(addr: SocketAddr, token: Option<&str>) -> Reply {
    send(addr, Method::POST, "/v1/chat/completions", token).await
}

#[tokio::test]
async fn a_token_holding_the_permission_gets_200_with_its_org() {
    let keys = KeyTable::new();
    let org = Uuid::new_v4();
    let token = keys.issue(org, Permissions::CHAT_COMPLETIONS);
    let addr = start(&keys).await;

    let reply = chat(addr, Some(&token)).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json["org_id"], org.to_string());
    for header in ["x-request-id", "x-trace-id", "x-response-time"] {
        assert!(reply.headers.contains_key(header), "{header}");
    }
}

#[tokio::test]
async fn an_unknown_or_malformed_token_is_401_invalid_token() {
    let keys = KeyTable::new();
    keys.issue(Uuid::new_v4(), Permissions::CHAT_COMPLETIONS);
    let addr = start(&keys).await;

    let unknown = format!("svc_pat_{}_{}", Uuid::new_v4(), Uuid::new_v4().simple());
    for token in [unknown.as_str(), "not-a-pat"] {
        chat(addr, Some(token))
            .await
            .assert_envelope(StatusCode::UNAUTHORIZED, "INVALID_TOKEN");
    }
    chat(addr, None)
        .await
        .assert_envelope(StatusCode::UNAUTHORIZED, "MISSING_TOKEN");
}

#[tokio::test]
async fn a_token_lacking_the_permission_is_403_only_where_it_is_required() {
    let keys = KeyTable::new();
    let org = Uuid::new_v4();
    let list_only = keys.issue(org, Permissions::TOKEN_LIST);
    let addr = start(&keys).await;

    chat(addr, Some(&list_only))
        .await
        .assert_envelope(StatusCode::FORBIDDEN, "INSUFFICIENT_PERMISSIONS");

    let whoami = send(addr, Method::GET, "/v1/whoami", Some(&list_only)).await;
    assert_eq!(whoami.status, StatusCode::OK);
    assert_eq!(whoami.json["org_id"], org.to_string());
    assert_eq!(whoami.json["permissions"], Permissions::TOKEN_LIST.bits());
}

#[tokio::test]
async fn a_revoked_token_is_refused_on_its_next_request() {
    let keys = KeyTable::new();
    let token = keys.issue(Uuid::new_v4(), Permissions::CHAT_COMPLETIONS);
    let addr = start(&keys).await;

    assert_eq!(chat(addr, Some(&token)).await.status, StatusCode::OK);
    assert!(keys.revoke(&token));
    chat(addr, Some(&token))
        .await
        .assert_envelope(StatusCode::UNAUTHORIZED, "INVALID_TOKEN");
}
