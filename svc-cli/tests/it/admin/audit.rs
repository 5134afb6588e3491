//! `svc audit`: the trail of what the other commands did, newest first, by time and action.

use svc_auth_server::pat::Pat;

use super::{auth_server, items, svc, vars};

#[tokio::test(flavor = "multi_thread")]
async fn a_status_change_is_one_event_with_its_detail() {
    let auth = auth_server().await;
    let created = auth.json(&["agent", "create", "--json"]).await;
    let id = created["agent_id"].as_str().unwrap().to_owned();
    auth.json(&["agent", "pause", &id, "--reason", "runaway loop", "--json"])
        .await;

    let trail = auth
        .json(&["audit", "--action", "agent.status", "--json"])
        .await;
    let events = items(&trail, "events");
    assert_eq!(events.len(), 1, "{trail}");
    let event = &events[0];
    assert_eq!(event["action"], "agent.status");
    assert_eq!(event["outcome"], "ok");
    assert_eq!(event["target_id"], id.as_str());
    assert_eq!(event["org_id"], auth.seed.org_id.to_string());
    let admin = Pat::parse(&auth.seed.admin_token).unwrap();
    assert_eq!(event["actor_token_id"], admin.token_id().to_string());
    assert!(event["occurred_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(event["detail"]["from"], "active", "{event}");
    assert_eq!(event["detail"]["to"], "paused", "{event}");
    assert_eq!(event["detail"]["reason"], "runaway loop", "{event}");
    assert!(trail["next_page_token"].is_null(), "{trail}");
}

#[tokio::test(flavor = "multi_thread")]
async fn events_are_newest_first_and_bounded_by_since() {
    let auth = auth_server().await;
    let agent = auth.json(&["agent", "create", "--json"]).await;
    let user = auth.json(&["user", "create", "--json"]).await;
    // A refusal is in the trail too.
    let chat = vars(auth.server.grpc_addr, &auth.seed.chat_token);
    let refused = svc(&["agent", "create"], &chat).await;
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");

    let trail = auth.json(&["audit", "--since", "1h", "--json"]).await;
    let events = items(&trail, "events");
    let actions: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap(),
                e["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    let position = |wanted: (&str, &str)| {
        actions
            .iter()
            .position(|action| *action == wanted)
            .unwrap_or_else(|| panic!("{wanted:?} in {actions:?}"))
    };
    let denied = position(("agent.create", "denied"));
    let user_created = position(("user.create", "ok"));
    let agent_created = position(("agent.create", "ok"));
    assert!(
        denied < user_created && user_created < agent_created,
        "{actions:?}"
    );
    assert_eq!(events[user_created]["target_id"], user["user_id"]);
    assert_eq!(events[agent_created]["target_id"], agent["agent_id"]);
    let times: Vec<&str> = events
        .iter()
        .map(|e| e["occurred_at"].as_str().unwrap())
        .collect();
    assert!(times.windows(2).all(|pair| pair[0] >= pair[1]), "{times:?}");

    // Nothing has happened since a time in the future.
    let later = auth
        .json(&["audit", "--since", "2999-01-01T00:00:00Z", "--json"])
        .await;
    assert!(items(&later, "events").is_empty(), "{later}");

    let env = auth.admin_env();
    let output = svc(&["audit", "--action", "user.create"], &env).await;
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("OCCURRED"), "{text}");
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[1].contains("user.create") && lines[1].contains(" ok "),
        "{text}"
    );
}
