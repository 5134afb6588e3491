//! Money budgets end to end: two gateway replicas, the real auth server on PostgreSQL, Redis
//! (and a Redis Cluster), and a fake upstream reporting chosen usage. The model costs $1 per
//! million tokens in and out, so a call costs one micro-dollar per token; every call below
//! reserves 5 prompt tokens and 95 completion tokens: 100 micro-dollars.

use crate::support;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use support::stack::{Stack, body};
use support::{LIVE_MODEL, Reply, Script, chunk, client, completion, next_data, open, send};
use svc_testkit::RedisCluster;

const PRICE: &str = "{ input = 1.0, output = 1.0 }";
/// What every call reserves, in micro-dollars.
const WORST_CASE: i64 = 100;

/// A completion whose usage totals `total` tokens (so it costs `total` micro-dollars).
fn used(total: i64) -> Script {
    let mut json = completion("ok");
    json["usage"] = serde_json::json!({
        "prompt_tokens": 5, "completion_tokens": total - 5, "total_tokens": total
    });
    Script::Json(200, json, vec![])
}

fn chat_body() -> serde_json::Value {
    serde_json::json!({
        "model": LIVE_MODEL,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 95,
    })
}

/// A chat call through `gateway` as `bearer`, acting as the seeded active agent.
async fn call(stack: &Stack, gateway: &svc_gateway::Running, bearer: &str) -> Reply {
    call_with(stack, gateway, bearer, &[]).await
}

async fn call_with(
    stack: &Stack,
    gateway: &svc_gateway::Running,
    bearer: &str,
    headers: &[(&str, &str)],
) -> Reply {
    let mut request = stack.chat(gateway).body(body(&chat_body())).unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {bearer}").parse().unwrap());
    for (name, value) in headers {
        request.headers_mut().insert(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    send(&client(), request).await
}

/// `x-svc-budget-remaining-usd` in micro-dollars.
fn remaining(reply: &Reply) -> i64 {
    let dollars: f64 = reply
        .header("x-svc-budget-remaining-usd")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("x-svc-budget-remaining-usd on {:?}", reply.headers));
    (dollars * 1e6).round() as i64
}

/// What the seeded org's budgets spent, by scope, once the ledger has written `at_least`.
async fn spent(stack: &Stack, scope: &str, at_least: i64) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let spent = stack
            .budgets()
            .await
            .into_iter()
            .find(|b| b.scope == scope)
            .and_then(|b| b.spent_usd_micros)
            .unwrap_or(0);
        if spent >= at_least || Instant::now() > deadline {
            return spent;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// 64 calls at once, split across `replicas`, as the seeded chat token.
async fn race(stack: &Stack, replicas: &[svc_gateway::Running]) -> Vec<Reply> {
    futures_util::stream::iter(0..64)
        .map(|i| call(stack, &replicas[i % replicas.len()], &stack.seed.chat_token))
        .buffer_unordered(64)
        .collect()
        .await
}

fn assert_ten_of_sixty_four(replies: &[Reply], stack: &Stack) {
    let passed = replies.iter().filter(|r| r.status.as_u16() == 200).count();
    assert_eq!(passed, 10, "a budget of ten reservations admits ten");
    for reply in replies.iter().filter(|r| r.status.as_u16() != 200) {
        assert_eq!(reply.status.as_u16(), 429, "{:?}", reply.code());
        assert_eq!(reply.code(), "BUDGET_EXCEEDED");
        let detail = reply.json()["error"]["detail"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(detail.contains("agent budget"), "{detail}");
        assert!(
            reply.header("retry-after").is_some(),
            "a day budget resets within a day"
        );
        assert!(remaining(reply) < WORST_CASE);
    }
    assert_eq!(
        stack.upstream.seen().len(),
        10,
        "refused calls reach no provider"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_racing_calls_on_two_replicas_spend_exactly_an_agent_budget_of_ten() {
    let stack = Stack::start(used(100)).await;
    let agent = stack.agent("active").to_string();
    stack
        .set_budget("agent", &agent, 10 * WORST_CASE, "day")
        .await;
    let vars = [
        ("SVC_RATE_LIMIT_TPM_TIMEOUT", "5s"),
        ("SVC_RATE_LIMIT_RPM", "100000"),
    ];
    let replicas = [
        stack.gateway_priced(Some(PRICE), &vars).await,
        stack.gateway_priced(Some(PRICE), &vars).await,
    ];
    let replies = race(&stack, &replicas).await;
    assert_ten_of_sixty_four(&replies, &stack);
    // The ledger's spend is the budget, never more.
    assert_eq!(
        spent(&stack, "agent", 10 * WORST_CASE).await,
        10 * WORST_CASE
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_a_redis_cluster_the_same_race_spends_the_same_budget() {
    let cluster = RedisCluster::shared();
    let url = cluster.url();
    let stack = Stack::start(used(100)).await;
    let agent = stack.agent("active").to_string();
    stack
        .set_budget("agent", &agent, 10 * WORST_CASE, "day")
        .await;
    let vars = [
        ("REDIS_URL", url.as_str()),
        ("SVC_RATE_LIMIT_TPM_TIMEOUT", "5s"),
        ("SVC_RATE_LIMIT_RPM", "100000"),
    ];
    let replicas = [
        stack.gateway_priced(Some(PRICE), &vars).await,
        stack.gateway_priced(Some(PRICE), &vars).await,
    ];
    let replies = race(&stack, &replicas).await;
    assert_ten_of_sixty_four(&replies, &stack);
    assert_eq!(
        spent(&stack, "agent", 10 * WORST_CASE).await,
        10 * WORST_CASE
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_that_used_little_gives_the_rest_back_and_the_total_meets_the_limit() {
    // Each call reserves 100 and uses 25.
    let stack = Stack::start(used(25)).await;
    let limit = 1_000;
    stack.set_budget("org", "", limit, "month").await;
    let gateway = stack.gateway_priced(Some(PRICE), &[]).await;
    let mut admitted = 0;
    loop {
        // A refusal right after a call may only mean its settlement is still on its way:
        // give it a moment, bounded.
        let deadline = Instant::now() + Duration::from_secs(2);
        let reply = loop {
            let reply = call(&stack, &gateway, &stack.seed.chat_token).await;
            if reply.status.as_u16() == 200 || Instant::now() > deadline {
                break reply;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        if reply.status.as_u16() != 200 {
            assert_eq!(reply.code(), "BUDGET_EXCEEDED");
            break;
        }
        admitted += 1;
        assert!(admitted <= 40, "more calls than the budget holds");
    }
    let total = admitted * 25;
    assert!(
        (limit - WORST_CASE..=limit).contains(&total),
        "{admitted} calls spent {total} of {limit}"
    );
    assert_eq!(spent(&stack, "org", total).await, total);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tightest_budget_answers_with_its_scope() {
    let stack = Stack::start(used(100)).await;
    let (token_id, token) = stack.token_with(1).await;
    let agent = stack.agent("active").to_string();
    stack.set_budget("org", "", 100_000, "month").await;
    stack.set_budget("agent", &agent, 10_000, "week").await;
    stack
        .set_budget("token", &token_id.to_string(), 150, "total")
        .await;
    let gateway = stack.gateway_priced(Some(PRICE), &[]).await;
    let first = call(&stack, &gateway, &token).await;
    assert_eq!(first.status.as_u16(), 200, "{:?}", first.code());
    assert_eq!(remaining(&first), 50, "the token's budget is the tightest");
    let refused = call(&stack, &gateway, &token).await;
    assert_eq!(refused.status.as_u16(), 429);
    assert_eq!(refused.code(), "BUDGET_EXCEEDED");
    let detail = refused.json()["error"]["detail"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        detail.contains("token budget of $0.00015 in total"),
        "{detail}"
    );
    assert!(
        refused.header("retry-after").is_none(),
        "a total budget never resets"
    );
    // Another token of the org still has the agent's and the org's.
    let other = call(&stack, &gateway, &stack.seed.chat_token).await;
    assert_eq!(other.status.as_u16(), 200, "{:?}", other.code());
    assert_eq!(remaining(&other), 10_000 - 100 - 100);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lost_counter_is_rebuilt_from_the_ledger_not_from_zero() {
    let stack = Stack::start(used(100)).await;
    stack.set_budget("org", "", 1_000, "day").await;
    let gateway = stack.gateway_priced(Some(PRICE), &[]).await;
    for _ in 0..3 {
        assert_eq!(
            call(&stack, &gateway, &stack.seed.chat_token)
                .await
                .status
                .as_u16(),
            200
        );
    }
    assert_eq!(
        spent(&stack, "org", 300).await,
        300,
        "the ledger has the three calls"
    );
    // The store loses every key of this test (FLUSHALL, for the test's own keys).
    let redis = redis::Client::open(svc_testkit::redis_url()).unwrap();
    let mut redis = redis.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}*", stack.redis_prefix))
        .query_async(&mut redis)
        .await
        .unwrap();
    assert!(!keys.is_empty());
    let _: i64 = redis::cmd("DEL")
        .arg(&keys)
        .query_async(&mut redis)
        .await
        .unwrap();
    let next = call(&stack, &gateway, &stack.seed.chat_token).await;
    assert_eq!(next.status.as_u16(), 200, "{:?}", next.code());
    assert_eq!(
        remaining(&next),
        1_000 - 300 - WORST_CASE,
        "rebuilt from the ledger"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_redis_budgeted_calls_fail_closed_unless_configured_open() {
    let stack = Stack::start(used(100)).await;
    let (budgeted_id, budgeted) = stack.token_with(1).await;
    let (_, free) = stack.token_with(1).await;
    stack
        .set_budget("token", &budgeted_id.to_string(), 1_000_000, "day")
        .await;
    let closed = stack
        .gateway_priced(Some(PRICE), &[("SVC_RATE_LIMIT_TPM_TIMEOUT", "200ms")])
        .await;
    let open = stack
        .gateway_priced(
            Some(PRICE),
            &[
                ("SVC_BUDGET_FAIL_OPEN", "true"),
                ("SVC_RATE_LIMIT_TPM_TIMEOUT", "200ms"),
            ],
        )
        .await;
    assert_eq!(call(&stack, &closed, &budgeted).await.status.as_u16(), 200);
    stack.redis_proxy.cut();
    let refused = call(&stack, &closed, &budgeted).await;
    assert_eq!(refused.status.as_u16(), 503);
    assert_eq!(refused.code(), "BUDGET_UNAVAILABLE");
    assert_eq!(call(&stack, &closed, &free).await.status.as_u16(), 200);
    assert_eq!(call(&stack, &open, &budgeted).await.status.as_u16(), 200);
    assert_eq!(call(&stack, &open, &free).await.status.as_u16(), 200);
    stack.redis_proxy.restore();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replay_is_not_charged_twice() {
    let stack = Stack::start(used(100)).await;
    stack.set_budget("org", "", 1_000, "day").await;
    let gateway = stack.gateway_priced(Some(PRICE), &[]).await;
    let key = [("idempotency-key", "budget-replay-1")];
    let first = call_with(&stack, &gateway, &stack.seed.chat_token, &key).await;
    assert_eq!(first.status.as_u16(), 200);
    let replay = call_with(&stack, &gateway, &stack.seed.chat_token, &key).await;
    assert_eq!(replay.status.as_u16(), 200);
    assert_eq!(replay.body, first.body);
    assert_eq!(stack.upstream.seen().len(), 1);
    let next = call(&stack, &gateway, &stack.seed.chat_token).await;
    assert_eq!(
        remaining(&next),
        1_000 - 100 - WORST_CASE,
        "one charge, not two"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_cut_short_is_charged_for_what_was_sent() {
    let first = chunk(&"x".repeat(1600));
    let stack = Stack::start(Script::Stream {
        before: vec![first.clone()],
        after: vec![chunk("never sent")],
        fail: false,
    })
    .await;
    stack.set_budget("org", "", 1_000_000, "day").await;
    let gateway = stack.gateway_priced(Some(PRICE), &[]).await;
    let mut streamed = chat_body();
    streamed["stream"] = serde_json::json!(true);
    let request = stack.chat(&gateway).body(body(&streamed)).unwrap();
    let response = open(&client(), request).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["x-svc-budget-remaining-usd"],
        "0.9999",
        "the worst case is held"
    );
    let mut stream = response.into_body();
    let data = tokio::time::timeout(Duration::from_secs(10), next_data(&mut stream))
        .await
        .expect("the first chunk arrives")
        .expect("a chunk");
    assert_eq!(data, first.as_bytes());
    drop(stream);
    // The prompt estimate (5 tokens) and a token per four bytes passed on, at $1 per million.
    let charged = 5 + i64::try_from(first.len().div_ceil(4)).unwrap();
    assert_eq!(spent(&stack, "org", charged).await, charged);
}
