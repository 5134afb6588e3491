//! `svc budget`: set, list and delete budgets on the org, an agent and a token.

use super::{auth_server, items, one_line, svc};

#[tokio::test(flavor = "multi_thread")]
async fn budgets_are_set_listed_in_dollars_and_deleted() {
    let auth = auth_server().await;
    let agent = auth.seed.agents[0].agent_id.to_string();
    let set = auth
        .json(&[
            "budget", "set", "--org", "--usd", "25", "--per", "month", "--json",
        ])
        .await;
    assert_eq!(set["scope"], "org");
    assert_eq!(set["target_id"], "");
    assert_eq!(set["limit_usd_micros"], 25_000_000);
    assert_eq!(set["period"], "month");
    let set = auth
        .json(&[
            "budget", "set", "--agent", &agent, "--usd", "0.5", "--per", "day", "--json",
        ])
        .await;
    assert_eq!(set["limit_usd_micros"], 500_000);

    let listed = auth.json(&["budget", "list", "--json"]).await;
    let budgets = items(&listed, "budgets");
    assert_eq!(budgets.len(), 2, "{listed}");
    assert_eq!(budgets[0]["scope"], "org");
    assert_eq!(budgets[1]["target_id"], agent.as_str());
    assert_eq!(budgets[1]["spent_usd_micros"], 0);

    let env = auth.admin_env();
    let human = svc(&["budget", "list"], &env).await;
    assert!(human.status.success());
    let text = String::from_utf8(human.stdout).unwrap();
    assert!(text.starts_with("SCOPE"), "{text}");
    assert!(
        text.contains("25.000000") && text.contains("0.500000"),
        "{text}"
    );

    let deleted = auth
        .json(&["budget", "delete", "--agent", &agent, "--json"])
        .await;
    assert_eq!(deleted["deleted"], true);
    let stderr = one_line(
        &svc(&["budget", "delete", "--agent", &agent], &env).await,
        1,
    );
    assert!(
        stderr.starts_with("error: DeleteBudget: NotFound"),
        "{stderr}"
    );
    assert_eq!(
        items(&auth.json(&["budget", "list", "--json"]).await, "budgets").len(),
        1
    );

    // Each change is in the audit trail.
    let trail = auth
        .json(&["audit", "--action", "budget.set", "--json"])
        .await;
    assert_eq!(items(&trail, "events").len(), 2, "{trail}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_outside_the_org_is_refused_in_one_line() {
    let auth = auth_server().await;
    let env = auth.admin_env();
    let stranger = uuid::Uuid::new_v4().to_string();
    let output = svc(
        &[
            "budget", "set", "--agent", &stranger, "--usd", "1", "--per", "day",
        ],
        &env,
    )
    .await;
    let stderr = one_line(&output, 1);
    assert!(
        stderr.starts_with("error: SetBudget: PermissionDenied"),
        "{stderr}"
    );
    // Bad usage is exit 2 before any call.
    let output = svc(
        &["budget", "set", "--org", "--usd", "1", "--per", "year"],
        &env,
    )
    .await;
    assert_eq!(output.status.code(), Some(2));
}
