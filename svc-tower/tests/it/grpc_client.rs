//! The gRPC validators against a real `svc.auth.v1.AuthService` on loopback, through the
//! layers: every row of the SPEC's gRPC-to-HTTP mapping, asserted as status and envelope code.

#![cfg(feature = "grpc")]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use svc_testkit::fake_auth::{
    AGENT_NOT_AUTHORIZED, AGENT_SUSPENDED, AgentAnswer, FakeAuth, Grant, Method, TokenAnswer,
};
use svc_tower::agent::AgentCheckLayer;
use svc_tower::auth::{PatAuthLayer, TokenError, TokenValidator};
use svc_tower::context::{OrgContext, Permissions};
use svc_tower::envelope::ErrorEnvelopeLayer;
use svc_tower::grpc::GrpcAuthClient;
use svc_tower::request_id::RequestIdLayer;
use tonic::Code;
use tower::{ServiceBuilder, ServiceExt, service_fn};
use uuid::Uuid;

/// Generous enough for a loaded CI machine; the deadline tests set their own.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

fn token() -> String {
    format!("svc_pat_{}_{}", Uuid::new_v4(), Uuid::new_v4().simple())
}

/// What the stack answered: status, envelope code (None for a 200) and headers.
struct Answered {
    status: StatusCode,
    code: Option<String>,
    retry_after: Option<String>,
    body: serde_json::Value,
}

/// Sends one request with `token` and `agent` through the protected stack.
async fn send(
    tokens: impl TokenValidator,
    agents: GrpcAuthClient,
    token: &str,
    agent: &str,
) -> Answered {
    let svc = ServiceBuilder::new()
        .layer(RequestIdLayer::new())
        .layer(ErrorEnvelopeLayer::new())
        .layer(PatAuthLayer::new(tokens))
        .layer(AgentCheckLayer::new(agents))
        .service(service_fn(|req: Request<Full<Bytes>>| async move {
            let context = req.extensions().get::<OrgContext>().cloned().unwrap();
            let body = serde_json::json!({
                "org_id": context.org_id,
                "agent_id": context.agent_id,
            });
            Ok::<_, Infallible>(Response::new(Full::from(body.to_string())))
        }));
    let request = Request::builder()
        .header("authorization", format!("Bearer {token}"))
        .header("x-svc-agent-id", agent)
        .body(Full::default())
        .unwrap();
    let response = svc.oneshot(request).await.unwrap();
    let status = response.status();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let code = body["error"]["code"].as_str().map(str::to_owned);
    Answered {
        status,
        code,
        retry_after,
        body,
    }
}

/// A client as `connect_lazy` builds one for an IP address: ValidateToken over its own
/// connection, the other calls over the channel.
fn client(addr: SocketAddr) -> GrpcAuthClient {
    let client = GrpcAuthClient::connect_lazy(&addr.to_string())
        .unwrap()
        .validate_timeout(CALL_TIMEOUT);
    assert!(client.has_token_connection());
    client
}

/// A client with every call over tonic's channel, as for TLS or several addresses.
fn channel_client(addr: SocketAddr) -> GrpcAuthClient {
    let channel = GrpcAuthClient::endpoint(&addr.to_string())
        .unwrap()
        .connect_lazy();
    GrpcAuthClient::from_channel(channel).validate_timeout(CALL_TIMEOUT)
}

/// Both ways ValidateToken travels.
const CLIENTS: [fn(SocketAddr) -> GrpcAuthClient; 2] = [client, channel_client];

#[tokio::test]
async fn a_valid_token_and_active_agent_pass_with_the_token_org() {
    let (good, agent) = (token(), Uuid::new_v4().to_string());
    let server = FakeAuth::new()
        .token(
            &good,
            TokenAnswer::Valid(Grant::chat().user(Uuid::new_v4())),
        )
        .agent(&agent, AgentAnswer::Active);
    let org = server.org_id();
    let auth = server.start().await;
    let addr = auth.addr();
    let answered = send(client(addr), client(addr), &good, &agent).await;
    assert_eq!(answered.status, StatusCode::OK);
    assert_eq!(answered.body["org_id"], org.to_string());
    assert_eq!(answered.body["agent_id"], agent);
    let calls = auth.calls_to(Method::ValidateAgent);
    assert_eq!(calls.len(), 1);
    // ValidateAgent got the token's org, and the deadline travelled as grpc-timeout.
    assert_eq!(calls[0].org_id, Some(org.to_string()));
    assert!(calls[0].metadata_str("grpc-timeout").is_some());
}

#[tokio::test]
async fn validate_token_codes_map_to_the_spec_rows() {
    let agent = Uuid::new_v4().to_string();
    let rows = [
        (
            TokenAnswer::Fail(Code::Unauthenticated),
            401,
            "INVALID_TOKEN",
        ),
        (TokenAnswer::Fail(Code::Internal), 503, "SERVICE_DEGRADED"),
        (
            TokenAnswer::Fail(Code::Unavailable),
            503,
            "SERVICE_DEGRADED",
        ),
        (
            TokenAnswer::Fail(Code::DeadlineExceeded),
            503,
            "SERVICE_DEGRADED",
        ),
        (
            TokenAnswer::Fail(Code::PermissionDenied),
            503,
            "SERVICE_DEGRADED",
        ),
    ];
    let mut server = FakeAuth::new().agent(&agent, AgentAnswer::Active);
    let tokens: Vec<String> = rows.iter().map(|_| token()).collect();
    for (token, (answer, _, _)) in tokens.iter().zip(&rows) {
        server = server.token(token, answer.clone());
    }
    let addr = server.start().await.addr();
    for tokens_client in CLIENTS {
        for (token, (_, status, code)) in tokens.iter().zip(&rows) {
            let answered = send(tokens_client(addr), client(addr), token, &agent).await;
            assert_eq!(answered.status.as_u16(), *status, "{code}");
            assert_eq!(answered.code.as_deref(), Some(*code));
            assert_eq!(answered.retry_after.is_some(), *status == 503, "{code}");
        }
    }
}

#[tokio::test]
async fn both_paths_read_the_same_answers_and_send_the_same_metadata() {
    use svc_tower::request_id::TraceId;
    use svc_tower::trace_context;

    let (good, cold) = (token(), token());
    let user = Uuid::new_v4();
    let server = FakeAuth::new()
        .token(&good, TokenAnswer::Valid(Grant::chat().user(user)))
        .token(
            &cold,
            TokenAnswer::Refused(Code::Unavailable, svc_core::reasons::COLD_SHARE_SPENT),
        );
    let org = server.org_id();
    let auth = server.start().await;
    let trace = TraceId::random();
    for tokens_client in CLIENTS {
        let tokens = tokens_client(auth.addr());
        let context = trace_context::scope(Some(trace), TokenValidator::validate(&tokens, &good))
            .await
            .unwrap();
        assert_eq!((context.org_id, context.user_id), (org, Some(user)));
        assert_eq!(
            TokenValidator::validate(&tokens, &cold).await,
            Err(TokenError::Throttled)
        );
        assert_eq!(
            TokenValidator::validate(&tokens, &token()).await,
            Err(TokenError::Invalid)
        );
    }
    let calls = auth.calls_to(Method::ValidateToken);
    assert_eq!(calls.len(), 6);
    for call in [&calls[0], &calls[3]] {
        let parent = call.metadata_str("traceparent").expect("traceparent");
        assert_eq!(TraceId::from_traceparent(parent.as_bytes()), Some(trace));
        let timeout = call.metadata_str("grpc-timeout").expect("grpc-timeout");
        assert_eq!(grpc_timeout(timeout), CALL_TIMEOUT, "{timeout}");
    }
}

/// A `grpc-timeout` value: at most eight digits and a unit.
fn grpc_timeout(value: &str) -> Duration {
    let (digits, unit) = value.split_at(value.len() - 1);
    let n: u64 = digits.parse().expect("grpc-timeout digits");
    match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        other => panic!("grpc-timeout unit {other}"),
    }
}

#[tokio::test]
async fn a_token_the_server_does_not_know_is_invalid_token() {
    let addr = FakeAuth::new().start().await.addr();
    let answered = send(
        client(addr),
        client(addr),
        &token(),
        &Uuid::new_v4().to_string(),
    )
    .await;
    assert_eq!(answered.status, StatusCode::UNAUTHORIZED);
    assert_eq!(answered.code.as_deref(), Some("INVALID_TOKEN"));
}

#[tokio::test]
async fn a_slow_validate_token_hits_the_deadline() {
    let slow = token();
    let server = FakeAuth::new().token(&slow, TokenAnswer::Slow(Duration::from_secs(30)));
    let addr = server.start().await.addr();
    let tokens = client(addr).validate_timeout(Duration::from_millis(50));
    // Warm the channel so the deadline measures the call, not the connect.
    assert_eq!(
        TokenValidator::validate(&client(addr), &token()).await,
        Err(TokenError::Invalid)
    );
    let started = std::time::Instant::now();
    let answered = send(tokens, client(addr), &slow, &Uuid::new_v4().to_string()).await;
    assert_eq!(answered.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answered.code.as_deref(), Some("SERVICE_DEGRADED"));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn an_unreachable_auth_service_is_service_degraded() {
    let closed: SocketAddr = format!("127.0.0.1:{}", svc_testkit::free_port())
        .parse()
        .unwrap();
    let answered = send(
        client(closed),
        client(closed),
        &token(),
        &Uuid::new_v4().to_string(),
    )
    .await;
    assert_eq!(answered.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answered.code.as_deref(), Some("SERVICE_DEGRADED"));
    assert_eq!(answered.retry_after.as_deref(), Some("1"));
}

/// PatAuth over an in-memory validator, so the agent rows run alone.
fn any_token(org_id: Uuid) -> impl TokenValidator {
    move |_: &str| async move {
        Ok(OrgContext::new(
            org_id,
            Permissions::CHAT_COMPLETIONS,
            Uuid::new_v4(),
        ))
    }
}

#[tokio::test]
async fn validate_agent_codes_map_to_the_spec_rows() {
    let rows = [
        (AgentAnswer::Active, 200, None),
        (
            AgentAnswer::Denied(AGENT_NOT_AUTHORIZED),
            403,
            Some("AGENT_NOT_AUTHORIZED"),
        ),
        (
            AgentAnswer::Denied(AGENT_SUSPENDED),
            403,
            Some("AGENT_SUSPENDED"),
        ),
        (
            AgentAnswer::Fail(Code::PermissionDenied),
            403,
            Some("AGENT_NOT_AUTHORIZED"),
        ),
        (
            AgentAnswer::Fail(Code::InvalidArgument),
            400,
            Some("VALIDATION_ERROR"),
        ),
        (
            AgentAnswer::Fail(Code::Unavailable),
            503,
            Some("AUTH_UNAVAILABLE"),
        ),
        (
            AgentAnswer::Fail(Code::DeadlineExceeded),
            503,
            Some("AUTH_UNAVAILABLE"),
        ),
        (
            AgentAnswer::Fail(Code::Internal),
            503,
            Some("AUTH_UNAVAILABLE"),
        ),
    ];
    let agents: Vec<String> = rows.iter().map(|_| Uuid::new_v4().to_string()).collect();
    let mut server = FakeAuth::new();
    for (agent, (answer, _, _)) in agents.iter().zip(&rows) {
        server = server.agent(agent, answer.clone());
    }
    // The fake answers its own org's agents only: the token names that org.
    let org = server.org_id();
    let addr = server.start().await.addr();
    for (agent, (_, status, code)) in agents.iter().zip(&rows) {
        let answered = send(any_token(org), client(addr), &token(), agent).await;
        assert_eq!(answered.status.as_u16(), *status, "{code:?}");
        assert_eq!(answered.code.as_deref(), *code);
        if *code == Some("VALIDATION_ERROR") {
            assert_eq!(
                answered.body["error"]["field_errors"][0]["field"],
                "X-SVC-Agent-ID"
            );
            assert_eq!(
                answered.body["error"]["field_errors"][0]["code"],
                "INVALID_FORMAT"
            );
        }
    }
}

#[tokio::test]
async fn an_agent_of_another_org_is_not_authorized() {
    // Active in the fake's org, asked for by a token of another org: the real server answers
    // PermissionDenied, as it does for an unknown agent.
    let agent = Uuid::new_v4().to_string();
    let addr = FakeAuth::new()
        .agent(&agent, AgentAnswer::Active)
        .start()
        .await
        .addr();
    let answered = send(any_token(Uuid::new_v4()), client(addr), &token(), &agent).await;
    assert_eq!(answered.status, StatusCode::FORBIDDEN);
    assert_eq!(answered.code.as_deref(), Some("AGENT_NOT_AUTHORIZED"));
}

#[tokio::test]
async fn a_slow_or_unreachable_validate_agent_is_auth_unavailable() {
    let slow = Uuid::new_v4().to_string();
    let server = FakeAuth::new().agent(&slow, AgentAnswer::Slow(Duration::from_secs(30)));
    let org = server.org_id();
    let addr = server.start().await.addr();
    let agents = client(addr).validate_timeout(Duration::from_millis(50));
    let answered = send(any_token(org), agents, &token(), &slow).await;
    assert_eq!(answered.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answered.code.as_deref(), Some("AUTH_UNAVAILABLE"));
    assert_eq!(answered.retry_after.as_deref(), Some("1"));

    let closed: SocketAddr = format!("127.0.0.1:{}", svc_testkit::free_port())
        .parse()
        .unwrap();
    let answered = send(any_token(org), client(closed), &token(), &slow).await;
    assert_eq!(answered.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answered.code.as_deref(), Some("AUTH_UNAVAILABLE"));
}

#[tokio::test]
async fn a_cut_connection_is_degraded_and_recovers() {
    let good = token();
    let agent = Uuid::new_v4().to_string();
    let server = FakeAuth::new()
        .token(&good, TokenAnswer::Valid(Grant::chat()))
        .agent(&agent, AgentAnswer::Active);
    let addr = server.start().await.addr();
    for tokens_client in CLIENTS {
        let proxy = svc_testkit::FaultProxy::start(addr).await;
        let tokens = tokens_client(proxy.addr()).validate_timeout(Duration::from_secs(1));
        let agents = client(proxy.addr()).validate_timeout(Duration::from_secs(1));
        let answered = send(tokens.clone(), agents.clone(), &good, &agent).await;
        assert_eq!(answered.status, StatusCode::OK);

        proxy.cut();
        let answered = send(tokens.clone(), agents.clone(), &good, &agent).await;
        assert_eq!(answered.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(answered.code.as_deref(), Some("SERVICE_DEGRADED"));

        proxy.restore();
        let recovered = svc_testkit::eventually(Duration::from_secs(10), || {
            let (tokens, agents) = (tokens.clone(), agents.clone());
            let (good, agent) = (good.clone(), agent.clone());
            async move { send(tokens, agents, &good, &agent).await.status == StatusCode::OK }
        })
        .await;
        assert!(recovered, "the client reconnects after the cut");
    }
}

#[tokio::test]
async fn the_token_connection_dials_anew_when_the_server_comes_back() {
    let good = token();
    let fake = || FakeAuth::new().token(&good, TokenAnswer::Valid(Grant::chat()));
    let first = fake().start().await;
    let addr = first.addr();
    let tokens = client(addr);
    assert!(TokenValidator::validate(&tokens, &good).await.is_ok());
    first.shutdown().await;
    assert_eq!(
        TokenValidator::validate(&tokens, &good).await,
        Err(TokenError::Unavailable)
    );
    // The same port again: the first call after the restart finds the old connection gone
    // before it sends, dials, and succeeds.
    let second = FakeAuth::new()
        .token(&good, TokenAnswer::Valid(Grant::chat()))
        .start_on(addr)
        .await;
    assert!(TokenValidator::validate(&tokens, &good).await.is_ok());
    assert_eq!(second.calls_to(Method::ValidateToken).len(), 1);
}
