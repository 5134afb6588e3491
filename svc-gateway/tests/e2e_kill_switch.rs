//! The kill switch across replicas: an agent's status change takes effect on its very next
//! request on every gateway, both ways, with no cache in between.

mod support;

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
    let calls_before = stack.upstream.seen().len();

    for stop in ["paused", "suspended"] {
        stack.set_agent_status(agent, stop).await;
        for gateway in [&a, &b] {
            let refused = send(&http, ask(gateway)).await;
            assert_eq!(refused.status, 403, "{stop}: {}", refused.body);
            assert_eq!(refused.json()["error"]["code"], "AGENT_SUSPENDED");
        }
        assert_eq!(
            stack.upstream.seen().len(),
            calls_before,
            "a stopped agent reaches no provider"
        );
        stack.set_agent_status(agent, "active").await;
        for gateway in [&a, &b] {
            let passed = send(&http, ask(gateway)).await;
            assert_eq!(passed.status, 200, "resumed from {stop}: {}", passed.body);
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
