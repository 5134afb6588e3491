//! One auth round trip per request: the gateway asks ValidateToken about the token and the
//! request's agent together, and AgentCheck decides from that answer. End to end with the real
//! auth server, every agent standing keeps its SPEC answer.

use crate::support;

use bytes::Bytes;
use http_body_util::Full;
use support::stack::{Stack, body};
use support::{HttpClient, LIVE_MODEL, Script, chat_body, client, completion, send};

/// AuthService calls the auth server has answered, read from its `/metrics`.
async fn auth_calls(http: &HttpClient, stack: &Stack) -> u64 {
    let url = format!("http://{}/metrics", stack.auth.http_addr);
    let reply = send(http, http::Request::get(url).body(Full::default()).unwrap()).await;
    String::from_utf8_lossy(&reply.body)
        .lines()
        .filter(|line| line.starts_with("svc_auth_grpc_requests_total "))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test]
async fn each_request_costs_one_auth_call_whatever_the_agent() {
    let stack = Stack::start(Script::Json(200, completion("hi"), vec![])).await;
    let gateway = stack.gateway(&[]).await;
    let http = client();
    let foreign = stack.other_org().await;
    let foreign_agent = foreign
        .agents
        .iter()
        .find(|agent| agent.status == "active")
        .map(|agent| agent.agent_id)
        .unwrap();
    let as_agent = |agent: String| -> http::Request<Full<Bytes>> {
        let mut request = stack
            .chat(&gateway)
            .body(body(&chat_body(LIVE_MODEL)))
            .unwrap();
        request
            .headers_mut()
            .insert("x-svc-agent-id", agent.parse().unwrap());
        request
    };

    let cases = [
        (stack.agent("active").to_string(), 200, None),
        (
            stack.agent("paused").to_string(),
            403,
            Some("AGENT_SUSPENDED"),
        ),
        (
            stack.agent("suspended").to_string(),
            403,
            Some("AGENT_SUSPENDED"),
        ),
        (foreign_agent.to_string(), 403, Some("AGENT_NOT_AUTHORIZED")),
        (
            uuid::Uuid::now_v7().to_string(),
            403,
            Some("AGENT_NOT_AUTHORIZED"),
        ),
    ];
    for (agent, status, code) in cases {
        let before = auth_calls(&http, &stack).await;
        let reply = send(&http, as_agent(agent.clone())).await;
        assert_eq!(reply.status, status, "{agent}: {:?}", reply.body);
        if let Some(code) = code {
            assert_eq!(reply.code(), code, "{agent}");
        }
        assert_eq!(auth_calls(&http, &stack).await - before, 1, "{agent}");
    }

    // A malformed agent id is not asked about: the token's call only, then a local refusal.
    let before = auth_calls(&http, &stack).await;
    let reply = send(&http, as_agent("not-a-uuid".into())).await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.code(), "VALIDATION_ERROR");
    assert_eq!(auth_calls(&http, &stack).await - before, 1);
}
