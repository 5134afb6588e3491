//! The fake AuthService through the generated client: scripted answers, the real server's
//! defaults for what is not scripted, recorded calls, and shutdown.

#![cfg(feature = "fake-auth")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use svc_proto::v1::auth_service_client::AuthServiceClient;
use svc_proto::v1::{ListTokensRequest, ValidateAgentRequest, ValidateTokenRequest};
use svc_testkit::fake_auth::{
    AGENT_NOT_AUTHORIZED, AGENT_SUSPENDED, AgentAnswer, FakeAuth, Grant, Method, TokenAnswer,
};
use tonic::Code;
use tonic::transport::{Channel, Endpoint};
use tonic_types::StatusExt;
use uuid::Uuid;

async fn connect(addr: std::net::SocketAddr) -> AuthServiceClient<Channel> {
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    AuthServiceClient::new(channel)
}

fn validate_token(token: &str) -> ValidateTokenRequest {
    ValidateTokenRequest {
        access_token: token.to_owned(),
        agent_id: None,
    }
}

fn validate_agent(agent: &str, org: Uuid) -> tonic::Request<ValidateAgentRequest> {
    tonic::Request::new(ValidateAgentRequest {
        agent_id: agent.to_owned(),
        org_id: org.to_string(),
    })
}

fn reason(status: &tonic::Status) -> Option<String> {
    status.get_details_error_info().map(|info| info.reason)
}

#[tokio::test]
async fn tokens_answer_as_scripted_and_unknown_ones_are_unauthenticated() {
    let grant = Grant::new(0b1010).user(Uuid::new_v4());
    let fake = FakeAuth::new()
        .token("good", TokenAnswer::Valid(grant.clone()))
        .token("broken", TokenAnswer::Fail(Code::Internal));
    let org = fake.org_id();
    let auth = fake.start().await;
    let mut client = connect(auth.addr()).await;

    let valid = client
        .validate_token(validate_token("good"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(valid.org_id, org.to_string());
    assert_eq!(valid.permissions, 0b1010);
    assert_eq!(valid.token_id, grant.token_id.to_string());
    assert_eq!(valid.user_id, grant.user_id.map(|u| u.to_string()));
    assert_eq!(valid.agent_id, None);

    let broken = client.validate_token(validate_token("broken")).await;
    assert_eq!(broken.unwrap_err().code(), Code::Internal);
    let unknown = client.validate_token(validate_token("unknown")).await;
    assert_eq!(unknown.unwrap_err().code(), Code::Unauthenticated);
}

#[tokio::test]
async fn agents_answer_in_their_org_only() {
    let (active, suspended, unknown) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let fake = FakeAuth::new()
        .agent(active, AgentAnswer::Active)
        .agent(suspended, AgentAnswer::Denied(AGENT_SUSPENDED));
    let org = fake.org_id();
    let auth = fake.start().await;
    let mut client = connect(auth.addr()).await;

    let ok = client
        .validate_agent(validate_agent(&active.to_string(), org))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (ok.agent_id, ok.org_id, ok.status.as_str()),
        (active.to_string(), org.to_string(), "active")
    );
    let refused = [
        (suspended, org, AGENT_SUSPENDED),
        (unknown, org, AGENT_NOT_AUTHORIZED),
        // Another org's caller learns nothing about this org's active agent.
        (active, Uuid::new_v4(), AGENT_NOT_AUTHORIZED),
    ];
    for (agent, org, expected) in refused {
        let status = client
            .validate_agent(validate_agent(&agent.to_string(), org))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::PermissionDenied);
        assert_eq!(reason(&status).as_deref(), Some(expected));
    }
}

#[tokio::test]
async fn calls_are_recorded_with_their_metadata_and_handed_to_hooks() {
    let agent = Uuid::new_v4();
    let hooked = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&hooked);
    let fake = FakeAuth::new()
        .agent(agent, AgentAnswer::Slow(Duration::from_millis(20)))
        .on_call(move |call| sink.lock().unwrap().push(call.method));
    let org = fake.org_id();
    let auth = fake.start().await;
    let mut client = connect(auth.addr()).await;

    let _ = client.validate_token(validate_token("unknown")).await;
    let mut request = validate_agent(&agent.to_string(), org);
    request.metadata_mut().insert(
        "traceparent",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            .parse()
            .unwrap(),
    );
    request.set_timeout(Duration::from_secs(5));
    client.validate_agent(request).await.unwrap();
    let _ = client.list_tokens(ListTokensRequest::default()).await;

    let methods: Vec<Method> = auth.calls().iter().map(|call| call.method).collect();
    assert_eq!(
        methods,
        [
            Method::ValidateToken,
            Method::ValidateAgent,
            Method::ListTokens
        ]
    );
    assert_eq!(*hooked.lock().unwrap(), methods);
    let agent_calls = auth.calls_to(Method::ValidateAgent);
    assert_eq!(agent_calls.len(), 1);
    let call = &agent_calls[0];
    assert_eq!(call.org_id, Some(org.to_string()));
    assert_eq!(call.agent_id, Some(agent.to_string()));
    assert!(call.metadata_str("grpc-timeout").is_some());
    assert!(
        call.metadata_str("traceparent")
            .is_some_and(|t| t.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"))
    );
}

#[tokio::test]
async fn a_shut_down_fake_refuses_connections() {
    let auth = FakeAuth::new().start().await;
    let addr = auth.addr();
    // Serving until now: an unknown token gets the server's answer.
    let answered = connect(addr)
        .await
        .validate_token(validate_token("unknown"))
        .await;
    assert_eq!(answered.unwrap_err().code(), Code::Unauthenticated);

    auth.shutdown().await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn a_dropped_handle_leaves_the_fake_serving() {
    let addr = FakeAuth::new().start().await.addr();
    let answered = connect(addr)
        .await
        .validate_token(validate_token("unknown"))
        .await;
    assert_eq!(answered.unwrap_err().code(), Code::Unauthenticated);
}
