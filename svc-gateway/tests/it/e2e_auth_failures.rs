//! Forged tokens cost no database read per request: past `SVC_AUTH_FAILURES_PER_MINUTE`
//! rejected tokens, a client address gets 429 RATE_LIMITED from the gateway without any
//! ValidateToken call, end to end with the real auth server.

use crate::support;

use bytes::Bytes;
use http_body_util::Full;
use support::stack::{Stack, body};
use support::{HttpClient, LIVE_MODEL, Script, chat_body, client, completion, send};
use svc_auth_server::pat::Pat;
use svc_gateway::Running;
use uuid::Uuid;

/// A chat request through `gateway` with a forged (well-formed, unknown) token.
fn forged(stack: &Stack, gateway: &Running) -> http::request::Builder {
    let token = Pat::generate(Uuid::new_v4()).expose();
    http::Request::post(format!("{}/v1/chat/completions", gateway.url()))
        .header("authorization", format!("Bearer {token}"))
        .header("x-svc-agent-id", stack.agent("active").to_string())
        .header("content-type", "application/json")
}

fn request(builder: http::request::Builder) -> http::Request<Full<Bytes>> {
    builder.body(body(&chat_body(LIVE_MODEL))).unwrap()
}

/// ValidateToken calls the auth server has answered, read from its `/metrics`.
async fn validations(http: &HttpClient, stack: &Stack) -> u64 {
    let url = format!("http://{}/metrics", stack.auth.http_addr);
    let reply = send(http, http::Request::get(url).body(Full::default()).unwrap()).await;
    String::from_utf8_lossy(&reply.body)
        .lines()
        .filter(|line| line.starts_with("svc_auth_validate_token_duration_seconds_count"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test]
async fn an_address_past_its_limit_gets_429_without_reaching_the_auth_server() {
    let stack = Stack::start(Script::Json(200, completion("hi"), vec![])).await;
    let gateway = stack
        .gateway(&[("SVC_AUTH_FAILURES_PER_MINUTE", "5")])
        .await;
    let http = client();

    for _ in 0..5 {
        let reply = send(&http, request(forged(&stack, &gateway))).await;
        assert_eq!(reply.status, 401);
        assert_eq!(reply.code(), "INVALID_TOKEN");
    }
    let before = validations(&http, &stack).await;
    for _ in 0..20 {
        let reply = send(&http, request(forged(&stack, &gateway))).await;
        assert_eq!(reply.status, 429);
        assert_eq!(reply.code(), "RATE_LIMITED");
        let retry_after: u64 = reply.header("retry-after").unwrap().parse().unwrap();
        assert!((1..=12).contains(&retry_after), "{retry_after}");
    }
    // Even the real token waits out the address's limit: nothing is asked of the auth server.
    let reply = send(&http, request(stack.chat(&gateway))).await;
    assert_eq!(reply.status, 429);
    assert_eq!(validations(&http, &stack).await, before, "validations made");

    // Another gateway counts its own clients: the real token works there.
    let other = stack.gateway(&[]).await;
    let reply = send(&http, request(stack.chat(&other))).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
}

#[tokio::test]
async fn a_trusted_proxy_header_names_the_client() {
    let stack = Stack::start(Script::Json(200, completion("hi"), vec![])).await;
    let gateway = stack
        .gateway(&[
            ("SVC_AUTH_FAILURES_PER_MINUTE", "2"),
            ("SVC_TRUSTED_PROXY_HEADER", "X-Forwarded-For"),
        ])
        .await;
    let http = client();
    let from = |client_ip: &str| {
        request(
            forged(&stack, &gateway)
                .header("x-forwarded-for", format!("203.0.113.50, {client_ip}")),
        )
    };
    for _ in 0..2 {
        assert_eq!(send(&http, from("198.51.100.1")).await.status, 401);
    }
    assert_eq!(send(&http, from("198.51.100.1")).await.status, 429);
    // Another client behind the same proxy (the same socket) is not affected.
    assert_eq!(send(&http, from("198.51.100.2")).await.status, 401);
    // And the real token of that client goes through.
    let real = stack
        .chat(&gateway)
        .header("x-forwarded-for", "198.51.100.2");
    assert_eq!(send(&http, request(real)).await.status, 200);
}

#[tokio::test]
async fn zero_disables_the_limit() {
    let stack = Stack::start(Script::Json(200, completion("hi"), vec![])).await;
    let gateway = stack
        .gateway(&[("SVC_AUTH_FAILURES_PER_MINUTE", "0")])
        .await;
    let http = client();
    for _ in 0..70 {
        assert_eq!(
            send(&http, request(forged(&stack, &gateway))).await.status,
            401
        );
    }
}
