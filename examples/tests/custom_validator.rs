//! The custom-validator example over real loopback HTTP: 200 for a token holding the route's
//! permission, 401 INVALID_TOKEN and 403 INSUFFICIENT_PERMISSIONS envelopes otherwise.

use std::net::SocketAddr;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use svc_examples::custom_validator::{self, KeyTable};
use svc_tower::context::Permissions;
use tokio::net::TcpListener;
use uuid::Uuid;

/// Serves the example over `keys` on a fresh loopback port for the rest of the test.
async fn start(keys: &KeyTable) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let keys = keys.clone();
    tokio::spawn(async move { custom_validator::serve(listener, &keys).await });
    addr
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    json: serde_json::Value,
}

impl Reply {
    fn code(&self) -> Option<&str> {
        self.json["error"]["code"].as_str()
    }

    /// The envelope names the same request id as the header.
    fn assert_envelope(&self, status: StatusCode, code: &str) {
        assert_eq!(self.status, status, "{}", self.json);
        assert_eq!(self.code(), Some(code));
        assert_eq!(self.headers["content-type"], "application/json");
        let request_id = self.headers["x-request-id"].to_str().unwrap();
        assert_eq!(self.json["error"]["request_id"], request_id);
        assert!(self.json["error"]["message"].is_string());
        assert!(self.json["error"]["timestamp"].is_string());
    }
}

async fn send(addr: SocketAddr, method: Method, path: &str, token: Option<&str>) -> Reply {
    let mut request = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let client = Client::builder(TokioExecutor::new()).build_http();
    let response = client
        .request(request.body(Empty::<Bytes>::new()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    Reply {
        status,
        headers,
        json,
    }
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
