//! Two gateways on a real Redis Cluster (three primaries, three replicas on loopback): one
//! names every node in `REDIS_URL`, the other a single node. For 30 orgs, ten on each
//! primary's slots, the per-org limit and Idempotency-Key hold across both, as on one Redis.

mod support;

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

/// Orgs seeded with ids chosen so that each primary serves `PER_PRIMARY` of them.
async fn orgs_on_every_primary(stack: &Stack, cluster: &RedisCluster) -> Vec<SeedOutput> {
    let via = cluster.nodes()[0];
    let topology = cluster.topology(via).expect("the cluster answers");
    let primaries: Vec<_> = topology.iter().filter(|n| n.primary).collect();
    assert_eq!(primaries.len(), 3, "{topology:?}");
    let mut orgs = Vec::new();
    for primary in primaries {
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
            orgs.push(seeded);
        }
    }
    orgs
}

/// Two gateways on the cluster, answering /ready (so both have found it).
async fn gateways(
    stack: &Stack,
    cluster: &RedisCluster,
    extra: &[(&str, &str)],
) -> [svc_gateway::Running; 2] {
    let every_node = cluster.url();
    let one_node = format!("redis://{}", cluster.nodes()[4]);
    let mut started = Vec::new();
    for url in [&every_node, &one_node] {
        let mut vars = vec![("REDIS_URL", url.as_str())];
        vars.extend_from_slice(extra);
        let gateway = stack.gateway(&vars).await;
        let http = client();
        let ready = svc_testkit::eventually(WITHIN, || async {
            let reply = send(
                &http,
                http::Request::get(format!("{}/ready", gateway.url()))
                    .body(Default::default())
                    .unwrap(),
            )
            .await;
            reply.status == 200
        })
        .await;
        assert!(ready, "a gateway on the cluster becomes ready");
        started.push(gateway);
    }
    let [a, b]: [_; 2] = started.try_into().ok().expect("two gateways");
    [a, b]
}

fn chat(
    gateway: &svc_gateway::Running,
    org: &SeedOutput,
    key: Option<&str>,
) -> http::Request<http_body_util::Full<bytes::Bytes>> {
    let mut request = http::Request::post(format!("{}/v1/chat/completions", gateway.url()))
        .header("authorization", format!("Bearer {}", org.chat_token))
        .header("x-svc-agent-id", org.agents[0].agent_id.to_string())
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
    let [a, b] = gateways(&stack, cluster, &[("SVC_RATE_LIMIT_RPM", "2")]).await;
    let http = client();

    for org in &orgs {
        let mut statuses = Vec::new();
        for gateway in [&a, &b, &a, &b] {
            statuses.push(send(&http, chat(gateway, org, None)).await.status.as_u16());
        }
        assert_eq!(statuses, [200, 200, 429, 429], "org {}", org.org_id);
    }
    assert_eq!(
        stack.upstream.seen().len(),
        orgs.len() * 2,
        "refused requests never reach the provider"
    );
}

#[tokio::test]
async fn idempotency_holds_for_orgs_on_every_primary() {
    let cluster = RedisCluster::shared();
    let stack = Stack::start(Script::Json(200, completion("once"), vec![])).await;
    let orgs = orgs_on_every_primary(&stack, cluster).await;
    let [a, b] = gateways(&stack, cluster, &[]).await;
    let http = client();

    // The same key in every org: keys are per org, so each org calls the provider once.
    for org in &orgs {
        let (first, second) = tokio::join!(
            send(&http, chat(&a, org, Some("order-1"))),
            send(&http, chat(&b, org, Some("order-1")))
        );
        let mut statuses = [first.status.as_u16(), second.status.as_u16()];
        statuses.sort_unstable();
        assert!(
            statuses == [200, 200] || statuses == [200, 409],
            "org {}: {statuses:?}",
            org.org_id
        );
        for gateway in [&a, &b] {
            let replay = send(&http, chat(gateway, org, Some("order-1"))).await;
            assert_eq!(replay.status, 200, "org {}", org.org_id);
            assert_eq!(replay.header("idempotent-replayed"), Some("true"));
        }
    }
    assert_eq!(
        stack.upstream.seen().len(),
        orgs.len(),
        "one provider call per org and key, across both gateways"
    );
}
