//! `svc agent`: create, get, list and the kill switch (pause, resume, suspend, archive).

use serde_json::Value;

use super::{auth_server, items, one_line, svc, vars};

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_moves_between_states_until_archived() {
    let auth = auth_server().await;
    let created = auth
        .json(&["agent", "create", "--name", "billing-bot", "--json"])
        .await;
    let id = created["agent_id"].as_str().expect("an id").to_owned();
    assert_eq!(created["org_id"], auth.seed.org_id.to_string());
    assert_eq!(created["name"], "billing-bot");
    assert_eq!(created["status"], "active");
    assert!(created["status_reason"].is_null(), "{created}");
    assert!(created["created_at"].as_str().unwrap().ends_with('Z'));

    let paused = auth
        .json(&["agent", "pause", &id, "--reason", "runaway loop", "--json"])
        .await;
    assert_eq!(paused["status"], "paused");
    let shown = auth.json(&["agent", "get", &id, "--json"]).await;
    assert_eq!(shown["status"], "paused");
    assert_eq!(shown["status_reason"], "runaway loop");
    assert_eq!(shown["name"], "billing-bot");

    for (command, status) in [
        ("resume", "active"),
        ("suspend", "suspended"),
        ("resume", "active"),
        ("archive", "archived"),
    ] {
        let moved = auth.json(&["agent", command, &id, "--json"]).await;
        assert_eq!(moved["status"], status, "{command}: {moved}");
        assert_eq!(moved["agent_id"], id.as_str());
    }

    // Archived is final: the server's refusal is one line and exit 1.
    let env = auth.admin_env();
    let stderr = one_line(&svc(&["agent", "resume", &id], &env).await, 1);
    assert!(
        stderr.starts_with("error: SetAgentStatus: FailedPrecondition"),
        "{stderr}"
    );
    let shown = auth.json(&["agent", "get", &id, "--json"]).await;
    assert_eq!(shown["status"], "archived");
}

#[tokio::test(flavor = "multi_thread")]
async fn list_filters_by_status_and_pages() {
    let auth = auth_server().await;
    let mut ids = Vec::new();
    for status in ["active", "paused", "paused"] {
        let created = auth
            .json(&["agent", "create", "--status", status, "--json"])
            .await;
        assert_eq!(created["status"], status);
        ids.push(created["agent_id"].as_str().unwrap().to_owned());
    }
    let ids_of = |listing: &Value| -> Vec<String> {
        items(listing, "agents")
            .iter()
            .map(|agent| agent["agent_id"].as_str().unwrap().to_owned())
            .collect()
    };

    let every = auth.json(&["agent", "list", "--json"]).await;
    assert!(every["next_page_token"].is_null(), "{every}");
    let listed = ids_of(&every);
    assert!(ids.iter().all(|id| listed.contains(id)), "{every}");

    let paused = auth
        .json(&["agent", "list", "--status", "paused", "--json"])
        .await;
    let mut paused_ids = ids_of(&paused);
    paused_ids.sort();
    let mut expected = ids[1..].to_vec();
    expected.sort();
    assert_eq!(paused_ids, expected);

    // One page at a time, following the printed cursor, reaches the same agents.
    let mut cursor: Option<String> = None;
    let mut paged = Vec::new();
    for _ in 0..=listed.len() {
        let mut args = vec!["agent", "list", "--page-size", "1", "--json"];
        if let Some(cursor) = &cursor {
            args.extend(["--page-token", cursor]);
        }
        let page = auth.json(&args).await;
        assert_eq!(items(&page, "agents").len(), 1, "{page}");
        paged.extend(ids_of(&page));
        cursor = page["next_page_token"].as_str().map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(paged, listed);
}

#[tokio::test(flavor = "multi_thread")]
async fn human_output_is_one_aligned_line_per_agent() {
    let auth = auth_server().await;
    let env = auth.admin_env();
    let output = svc(&["agent", "create", "--name", "laptop"], &env).await;
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("AGENT ID"), "{text}");
    assert!(
        lines[1].contains("laptop") && lines[1].contains("active"),
        "{text}"
    );
    let status_column = lines[0].find("STATUS").unwrap();
    assert_eq!(&lines[1][status_column..status_column + 6], "active");

    let output = svc(&["agent", "list"], &env).await;
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.starts_with("AGENT ID"), "{text}");
    assert!(text.contains("laptop"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn refusals_are_one_line() {
    let auth = auth_server().await;
    let env = auth.admin_env();
    // An id no agent of this org has: PermissionDenied, never NotFound.
    let unknown = uuid::Uuid::new_v4().to_string();
    let stderr = one_line(&svc(&["agent", "get", &unknown], &env).await, 1);
    assert!(
        stderr.starts_with("error: GetAgent: PermissionDenied"),
        "{stderr}"
    );
    // The chat token holds neither AGENT_MANAGE nor AGENT_READ.
    let chat = vars(auth.server.grpc_addr, &auth.seed.chat_token);
    let stderr = one_line(&svc(&["agent", "create"], &chat).await, 1);
    assert!(
        stderr.starts_with("error: CreateAgent: PermissionDenied"),
        "{stderr}"
    );
    assert!(!stderr.contains(&auth.seed.chat_token), "{stderr}");
    let stderr = one_line(&svc(&["agent", "list"], &chat).await, 1);
    assert!(
        stderr.starts_with("error: ListAgents: PermissionDenied"),
        "{stderr}"
    );

    for bad in [
        &["agent"][..],
        &["agent", "get", "not-a-uuid"],
        &["agent", "pause"],
        &["agent", "create", "--status", "asleep"],
        &["agent", "suspend", &unknown, "--reason"],
    ] {
        one_line(&svc(bad, &env).await, 2);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_replace_an_agents_grants_and_clear_removes_them() {
    let auth = auth_server().await;
    let created = auth.json(&["agent", "create", "--json"]).await;
    let id = created["agent_id"].as_str().expect("an id").to_owned();
    assert_eq!(created["tools"], serde_json::json!([]));
    let granted = auth
        .json(&["agent", "tools", &id, "srv/echo", "github/*", "--json"])
        .await;
    assert_eq!(
        granted["tools"],
        serde_json::json!(["srv/echo", "github/*"])
    );
    let env = auth.admin_env();
    let output = svc(&["agent", "get", &id], &env).await;
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.lines().next().unwrap().ends_with("TOOLS"), "{text}");
    assert!(text.contains("srv/echo,github/*"), "{text}");
    let cleared = auth
        .json(&["agent", "tools", &id, "--clear", "--json"])
        .await;
    assert_eq!(cleared["tools"], serde_json::json!([]));
    let stderr = one_line(&svc(&["agent", "tools", &id, "not-a-grant"], &env).await, 1);
    assert!(
        stderr.starts_with("error: SetAgentTools: InvalidArgument"),
        "{stderr}"
    );
}
