//! The kill switch across replicas: an agent's status change takes effect on its very next
//! request on every gateway, both ways, with no cache in between.

use crate::support;

use serde_json::json;
use support::stack::{Stack, body};
use support::{LIVE_MODEL, Script, client, completion, send};

#[tokio::test]
async fn pausing_an_agent_stops_its_next_request_on_every_replica_and_resuming_lets_it_pass() {
    let stack = Stack::start(Script::Json(200, completion("hello"), vec![])).await;
    let (a, b) = (stack.gateway(&[]).await, stack.gateway(&[]).await);
    let http = client();
    let agent = stack.agent("active");
    let ask = |gateway: &svc_gateway::Running| {
        stack
            .chat(gateway)
            .body(body(&json!({
                "model": LIVE_MODEL,
                "messages": [{"role": "user", "content": "hi"}],
            })))
            .unwrap()
    };
    for gateway in [&a, &b] {
        assert_eq!(send(&http, ask(gateway)).await.status, 200);
    }
    for stop in ["paused", "suspended"] {
        let calls_before = stack.upstream.seen().len();
        stack.set_agent_status(agent, stop).await;
        for gateway in [&a, &b] {
            let refused = send(&http, ask(gateway)).await;
            assert_eq!(refused.status, 403, "{stop}: {:?}", refused.body);
            assert_eq!(refused.json()["error"]["code"], "AGENT_SUSPENDED");
        }
        let seen: Vec<String> = stack
            .upstream
            .seen()
            .iter()
            .map(|s| s.path.clone())
            .collect();
        assert_eq!(
            seen.len(),
            calls_before,
            "a stopped agent reaches no provider: {seen:?}"
        );
        stack.set_agent_status(agent, "active").await;
        for gateway in [&a, &b] {
            let passed = send(&http, ask(gateway)).await;
            assert_eq!(passed.status, 200, "resumed from {stop}: {:?}", passed.body);
        }
    }

    // Archived is final: refused everywhere, and it cannot be resumed.
    stack.set_agent_status(agent, "archived").await;
    for gateway in [&a, &b] {
        let refused = send(&http, ask(gateway)).await;
        assert_eq!(refused.status, 403);
        assert_eq!(refused.json()["error"]["code"], "AGENT_SUSPENDED");
    }
}

#[tokio::test]
async fn revoking_an_issuer_stops_its_child_and_grandchild_on_every_replica() {
    let stack = Stack::start(Script::Json(200, completion("hello"), vec![])).await;
    let (a, b) = (stack.gateway(&[]).await, stack.gateway(&[]).await);
    let http = client();
    // CHAT_COMPLETIONS and TOKEN_CREATE: each can call and mint the next.
    let minting = 1 | 1 << 1;
    let (issuer_id, issuer) = stack.token_with(minting).await;
    let (_, child) = stack.mint_as(&issuer, minting, None, None).await;
    let (_, grandchild) = stack.mint_as(&child, 1, None, None).await;
    let ask = |gateway: &svc_gateway::Running, token: &str| {
        stack
            .chat_as(gateway, token)
            .body(body(&json!({
                "model": LIVE_MODEL,
                "messages": [{"role": "user", "content": "hi"}],
            })))
            .unwrap()
    };
    for gateway in [&a, &b] {
        for token in [&issuer, &child, &grandchild] {
            assert_eq!(send(&http, ask(gateway, token)).await.status, 200);
        }
    }
    stack.revoke(issuer_id).await;
    for gateway in [&a, &b] {
        for token in [&issuer, &child, &grandchild] {
            let refused = send(&http, ask(gateway, token)).await;
            assert_eq!(refused.status, 401, "{:?}", refused.body);
            assert_eq!(refused.json()["error"]["code"], "INVALID_TOKEN");
        }
    }
}
