//! A call under a budget counts its request in its reservation's script, once its body is
//! parsed: the real gateway, the real auth server on PostgreSQL and Redis. SPEC's order of
//! answers holds (a request over its org's limit is 429 whatever its body), a refused request
//! reserves nothing and reaches no provider, and a request with an `Idempotency-Key` is counted
//! before its replay, as before.

use crate::support;

use support::stack::{Stack, body};
use support::{LIVE_MODEL, Reply, Script, client, completion, send};

const PRICE: &str = "{ input = 1.0, output = 1.0 }";

fn used(total: i64) -> Script {
    let mut json = completion("ok");
    json["usage"] = serde_json::json!({
        "prompt_tokens": 5, "completion_tokens": total - 5, "total_tokens": total
    });
    Script::Json(200, json, vec![])
}

async fn call(
    stack: &Stack,
    gateway: &svc_gateway::Running,
    json: &serde_json::Value,
    headers: &[(&str, &str)],
) -> Reply {
    let mut request = stack.chat(gateway).body(body(json)).unwrap();
    for (name, value) in headers {
        request.headers_mut().insert(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    send(&client(), request).await
}

fn valid() -> serde_json::Value {
    serde_json::json!({
        "model": LIVE_MODEL,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 95,
    })
}

/// A body that does not validate: no messages.
fn invalid() -> serde_json::Value {
    serde_json::json!({"model": LIVE_MODEL})
}

fn remaining(reply: &Reply) -> Option<&str> {
    reply.header("x-ratelimit-remaining")
}

/// The org's allowance key, as Redis holds it.
async fn allowance(stack: &Stack) -> Option<Vec<u8>> {
    let redis = redis::Client::open(svc_testkit::redis_url()).unwrap();
    let mut redis = redis.get_multiplexed_async_connection().await.unwrap();
    let key = format!("{}svc:{{{}}}:req", stack.redis_prefix, stack.seed.org_id);
    redis::cmd("GET")
        .arg(key)
        .query_async(&mut redis)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_budgeted_call_counts_its_request_with_its_reservation_in_specs_order() {
    let stack = Stack::start(used(100)).await;
    stack.set_budget("org", "", 1_000_000, "month").await;
    let gateway = stack
        .gateway_priced(Some(PRICE), &[("SVC_RATE_LIMIT_RPM", "3")])
        .await;

    let first = call(&stack, &gateway, &valid(), &[]).await;
    assert_eq!(first.status.as_u16(), 200, "{:?}", first.code());
    assert_eq!(remaining(&first), Some("2"));
    assert!(first.header("x-svc-budget-remaining-usd").is_some());
    // The request was counted by the token script: its value holds a bucket's TAT after the
    // limiter's two figures, where the limiter alone writes two.
    let value = allowance(&stack).await.expect("the org's allowance key");
    assert_eq!(value.len(), 24, "written by the reservation's script");

    // A body that does not validate is counted after its 400, with the headers.
    let refused_body = call(&stack, &gateway, &invalid(), &[]).await;
    assert_eq!(refused_body.status.as_u16(), 400);
    assert_eq!(refused_body.code(), "VALIDATION_ERROR");
    assert_eq!(remaining(&refused_body), Some("1"));

    let third = call(&stack, &gateway, &valid(), &[]).await;
    assert_eq!(third.status.as_u16(), 200, "{:?}", third.code());
    assert_eq!(remaining(&third), Some("0"));

    // Over the limit, a body that does not validate is 429: the rate limit comes first.
    let over_and_invalid = call(&stack, &gateway, &invalid(), &[]).await;
    assert_eq!(over_and_invalid.status.as_u16(), 429);
    assert_eq!(over_and_invalid.code(), "RATE_LIMITED");
    assert!(over_and_invalid.header("retry-after").is_some());

    // Over the limit, a valid call is refused by its reservation's script: 429 with the
    // limiter's headers, no provider call, nothing reserved.
    let over = call(&stack, &gateway, &valid(), &[]).await;
    assert_eq!(over.status.as_u16(), 429);
    assert_eq!(over.code(), "RATE_LIMITED");
    assert_eq!(over.header("x-ratelimit-limit"), Some("3"));
    assert_eq!(remaining(&over), Some("0"));
    assert!(over.header("retry-after").is_some());
    assert!(over.header("x-svc-budget-remaining-usd").is_none());
    assert_eq!(stack.upstream.seen().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn with_an_idempotency_key_the_request_is_counted_before_its_replay() {
    let stack = Stack::start(used(100)).await;
    stack.set_budget("org", "", 1_000_000, "month").await;
    let gateway = stack
        .gateway_priced(Some(PRICE), &[("SVC_RATE_LIMIT_RPM", "2")])
        .await;
    let keyed = [("idempotency-key", "count-me")];
    let first = call(&stack, &gateway, &valid(), &keyed).await;
    assert_eq!(first.status.as_u16(), 200, "{:?}", first.code());
    let replay = call(&stack, &gateway, &valid(), &keyed).await;
    assert_eq!(replay.status.as_u16(), 200);
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(remaining(&replay), Some("0"));
    let over = call(&stack, &gateway, &valid(), &keyed).await;
    assert_eq!(
        over.status.as_u16(),
        429,
        "a replay over the limit is refused"
    );
    assert_eq!(stack.upstream.seen().len(), 1);
}

/// Once refused, a client's next requests are counted before their bodies are read, until its
/// `Retry-After`: a body that never arrives is answered 429 at once, not after the body's
/// timeout.
#[tokio::test(flavor = "multi_thread")]
async fn after_a_refusal_the_next_request_is_refused_before_its_body_is_read() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stack = Stack::start(used(100)).await;
    stack.set_budget("org", "", 1_000_000, "month").await;
    let gateway = stack
        .gateway_priced(
            Some(PRICE),
            &[
                ("SVC_RATE_LIMIT_RPM", "1"),
                ("SVC_BODY_READ_TIMEOUT", "60s"),
            ],
        )
        .await;
    assert_eq!(
        call(&stack, &gateway, &valid(), &[]).await.status.as_u16(),
        200
    );
    let refused = call(&stack, &gateway, &valid(), &[]).await;
    assert_eq!(refused.status.as_u16(), 429);
    let mut tcp = tokio::net::TcpStream::connect(gateway.addr())
        .await
        .unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer {}\r\n\
         X-SVC-Agent-ID: {}\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n\
         {{\"model\": \"{LIVE_MODEL}\",",
        stack.seed.chat_token,
        stack.agent("active")
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    // Well before the body's timeout: the head of the answer.
    let read = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "no answer before the body arrived");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("retry-after"),
        "{answer}"
    );
    assert_eq!(stack.upstream.seen().len(), 1);
}
