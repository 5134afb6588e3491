//! `svc user`: create and list, and a token minted for the new user.

use super::{auth_server, items, one_line, svc, vars};

#[tokio::test(flavor = "multi_thread")]
async fn a_created_user_is_listed_and_can_own_a_token() {
    let auth = auth_server().await;
    let created = auth
        .json(&["user", "create", "--name", "ada", "--json"])
        .await;
    let id = created["user_id"].as_str().expect("an id").to_owned();
    assert_eq!(created["org_id"], auth.seed.org_id.to_string());
    assert_eq!(created["name"], "ada");
    assert!(created["created_at"].as_str().unwrap().ends_with('Z'));

    let listed = auth.json(&["user", "list", "--json"]).await;
    assert!(listed["next_page_token"].is_null(), "{listed}");
    let users = items(&listed, "users");
    let row = users
        .iter()
        .find(|user| user["user_id"] == id.as_str())
        .expect("the new user is listed");
    assert_eq!(row["name"], "ada");
    // The seeded owner is a user of the org too.
    assert!(
        users
            .iter()
            .any(|user| user["user_id"] == auth.seed.user_id.to_string()),
        "{listed}"
    );

    let token = auth
        .json(&["token", "create", "--user-id", &id, "--json"])
        .await;
    assert!(token["token"].as_str().unwrap().starts_with("svc_pat_"));

    let env = auth.admin_env();
    let output = svc(&["user", "list"], &env).await;
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.starts_with("USER ID"), "{text}");
    assert!(
        text.lines()
            .any(|line| line.starts_with(&id) && line.contains("ada"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_without_user_manage_is_refused() {
    let auth = auth_server().await;
    let chat = vars(auth.server.grpc_addr, &auth.seed.chat_token);
    let stderr = one_line(&svc(&["user", "create", "--name", "x"], &chat).await, 1);
    assert!(
        stderr.starts_with("error: CreateUser: PermissionDenied"),
        "{stderr}"
    );
    let stderr = one_line(&svc(&["user", "list", "--json"], &chat).await, 1);
    assert!(
        stderr.starts_with("error: ListUsers: PermissionDenied"),
        "{stderr}"
    );
}
