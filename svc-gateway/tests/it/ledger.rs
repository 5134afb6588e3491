//! The usage ledger end to end: two gateway replicas write it to PostgreSQL as their own role,
//! the real auth server sums it for GetUsage, and the totals equal what the upstream reported,
//! replays excluded, a database cut included.

use crate::support;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use support::stack::{Stack, body};
use support::{LIVE_MODEL, Reported, Script, client, send};
use svc_proto::v1::{GetUsageResponse, UsageGroupBy};
use tonic::Code;

fn chat_body() -> serde_json::Value {
    serde_json::json!({"model": LIVE_MODEL, "messages": [{"role": "user", "content": "hi"}]})
}

/// Every page of the seeded org's usage grouped by `group_by`, `page_size` at a time.
async fn all_pages(stack: &Stack, group_by: UsageGroupBy, page_size: i32) -> Vec<GetUsageResponse> {
    let mut pages = Vec::new();
    let mut token = String::new();
    loop {
        let page = stack
            .usage("", group_by, page_size, token)
            .await
            .expect("GetUsage");
        token = page.next_page_token.clone();
        pages.push(page);
        if token.is_empty() {
            return pages;
        }
    }
}

/// (requests, prompt, completion) summed over every group of every page.
fn sum(pages: &[GetUsageResponse]) -> (i64, i64, i64) {
    pages
        .iter()
        .flat_map(|p| &p.groups)
        .fold((0, 0, 0), |(r, p, c), g| {
            (r + g.requests, p + g.prompt_tokens, c + g.completion_tokens)
        })
}

/// Waits for the ledger to hold `reported.calls` calls, asserts its totals are exactly what
/// the upstream reported, and returns them.
async fn ledger_matches(stack: &Stack, reported: Reported) -> (i64, i64, i64) {
    let totals = ledger_reaches(stack, reported.calls, Duration::from_secs(30)).await;
    let expected = (
        reported.calls,
        reported.prompt_tokens,
        reported.completion_tokens,
    );
    assert_eq!(totals, expected);
    totals
}

/// The gateway's `/metrics` text.
async fn metrics(gateway: &svc_gateway::Running) -> String {
    let request = http::Request::get(format!("{}/metrics", gateway.url()))
        .body(Default::default())
        .unwrap();
    String::from_utf8_lossy(&send(&client(), request).await.body).into_owned()
}

/// Polls GetUsage until the org's totals reach `calls` requests (a bound, not a sleep).
async fn ledger_reaches(stack: &Stack, calls: i64, within: Duration) -> (i64, i64, i64) {
    let deadline = Instant::now() + within;
    loop {
        let totals = sum(&all_pages(stack, UsageGroupBy::Model, 50).await);
        if totals.0 >= calls || Instant::now() > deadline {
            return totals;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ledger_totals_equal_the_reported_usage_across_two_replicas_replays_excluded() {
    let stack = Stack::start(Script::Counted).await;
    let vars = [("SVC_RATE_LIMIT_RPM", "1000000")];
    let replicas = [stack.gateway(&vars).await, stack.gateway(&vars).await];
    let (second_id, second_token) = stack.token_with(1).await;
    let http = client();

    // 1,000 calls, alternating replicas and two tokens, 16 at a time.
    let calls = futures_util::stream::iter(0..1000)
        .map(|i| {
            let (stack, http, second_token) = (&stack, &http, &second_token);
            let gateway = &replicas[i % 2];
            async move {
                let mut request = stack.chat(gateway).body(body(&chat_body())).unwrap();
                if i % 3 == 0 {
                    let bearer = format!("Bearer {second_token}").parse().unwrap();
                    request.headers_mut().insert("authorization", bearer);
                }
                send(http, request).await.status.as_u16()
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    let failed: Vec<_> = calls.iter().filter(|s| **s != 200).collect();
    assert!(
        failed.is_empty(),
        "{} failed: {:?}",
        failed.len(),
        &failed[..failed.len().min(5)]
    );

    // Ten idempotent calls, each sent again through the other replica: the second is a replay.
    for i in 0..10 {
        for gateway in &replicas {
            let request = stack
                .chat(gateway)
                .header("idempotency-key", format!("ledger-{i}"))
                .body(body(&chat_body()))
                .unwrap();
            let reply = send(&http, request).await;
            assert_eq!(reply.status.as_u16(), 200);
        }
    }
    let reported = stack.upstream.reported();
    assert_eq!(reported.calls, 1010, "replays never reach the upstream");

    let totals = ledger_matches(&stack, reported).await;
    // Settled: nothing more arrives (a replay written late would show here).
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        sum(&all_pages(&stack, UsageGroupBy::Model, 50).await),
        totals
    );

    // Every grouping adds up to the same totals; by token, one page per token.
    let by_token = all_pages(&stack, UsageGroupBy::Token, 1).await;
    assert_eq!(by_token.len(), 2, "{by_token:?}");
    assert_eq!(sum(&by_token), totals);
    let second = by_token
        .iter()
        .flat_map(|p| &p.groups)
        .find(|g| g.key == second_id.to_string())
        .expect("the second token's group");
    assert_eq!(second.requests, 334);
    for group in [UsageGroupBy::Agent, UsageGroupBy::Day] {
        let pages = all_pages(&stack, group, 50).await;
        assert_eq!(sum(&pages), totals, "{group:?}");
    }
    let by_agent = all_pages(&stack, UsageGroupBy::Agent, 50).await;
    assert_eq!(by_agent[0].groups[0].key, stack.agent("active").to_string());
    let day = &all_pages(&stack, UsageGroupBy::Day, 50).await[0].groups[0];
    assert_eq!(day.key, chrono::Utc::now().format("%Y-%m-%d").to_string());
    assert_eq!(day.total_tokens, totals.1 + totals.2);
}

#[tokio::test(flavor = "multi_thread")]
async fn each_call_costs_its_usage_at_the_registry_price_and_unpriced_calls_are_counted() {
    let stack = Stack::start(Script::Counted).await;
    let priced = stack
        .gateway_priced(Some("{ input = 1.0, output = 2.0 }"), &[])
        .await;
    let http = client();
    for _ in 0..20 {
        let request = stack.chat(&priced).body(body(&chat_body())).unwrap();
        assert_eq!(send(&http, request).await.status.as_u16(), 200);
    }
    let reported = stack.upstream.reported();
    ledger_matches(&stack, reported).await;
    // $1 and $2 per million tokens: one micro-dollar per prompt token, two per completion token.
    let cost: i64 = all_pages(&stack, UsageGroupBy::Model, 50)
        .await
        .iter()
        .flat_map(|p| &p.groups)
        .map(|g| g.cost_usd_micros)
        .sum();
    assert_eq!(
        cost,
        reported.prompt_tokens + 2 * reported.completion_tokens
    );
    assert!(
        !metrics(&priced)
            .await
            .contains("svc_proxy_unpriced_calls_total 1"),
        "priced calls are not unpriced"
    );

    let unpriced = stack.gateway_priced(None, &[]).await;
    let request = stack.chat(&unpriced).body(body(&chat_body())).unwrap();
    assert_eq!(send(&http, request).await.status.as_u16(), 200);
    ledger_reaches(&stack, 21, Duration::from_secs(10)).await;
    let by_day = all_pages(&stack, UsageGroupBy::Day, 50).await;
    assert_eq!(
        by_day[0].groups[0].cost_usd_micros, cost,
        "an unpriced call costs 0"
    );
    assert!(
        metrics(&unpriced)
            .await
            .contains("svc_proxy_unpriced_calls_total 1"),
        "the unpriced call is counted"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_cut_short_is_charged_for_what_was_sent() {
    let first = support::chunk("a few words of an answer");
    let stack = Stack::start(Script::Stream {
        before: vec![first.clone()],
        after: vec![],
        fail: true,
    })
    .await;
    // One micro-dollar per token, input and output.
    let gateway = stack
        .gateway_priced(Some("{ input = 1, output = 1 }"), &[])
        .await;
    let mut chat = chat_body();
    chat["stream"] = serde_json::json!(true);
    let request = stack.chat(&gateway).body(body(&chat)).unwrap();
    let response = support::client::open(&client(), request).await;
    assert_eq!(response.status(), 200);
    let mut stream = response.into_body();
    let data = tokio::time::timeout(
        Duration::from_secs(10),
        support::client::next_data(&mut stream),
    )
    .await
    .expect("the first chunk arrives");
    assert!(data.is_some());
    // Now the upstream fails: the rest is the gateway's error event, then the end.
    stack.upstream.release();
    while tokio::time::timeout(
        Duration::from_secs(10),
        support::client::next_data(&mut stream),
    )
    .await
    .expect("the stream ends")
    .is_some()
    {}
    assert_eq!(
        ledger_reaches(&stack, 1, Duration::from_secs(10)).await,
        (1, 0, 0),
        "the provider reported no usage"
    );
    let cost = all_pages(&stack, UsageGroupBy::Model, 50).await[0].groups[0].cost_usd_micros;
    // At least a quarter of the bytes sent, as output tokens, plus some prompt estimate.
    let sent = i64::try_from(first.len().div_ceil(4)).unwrap();
    assert!(cost > sent, "cost {cost}, sent {sent} tokens' worth");
}

#[tokio::test(flavor = "multi_thread")]
async fn usage_is_the_orgs_own() {
    let stack = Stack::start(Script::Counted).await;
    let other = stack.other_org().await;
    let status = stack
        .usage(
            &other.org_id.to_string(),
            UsageGroupBy::Token,
            0,
            String::new(),
        )
        .await
        .expect_err("another org's usage");
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    // Naming its own org is the same as naming none.
    let own = stack
        .usage(
            &stack.seed.org_id.to_string(),
            UsageGroupBy::Token,
            0,
            String::new(),
        )
        .await
        .expect("own usage");
    assert!(own.groups.is_empty());

    // A call the provider refused is recorded with its status and no tokens.
    let gateway = stack.gateway(&[]).await;
    stack.upstream.set(Script::Json(
        400,
        serde_json::json!({"error": {"message": "bad", "type": "invalid_request_error"}}),
        vec![],
    ));
    let request = stack.chat(&gateway).body(body(&chat_body())).unwrap();
    assert_eq!(send(&client(), request).await.status.as_u16(), 400);
    assert_eq!(
        ledger_reaches(&stack, 1, Duration::from_secs(10)).await,
        (1, 0, 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ledger_writes_survive_a_database_cut_within_the_bound() {
    let stack = Stack::start(Script::Counted).await;
    let (db, dsn) = stack.db_proxy().await;
    let gateway = stack.gateway(&[("POSTGRES_DSN", &dsn)]).await;
    let http = client();
    let call = || async {
        let request = stack.chat(&gateway).body(body(&chat_body())).unwrap();
        let started = Instant::now();
        let status = send(&http, request).await.status.as_u16();
        (status, started.elapsed())
    };
    for _ in 0..10 {
        assert_eq!(call().await.0, 200);
    }
    assert_eq!(
        ledger_reaches(&stack, 10, Duration::from_secs(10)).await.0,
        10
    );

    // Five seconds without the database: calls go on, none waits on the ledger.
    db.cut();
    let cut_at = Instant::now();
    let mut during = 0;
    while cut_at.elapsed() < Duration::from_secs(5) {
        let (status, took) = call().await;
        assert_eq!(status, 200);
        assert!(took < Duration::from_secs(1), "a call waited {took:?}");
        during += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    db.restore();

    let reported = stack.upstream.reported();
    assert_eq!(reported.calls, 10 + during);
    ledger_matches(&stack, reported).await;
    let text = metrics(&gateway).await;
    assert!(
        text.contains("svc_ledger_records_total{outcome=\"dropped\"} 0")
            || !text.contains("outcome=\"dropped\""),
        "{text}"
    );
    assert!(text.contains("svc_ledger_write_failures_total"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn past_the_bound_records_are_dropped_and_counted() {
    let stack = Stack::start(Script::Counted).await;
    let (db, dsn) = stack.db_proxy().await;
    let gateway = stack
        .gateway(&[("POSTGRES_DSN", &dsn), ("SVC_LEDGER_BUFFER", "5")])
        .await;
    let http = client();
    db.cut();
    for _ in 0..8 {
        let request = stack.chat(&gateway).body(body(&chat_body())).unwrap();
        assert_eq!(send(&http, request).await.status.as_u16(), 200);
    }
    // Accounting runs just after each answer: poll the counter.
    let dropped = |text: &str| text.contains("svc_ledger_records_total{outcome=\"dropped\"} 3");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = metrics(&gateway).await;
        if dropped(&text) {
            break;
        }
        assert!(Instant::now() < deadline, "{text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    db.restore();
    let totals = ledger_reaches(&stack, 5, Duration::from_secs(30)).await;
    assert_eq!(totals.0, 5, "the bound's worth is kept");
}
