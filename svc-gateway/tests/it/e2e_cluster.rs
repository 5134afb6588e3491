//! Two gateways on a real Redis Cluster (three primaries, three replicas on loopback): one
//! names every node in `REDIS_URL`, the other a single node. For 30 orgs, ten on each
//! primary's slots, the per-org limit and Idempotency-Key hold across both, as on one Redis.

use crate::support;

use std::cell::Cell;
use std::future::Future;
use std::time::Duration;

use serde_json::json;
use support::stack::{Stack, body};
use support::{LIVE_MODEL, Script, client, completion, send};
use svc_auth_server::seed::{self, SeedOptions, SeedOutput};
use svc_auth_server::store::AgentStatus;
use svc_testkit::RedisCluster;
use svc_testkit::redis_cluster::key_slot;
use uuid::Uuid;

const PER_PRIMARY: usize = 10;
const WITHIN: Duration = Duration::from_secs(10);

/// Store operations both gateways failed open so far, from their `/metrics`.
async fn store_failures(http: &support::HttpClient, gateways: &[&svc_gateway::Running]) -> u64 {
    let mut total = 0;
    for gateway in gateways {
        let reply = send(
            http,
            http::Request::get(format!("{}/metrics", gateway.url()))
                .body(Default::default())
                .unwrap(),
        )
        .await;
        total += String::from_utf8_lossy(&reply.body)
            .lines()
            .filter(|line| line.starts_with("svc_proxy_store_failures_total{"))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .sum::<u64>();
    }
    total
}

/// Orgs seeded with ids chosen so that each primary serves `PER_PRIMARY` of them, by primary.
async fn orgs_on_every_primary(stack: &Stack, cluster: &RedisCluster) -> Vec<Vec<SeedOutput>> {
    let via = cluster.nodes()[0];
    let topology = cluster.topology(via).expect("the cluster answers");
    let primaries: Vec<_> = topology.iter().filter(|n| n.primary).collect();
    assert_eq!(primaries.len(), 3, "{topology:?}");
    let mut orgs = Vec::new();
    for primary in primaries {
        let mut served = Vec::new();
        let ids = std::iter::repeat_with(Uuid::new_v4)
            .filter(|org| {
                let slot = key_slot(&org.to_string());
                primary.slots.iter().any(|&(a, b)| (a..=b).contains(&slot))
            })
            .take(PER_PRIMARY);
        for org_id in ids {
            let options = SeedOptions {
                org_id: Some(org_id),
                agent_statuses: vec![AgentStatus::Active],
            };
            let seeded = seed::run_with_config(&stack.auth_config, &options)
                .await
                .expect("seed");
            served.push(seeded);
        }
        orgs.push(served);
    }
    orgs
}

/// Runs `check` for every org; it says what went wrong, if anything. An org whose requests met
/// a store failure (counted in /metrics: the layers' budgets are 25 and 50 ms, which a starved
/// test machine can miss) failed open by design and is set aside, but at least half of each
/// primary's orgs must be checked.
async fn check_orgs<'a, F, Fut>(
    gateways: &[&svc_gateway::Running],
    orgs: &'a [Vec<SeedOutput>],
    mut check: F,
) where
    F: FnMut(&'a SeedOutput) -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let http = client();
    for (primary, orgs) in orgs.iter().enumerate() {
        let mut failed_open = Vec::new();
        for org in orgs {
            let failures = store_failures(&http, gateways).await;
            let verdict = check(org).await;
            if store_failures(&http, gateways).await > failures {
                failed_open.push((org.org_id, verdict));
            } else if let Err(wrong) = verdict {
                panic!("org {} on primary {primary}: {wrong}", org.org_id);
            }
        }
        if !failed_open.is_empty() {
            eprintln!("primary {primary}: failed open, not checked: {failed_open:?}");
        }
        assert!(
            failed_open.len() * 2 <= orgs.len(),
            "primary {primary}: too many orgs failed open to check: {failed_open:?}"
        );
    }
}

async fn is_ready(http: &support::HttpClient, gateway: &svc_gateway::Running) -> bool {
    let request = http::Request::get(format!("{}/ready", gateway.url()))
        .body(Default::default())
        .unwrap();
    send(http, request).await.status == 200
}

/// A gateway with `REDIS_URL` set to `url`, once it answers /ready (so it has found Redis).
async fn ready_gateway(stack: &Stack, url: &str, extra: &[(&str, &str)]) -> svc_gateway::Running {
    let mut vars = vec![("REDIS_URL", url)];
    vars.extend_from_slice(extra);
    let gateway = stack.gateway(&vars).await;
    let http = client();
    assert!(
        svc_testkit::eventually(WITHIN, || is_ready(&http, &gateway)).await,
        "a gateway on the cluster becomes ready"
    );
    gateway
}

/// Two gateways on the cluster: one names every node, the other a single one.
async fn gateways(
    stack: &Stack,
    cluster: &RedisCluster,
    extra: &[(&str, &str)],
) -> [svc_gateway::Running; 2] {
    let one_node = format!("redis://{}", cluster.nodes()[4]);
    [
        ready_gateway(stack, &cluster.url(), extra).await,
        ready_gateway(stack, &one_node, extra).await,
    ]
}

fn chat(
    gateway: &svc_gateway::Running,
    org: &SeedOutput,
    key: Option<&str>,
) -> http::Request<http_body_util::Full<bytes::Bytes>> {
    let active_agent = org
        .agents
        .iter()
        .find(|agent| agent.status == "active")
        .map(|agent| agent.agent_id)
        .expect("an active agent");
    let mut request = http::Request::post(format!("{}/v1/chat/completions", gateway.url()))
        .header("authorization", format!("Bearer {}", org.chat_token))
        .header("x-svc-agent-id", active_agent.to_string())
        .header("content-type", "application/json");
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    let content = json!({"model": LIVE_MODEL, "messages": [{"role": "user", "content": "hi"}]});
    request.body(body(&content)).unwrap()
}

#[tokio::test]
async fn the_org_limit_holds_for_orgs_on_every_primary() {
    let cluster = RedisCluster::shared();
    let stack = Stack::start(Script::Json(200, completion("ok"), vec![])).await;
    let orgs = orgs_on_every_primary(&stack, cluster).await;
    let [a, b] = &gateways(&stack, cluster, &[("SVC_RATE_LIMIT_RPM", "2")]).await;
    let http = client();

    let passed = Cell::new(0);
    check_orgs(&[a, b], &orgs, |org| {
        let (http, passed) = (&http, &passed);
        async move {
            let mut statuses = Vec::new();
            for gateway in [a, b, a, b] {
                statuses.push(send(http, chat(gateway, org, None)).await.status.as_u16());
            }
            passed.set(passed.get() + statuses.iter().filter(|s| **s == 200).count());
            match statuses[..] {
                [200, 200, 429, 429] => Ok(()),
                _ => Err(format!("statuses {statuses:?}")),
            }
        }
    })
    .await;
    assert_eq!(
        stack.upstream.seen().len(),
        passed.get(),
        "refused requests never reach the provider"
    );
}

#[tokio::test]
async fn idempotency_holds_for_orgs_on_every_primary() {
    let cluster = RedisCluster::shared();
    let stack = Stack::start(Script::Json(200, completion("once"), vec![])).await;
    let orgs = orgs_on_every_primary(&stack, cluster).await;
    let [a, b] = &gateways(&stack, cluster, &[]).await;
    let http = client();

    // The same key in every org: keys are per org, so each org calls the provider once.
    check_orgs(&[a, b], &orgs, |org| {
        let (http, stack) = (&http, &stack);
        async move {
            let calls = stack.upstream.seen().len();
            let (first, second) = tokio::join!(
                send(http, chat(a, org, Some("order-1"))),
                send(http, chat(b, org, Some("order-1")))
            );
            let mut statuses = [first.status.as_u16(), second.status.as_u16()];
            statuses.sort_unstable();
            let mut replays = Vec::new();
            for gateway in [a, b] {
                let replay = send(http, chat(gateway, org, Some("order-1"))).await;
                let replayed = replay.header("idempotent-replayed") == Some("true");
                replays.push((replay.status.as_u16(), replayed));
            }
            let calls = stack.upstream.seen().len() - calls;
            let concurrent_ok = statuses == [200, 200] || statuses == [200, 409];
            if concurrent_ok && replays == [(200, true), (200, true)] && calls == 1 {
                Ok(())
            } else {
                Err(format!(
                    "concurrent {statuses:?}, replays {replays:?}, provider calls {calls}"
                ))
            }
        }
    })
    .await;
}

#[tokio::test]
async fn a_gateway_started_before_the_cluster_answers_fails_open_then_limits() {
    let cluster = RedisCluster::shared();
    let stack = Stack::start(Script::Json(200, completion("ok"), vec![])).await;
    // Only the first dial goes through the proxy: the slot map names the nodes themselves.
    let proxy = svc_testkit::FaultProxy::start(cluster.nodes()[2]).await;
    proxy.cut();
    let url = format!("redis://{}", proxy.addr());
    let gateway = stack
        .gateway(&[("REDIS_URL", &url), ("SVC_RATE_LIMIT_RPM", "2")])
        .await;
    let http = client();
    assert!(
        !is_ready(&http, &gateway).await,
        "not ready while Redis is unreachable"
    );
    for _ in 0..3 {
        let reply = send(&http, chat(&gateway, &stack.seed, None)).await;
        assert_eq!(reply.status, 200, "fails open");
    }
    assert!(
        store_failures(&http, &[&gateway]).await >= 3,
        "and counts it"
    );

    proxy.restore();
    assert!(
        svc_testkit::eventually(WITHIN, || is_ready(&http, &gateway)).await,
        "ready once the cluster answers"
    );
    // Limiting resumes: within the limit of 2 and whatever a starved machine failed open.
    assert!(
        svc_testkit::eventually(WITHIN, || async {
            send(&http, chat(&gateway, &stack.seed, None)).await.status == 429
        })
        .await,
        "the limit applies again"
    );
}
