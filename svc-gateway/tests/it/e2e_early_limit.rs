//! The org's rate limit asked at the same moment as the auth service: each request is counted
//! once, and a request the auth service refuses spends nothing, however many arrive.

use crate::support;

use support::stack::{Stack, body};
use support::{LIVE_MODEL, Script, chat_body, client, completion, send};

#[tokio::test]
async fn a_flood_of_a_revoked_token_cannot_spend_its_orgs_limit() {
    let stack = Stack::start(Script::Json(200, completion("hello"), vec![])).await;
    // No limit on refused tokens per client address: the flood comes from one.
    let gateway = stack
        .gateway(&[
            ("SVC_RATE_LIMIT_RPM", "6"),
            ("SVC_AUTH_FAILURES_PER_MINUTE", "0"),
        ])
        .await;
    let http = client();
    let ask = |token: &str| {
        stack
            .chat_as(&gateway, token)
            .body(body(&chat_body(LIVE_MODEL)))
            .unwrap()
    };
    let (revoked_id, revoked) = stack.token_with(1).await;
    // The first request of a token is limited after authentication; the next ones are asked
    // early. Each is counted once.
    let mut remaining = Vec::new();
    for _ in 0..3 {
        let passed = send(&http, ask(&revoked)).await;
        assert_eq!(passed.status, 200, "{:?}", passed.body);
        remaining.push(passed.header("x-ratelimit-remaining").map(str::to_owned));
    }
    assert_eq!(remaining, ["5", "4", "3"].map(|n| Some(n.to_owned())));

    stack.revoke(revoked_id).await;
    let flood = (0..64).map(|_| send(&http, ask(&revoked)));
    for refused in futures_util::future::join_all(flood).await {
        assert_eq!(refused.status, 401, "{:?}", refused.body);
        assert_eq!(refused.json()["error"]["code"], "INVALID_TOKEN");
    }
    let (_, other) = stack.token_with(1).await;
    let after = send(&http, ask(&other)).await;
    assert_eq!(after.status, 200, "{:?}", after.body);
    assert_eq!(
        after.header("x-ratelimit-remaining"),
        Some("2"),
        "the revoked token's flood spent none of the org's limit"
    );
}

#[tokio::test]
async fn a_paused_agents_flood_cannot_spend_its_orgs_limit() {
    let stack = Stack::start(Script::Json(200, completion("hello"), vec![])).await;
    let gateway = stack.gateway(&[("SVC_RATE_LIMIT_RPM", "6")]).await;
    let http = client();
    let (_, token) = stack.token_with(1).await;
    let ask = || {
        stack
            .chat_as(&gateway, &token)
            .body(body(&chat_body(LIVE_MODEL)))
            .unwrap()
    };
    for expected in ["5", "4"] {
        let passed = send(&http, ask()).await;
        assert_eq!(passed.status, 200, "{:?}", passed.body);
        assert_eq!(passed.header("x-ratelimit-remaining"), Some(expected));
    }
    let agent = stack.agent("active");
    stack.set_agent_status(agent, "paused").await;
    let flood = (0..64).map(|_| send(&http, ask()));
    for refused in futures_util::future::join_all(flood).await {
        assert_eq!(refused.status, 403, "{:?}", refused.body);
        assert_eq!(refused.json()["error"]["code"], "AGENT_SUSPENDED");
    }
    stack.set_agent_status(agent, "active").await;
    let resumed = send(&http, ask()).await;
    assert_eq!(resumed.status, 200, "{:?}", resumed.body);
    assert_eq!(
        resumed.header("x-ratelimit-remaining"),
        Some("3"),
        "the paused agent's flood spent none of the org's limit"
    );
}
