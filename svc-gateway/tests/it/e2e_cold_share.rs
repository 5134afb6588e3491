//! A wrong-secret flood through the gateway, end to end with the real auth server and a small
//! cold lane: once the flooding org's share of the lane is spent, the auth server answers
//! COLD_SHARE_SPENT, the gateway answers 503 and counts it against the flooding address, and
//! the address reaches its limit (429) with fewer than the limit's worth of 401s. Another org's
//! never-verified token, from another address, validates on its first call meanwhile.

use crate::support;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use support::stack::{Stack, body};
use support::{HttpClient, LIVE_MODEL, Script, chat_body, client, client_from, completion, send};
use svc_auth_server::pat::Pat;
use svc_auth_server::seed::SeedOutput;
use uuid::Uuid;

/// The gateway's `SVC_AUTH_FAILURES_PER_MINUTE`.
const LIMIT: usize = 40;
/// Flooding requests in flight at once, all from 127.0.0.1.
const FLOODERS: usize = 16;
/// Bound on the flood reaching the limit.
const WITHIN: Duration = Duration::from_secs(30);
/// The other org's address.
const OTHER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 9));

#[derive(Default)]
struct Tally {
    invalid: AtomicUsize,
    degraded: AtomicUsize,
    limited: AtomicUsize,
    other: AtomicUsize,
}

fn chat(gateway: &svc_gateway::Running, token: &str, agent: Uuid) -> http::Request<Full<Bytes>> {
    http::Request::post(format!("{}/v1/chat/completions", gateway.url()))
        .header("authorization", format!("Bearer {token}"))
        .header("x-svc-agent-id", agent.to_string())
        .header("content-type", "application/json")
        .body(body(&chat_body(LIVE_MODEL)))
        .unwrap()
}

fn active_agent(seed: &SeedOutput) -> Uuid {
    seed.agents
        .iter()
        .find(|agent| agent.status == "active")
        .map(|agent| agent.agent_id)
        .unwrap()
}

/// Wrong secrets on `ids` (real token ids of the flooding org) until `stop`.
async fn flood(
    http: HttpClient,
    gateway: Arc<svc_gateway::Running>,
    ids: Vec<Uuid>,
    agent: Uuid,
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
) {
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let wrong = Pat::generate(ids[n % ids.len()]).expose();
        n += 1;
        let reply = send(&http, chat(&gateway, &wrong, agent)).await;
        let counter = match (reply.status.as_u16(), reply.code().as_str()) {
            (401, "INVALID_TOKEN") => &tally.invalid,
            (503, "SERVICE_DEGRADED") => &tally.degraded,
            (429, "RATE_LIMITED") => &tally.limited,
            _ => &tally.other,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cold_share_refusals_count_toward_the_address_limit_and_spare_other_orgs() {
    // A cold lane of four pending checks and one Argon2 run at a time: the flood spends its
    // share at once, and most of its secrets are refused without a hash.
    let stack = Stack::start_tuned(Script::Json(200, completion("hi"), vec![]), |config| {
        config.failure_limits.max_pending = 4;
        config.hash_concurrency = 1;
    })
    .await;
    let other = stack.other_org().await;
    let limit = LIMIT.to_string();
    let gateway = Arc::new(
        stack
            // The first call may wait for the Argon2 run under way on a loaded machine: what
            // is checked is that it passes, not how fast.
            .gateway(&[
                ("SVC_AUTH_FAILURES_PER_MINUTE", &limit),
                ("SVC_AUTH_VALIDATE_TIMEOUT", "5s"),
            ])
            .await,
    );
    let ids: Vec<Uuid> = [&stack.seed.chat_token, &stack.seed.admin_token]
        .iter()
        .map(|token| Pat::parse(token).unwrap().token_id())
        .collect();

    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let flooders: Vec<_> = (0..FLOODERS)
        .map(|_| {
            tokio::spawn(flood(
                client(),
                gateway.clone(),
                ids.clone(),
                stack.agent("active"),
                stop.clone(),
                tally.clone(),
            ))
        })
        .collect();
    let limited = svc_testkit::eventually(WITHIN, || async {
        tally.limited.load(Ordering::Relaxed) > 0
    })
    .await;

    // The other org's first call, from another address, while the flood still runs.
    let first = send(
        &client_from(OTHER),
        chat(&gateway, &other.chat_token, active_agent(&other)),
    )
    .await;
    // The flooding address is limited whatever the token: even a valid one waits.
    let own = send(
        &client(),
        stack
            .chat(&gateway)
            .body(body(&chat_body(LIVE_MODEL)))
            .unwrap(),
    )
    .await;

    stop.store(true, Ordering::Relaxed);
    for flooder in flooders {
        flooder.await.unwrap();
    }
    let [invalid, degraded, limited_count, unexpected] = [
        &tally.invalid,
        &tally.degraded,
        &tally.limited,
        &tally.other,
    ]
    .map(|n| n.load(Ordering::Relaxed));
    let counts = format!("401 {invalid}, 503 {degraded}, 429 {limited_count}, other {unexpected}");
    eprintln!("flood through the gateway: {counts}");
    assert!(
        limited,
        "the flooding address never reached its limit: {counts}"
    );
    assert_eq!(unexpected, 0, "{counts}");
    // The limit was reached by 503s as well: 401s alone never made it.
    assert!(degraded > 0, "{counts}");
    assert!(invalid < LIMIT, "{counts}");
    assert_eq!(
        first.status, 200,
        "the other org's first call: {:?}",
        first.body
    );
    assert_eq!(own.status, 429, "{:?}", own.body);
    assert_eq!(own.code(), "RATE_LIMITED");
}
