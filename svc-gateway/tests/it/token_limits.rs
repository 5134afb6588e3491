//! Tokens per minute across two replicas on one Redis, with the real auth server and a fake
//! upstream reporting chosen usage: reservations hold under concurrency, settle to the real
//! usage (a stream from its usage chunk, a stream cut short from what it sent), and a token's
//! own lower limits bind first, with their numbers in the headers.

use crate::support;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use support::stack::{Stack, body};
use support::{LIVE_MODEL, Reply, Script, chunk, client, completion, next_data, open, send};

/// Every call below reserves 5 prompt tokens ("hi": 1, plus 4 for its message) and its
/// `max_tokens`.
const PROMPT_ESTIMATE: u64 = 5;

fn chat_body(max_tokens: u64, stream: bool) -> serde_json::Value {
    serde_json::json!({
        "model": LIVE_MODEL,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": max_tokens - PROMPT_ESTIMATE,
        "stream": stream,
    })
}

/// A completion whose usage totals `total` tokens.
fn used(total: i64) -> Script {
    let mut json = completion("ok");
    json["usage"] = serde_json::json!({
        "prompt_tokens": 5, "completion_tokens": total - 5, "total_tokens": total
    });
    Script::Json(200, json, vec![])
}

async fn call(stack: &Stack, gateway: &svc_gateway::Running, bearer: &str, estimate: u64) -> Reply {
    let mut request = stack
        .chat(gateway)
        .body(body(&chat_body(estimate, false)))
        .unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {bearer}").parse().unwrap());
    send(&client(), request).await
}

fn header(reply: &Reply, name: &str) -> u64 {
    reply
        .header(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} on {:?}", reply.headers))
}

/// Retries `estimate`-token calls until one passes: the earlier ones' settlement is off the
/// request path. A refused call reserves nothing.
async fn passes_eventually(stack: &Stack, gateway: &svc_gateway::Running, estimate: u64) -> Reply {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reply = call(stack, gateway, &stack.seed.chat_token, estimate).await;
        if reply.status.as_u16() == 200 || Instant::now() > deadline {
            return reply;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_limit_worth_ten_calls_lets_ten_of_a_hundred_concurrent_through_across_replicas() {
    let stack = Stack::start(used(100)).await;
    let vars = [
        ("SVC_RATE_LIMIT_TPM", "1000"),
        ("SVC_RATE_LIMIT_RPM", "100000"),
        // A hundred calls at once on a small test machine: none may fail open.
        ("SVC_RATE_LIMIT_TPM_TIMEOUT", "5s"),
    ];
    let replicas = [stack.gateway(&vars).await, stack.gateway(&vars).await];
    let replies = futures_util::stream::iter(0..100)
        .map(|i| call(&stack, &replicas[i % 2], &stack.seed.chat_token, 100))
        .buffer_unordered(100)
        .collect::<Vec<_>>()
        .await;
    let passed = replies.iter().filter(|r| r.status.as_u16() == 200).count();
    assert!((10..=11).contains(&passed), "{passed} passed");
    for reply in &replies {
        assert_eq!(header(reply, "x-ratelimit-limit-tokens"), 1000);
        assert!(reply.header("x-ratelimit-reset-tokens").is_some());
        assert!(reply.header("x-ratelimit-limit-requests").is_some());
        if reply.status.as_u16() != 200 {
            assert_eq!(reply.status.as_u16(), 429);
            assert_eq!(reply.code(), "RATE_LIMITED");
            assert!(header(reply, "retry-after") >= 1);
        }
    }
    assert_eq!(stack.upstream.seen().len(), passed);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_high_estimate_settles_to_the_reported_usage_and_frees_the_rest() {
    let stack = Stack::start(used(10)).await;
    let gateway = stack.gateway(&[("SVC_RATE_LIMIT_TPM", "1000")]).await;
    // The whole minute's allowance reserved, 10 tokens used.
    let first = call(&stack, &gateway, &stack.seed.chat_token, 1000).await;
    assert_eq!(first.status.as_u16(), 200);
    assert_eq!(header(&first, "x-ratelimit-remaining-tokens"), 0);
    let next = passes_eventually(&stack, &gateway, 100).await;
    assert_eq!(next.status.as_u16(), 200, "{:?}", next.code());
    // 1000 - 10 - 100, and whatever refilled meanwhile.
    let remaining = header(&next, "x-ratelimit-remaining-tokens");
    assert!((890..=1000).contains(&remaining), "{remaining}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_settles_from_its_usage_chunk() {
    let usage = serde_json::json!({
        "id": "chatcmpl-upstream-1", "object": "chat.completion.chunk", "created": 1,
        "model": LIVE_MODEL, "choices": [],
        "usage": {"prompt_tokens": 5, "completion_tokens": 15, "total_tokens": 20},
    });
    let stack = Stack::start(Script::Stream {
        before: vec![
            chunk("hel"),
            chunk("lo"),
            format!("data: {usage}\n\n"),
            "data: [DONE]\n\n".to_owned(),
        ],
        after: vec![],
        fail: false,
    })
    .await;
    let gateway = stack.gateway(&[("SVC_RATE_LIMIT_TPM", "1000")]).await;
    stack.upstream.release();
    let request = stack
        .chat(&gateway)
        .body(body(&chat_body(1000, true)))
        .unwrap();
    let reply = send(&client(), request).await;
    assert_eq!(reply.status.as_u16(), 200);
    assert!(String::from_utf8_lossy(&reply.body).contains("[DONE]"));
    assert_eq!(header(&reply, "x-ratelimit-remaining-tokens"), 0);

    stack.upstream.set(used(100));
    let next = passes_eventually(&stack, &gateway, 100).await;
    assert_eq!(next.status.as_u16(), 200, "{:?}", next.code());
    let remaining = header(&next, "x-ratelimit-remaining-tokens");
    assert!(
        (880..=1000).contains(&remaining),
        "1000 - 20 - 100: {remaining}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_cut_short_settles_from_the_tokens_sent_so_far() {
    let first = chunk(&"x".repeat(1600));
    let stack = Stack::start(Script::Stream {
        before: vec![first.clone()],
        after: vec![chunk("never sent")],
        fail: false,
    })
    .await;
    let gateway = stack.gateway(&[("SVC_RATE_LIMIT_TPM", "1000")]).await;
    let request = stack
        .chat(&gateway)
        .body(body(&chat_body(1000, true)))
        .unwrap();
    let response = open(&client(), request).await;
    assert_eq!(response.status(), 200);
    let remaining = response.headers()["x-ratelimit-remaining-tokens"].clone();
    assert_eq!(remaining, "0");
    let mut stream = response.into_body();
    let data = tokio::time::timeout(Duration::from_secs(10), next_data(&mut stream))
        .await
        .expect("the first chunk arrives")
        .expect("a chunk");
    assert_eq!(data, first.as_bytes());
    // The client leaves before the usage chunk: the prompt estimate plus a token per four
    // bytes passed on is what the call is charged.
    drop(stream);
    let charged = PROMPT_ESTIMATE + (first.len() as u64).div_ceil(4);

    stack.upstream.set(used(100));
    let next = passes_eventually(&stack, &gateway, 100).await;
    assert_eq!(next.status.as_u16(), 200, "{:?}", next.code());
    let remaining = header(&next, "x-ratelimit-remaining-tokens");
    let expected = 1000 - charged - 100;
    // Refill at 1000 a minute adds a little while the test runs.
    assert!(
        (expected..=expected + 100).contains(&remaining),
        "1000 - {charged} - 100: {remaining}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tokens_own_lower_limits_bind_before_the_orgs_and_fill_the_headers() {
    let stack = Stack::start(used(100)).await;
    let gateway = stack
        .gateway(&[
            ("SVC_RATE_LIMIT_TPM", "1000"),
            ("SVC_RATE_LIMIT_RPM", "600"),
        ])
        .await;
    let (_, tpm_token) = stack.token_limited(1, None, Some(300)).await;
    let spending = std::time::Instant::now();
    for remaining in [200, 100, 0] {
        let reply = call(&stack, &gateway, &tpm_token, 100).await;
        assert_eq!(reply.status.as_u16(), 200);
        assert_eq!(header(&reply, "x-ratelimit-limit-tokens"), 300);
        let left = header(&reply, "x-ratelimit-remaining-tokens");
        assert!((remaining..=remaining + 5).contains(&left), "{left}");
    }
    let refused = call(&stack, &gateway, &tpm_token, 100).await;
    assert_eq!(refused.status.as_u16(), 429);
    assert_eq!(refused.code(), "RATE_LIMITED");
    assert_eq!(header(&refused, "x-ratelimit-limit-tokens"), 300);
    assert!(header(&refused, "retry-after") >= 1);
    // The org still has its own allowance, less what the token spent.
    let org = call(&stack, &gateway, &stack.seed.chat_token, 100).await;
    assert_eq!(org.status.as_u16(), 200);
    assert_eq!(header(&org, "x-ratelimit-limit-tokens"), 1000);
    // The org's bucket refills at 1000 a minute while the test runs.
    let refilled = (spending.elapsed().as_secs_f64() * 1000.0 / 60.0).ceil() as u64;
    let left = header(&org, "x-ratelimit-remaining-tokens");
    assert!(left <= 605 + refilled, "{left}, {refilled} refilled");

    // Requests per minute the same way.
    let (_, rpm_token) = stack.token_limited(1, Some(2), None).await;
    for remaining in [1, 0] {
        let reply = call(&stack, &gateway, &rpm_token, 10).await;
        assert_eq!(reply.status.as_u16(), 200);
        assert_eq!(header(&reply, "x-ratelimit-limit-requests"), 2);
        assert_eq!(header(&reply, "x-ratelimit-remaining-requests"), remaining);
    }
    let refused = call(&stack, &gateway, &rpm_token, 10).await;
    assert_eq!(refused.status.as_u16(), 429);
    assert_eq!(header(&refused, "x-ratelimit-limit-requests"), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn without_redis_the_token_limit_fails_open() {
    let stack = Stack::start(used(100)).await;
    let gateway = stack.gateway(&[("SVC_RATE_LIMIT_TPM", "150")]).await;
    stack.redis_proxy.cut();
    for _ in 0..3 {
        let reply = call(&stack, &gateway, &stack.seed.chat_token, 100).await;
        assert_eq!(reply.status.as_u16(), 200);
        assert_eq!(header(&reply, "x-ratelimit-limit-tokens"), 150);
        assert_eq!(header(&reply, "x-ratelimit-remaining-tokens"), 150);
    }
}

/// A call as an agent framework makes it: twenty tools with long schemas, four images given
/// by URL (their size unknown), two completions of 200 tokens.
fn heavy_body() -> serde_json::Value {
    let tools: Vec<serde_json::Value> = (0..20)
        .map(|i| {
            serde_json::json!({"type": "function", "function": {
                "name": format!("tool_{i}"),
                "description": "Looks things up in the catalogue. ".repeat(30),
                "parameters": {"type": "object", "properties": {
                    "query": {"type": "string", "description": "What to look for. ".repeat(10)},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100}}}}})
        })
        .collect();
    let image = |i: usize| {
        serde_json::json!({"type": "image_url",
                           "image_url": {"url": format!("https://images.example/{i}.jpg")}})
    };
    serde_json::json!({
        "model": LIVE_MODEL,
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "Which of these are cats?"},
            image(0), image(1), image(2), image(3)]}],
        "tools": tools,
        "n": 2,
        "max_tokens": 200,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tools_images_and_n_count_against_the_limit() {
    let body = heavy_body();
    let object = body.as_object().unwrap();
    let estimate = svc_gateway::token_estimate::prompt_tokens(object, 1)
        + svc_gateway::token_estimate::completion_tokens(object, Some(200), 1024);
    // The message text alone is a few tokens: the rest is what used to go uncounted.
    assert!(
        estimate > 4 * svc_gateway::token_estimate::MAX_IMAGE_TOKENS + 400 + 5_000,
        "{estimate}"
    );
    let stack = Stack::start(used(i64::try_from(estimate).unwrap())).await;
    let limit = (10 * estimate).to_string();
    let gateway = stack
        .gateway(&[
            ("SVC_RATE_LIMIT_TPM", limit.as_str()),
            ("SVC_RATE_LIMIT_RPM", "100000"),
            ("SVC_RATE_LIMIT_TPM_TIMEOUT", "5s"),
        ])
        .await;
    let http = client();
    let replies = futures_util::stream::iter(0..30)
        .map(|_| {
            let request = stack
                .chat(&gateway)
                .body(support::stack::body(&body))
                .unwrap();
            send(&http, request)
        })
        .buffer_unordered(30)
        .collect::<Vec<_>>()
        .await;
    let passed = replies.iter().filter(|r| r.status.as_u16() == 200).count();
    eprintln!("estimate {estimate} tokens a call, limit {limit}: {passed} of 30 passed");
    assert!((1..=11).contains(&passed), "{passed} passed");
    for reply in replies.iter().filter(|r| r.status.as_u16() != 200) {
        assert_eq!(reply.code(), "RATE_LIMITED");
        // A refusal waits for the bucket, never past one window.
        assert!(
            (1..=60).contains(&header(reply, "retry-after")),
            "{:?}",
            reply.headers
        );
    }
}
