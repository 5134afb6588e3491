use svc_auth_server::seed::ADMIN_PERMISSIONS;
use svc_auth_server::store::SqliteStore;
use svc_auth_server::verify::Argon2Params;
use svc_testkit::TempDir;

use super::*;

fn cheap_hasher() -> Hasher {
    let params = Argon2Params {
        memory_kib: 8,
        iterations: 1,
        parallelism: 1,
    };
    Hasher::new(params, 2).unwrap()
}

async fn store_in(dir: &TempDir) -> SqliteStore {
    SqliteStore::open(dir.path().join("identity.db"))
        .await
        .unwrap()
}

#[tokio::test]
async fn a_second_start_reuses_the_identity_with_a_fresh_chat_token() {
    let dir = TempDir::create();
    let state_path = dir.path().join("dev-state.json");
    let store = store_in(&dir).await;
    let hasher = cheap_hasher();

    let first = prepare(&store, &hasher, &state_path).await.unwrap();
    assert!(!first.reused);
    let second = prepare(&store, &hasher, &state_path).await.unwrap();
    assert!(second.reused);
    assert_eq!(second.org_id, first.org_id);
    assert_eq!(second.agent_id, first.agent_id);
    assert_eq!(second.admin_token, first.admin_token);
    assert_ne!(second.chat_token, first.chat_token);

    let agent = store
        .agent(first.org_id, first.agent_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(agent.status, AgentStatus::Active);
}

#[tokio::test]
async fn the_tokens_verify_with_their_permissions_and_binding() {
    let dir = TempDir::create();
    let store = store_in(&dir).await;
    let hasher = cheap_hasher();
    let identity = prepare(&store, &hasher, &dir.path().join("state.json"))
        .await
        .unwrap();

    let chat = Pat::parse(&identity.chat_token).unwrap();
    let record = store
        .token_for_validation(chat.token_id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.org_id, identity.org_id);
    assert_eq!(record.permissions, CHAT_PERMISSIONS);
    assert_eq!(record.agent_id, Some(identity.agent_id));
    assert!(
        hasher
            .verify(&record.secret_hash, chat.secret())
            .await
            .unwrap()
    );

    let admin = Pat::parse(&identity.admin_token).unwrap();
    let record = store
        .token_for_validation(admin.token_id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.permissions, ADMIN_PERMISSIONS);
    assert_eq!(record.agent_id, None);
    assert!(
        hasher
            .verify(&record.secret_hash, admin.secret())
            .await
            .unwrap()
    );

    assert!(!format!("{identity:?}").contains(&identity.chat_token));
    assert!(!format!("{identity:?}").contains(&identity.admin_token));
}

#[cfg(unix)]
#[tokio::test]
async fn the_state_file_is_private_and_holds_no_chat_token() {
    use std::os::unix::fs::PermissionsExt;

    let dir = TempDir::create();
    let state_path = dir.path().join("dev-state.json");
    let store = store_in(&dir).await;
    let identity = prepare(&store, &cheap_hasher(), &state_path).await.unwrap();
    let mode = std::fs::metadata(&state_path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let text = std::fs::read_to_string(&state_path).unwrap();
    assert!(text.contains(&identity.agent_id.to_string()));
    assert!(!text.contains(&identity.chat_token));
}

#[tokio::test]
async fn a_state_file_for_another_database_starts_over() {
    let dir = TempDir::create();
    let state_path = dir.path().join("dev-state.json");
    let hasher = cheap_hasher();
    let first = prepare(&store_in(&dir).await, &hasher, &state_path)
        .await
        .unwrap();

    // Same state file, empty database: nothing it names exists there.
    let other = SqliteStore::in_memory().await.unwrap();
    let again = prepare(&other, &hasher, &state_path).await.unwrap();
    assert!(!again.reused);
    assert_ne!(again.org_id, first.org_id);
    let rewritten = std::fs::read_to_string(&state_path).unwrap();
    assert!(rewritten.contains(&again.org_id.to_string()));
}

#[tokio::test]
async fn a_revoked_admin_token_is_replaced() {
    let dir = TempDir::create();
    let state_path = dir.path().join("dev-state.json");
    let store = store_in(&dir).await;
    let hasher = cheap_hasher();
    let first = prepare(&store, &hasher, &state_path).await.unwrap();
    let admin = Pat::parse(&first.admin_token).unwrap();
    store
        .revoke_token(first.org_id, admin.token_id(), None)
        .await
        .unwrap()
        .unwrap();

    let again = prepare(&store, &hasher, &state_path).await.unwrap();
    assert!(!again.reused);
    assert_ne!(again.admin_token, first.admin_token);
}

#[tokio::test]
async fn a_damaged_state_file_is_an_error_naming_it() {
    let dir = TempDir::create();
    let state_path = dir.path().join("dev-state.json");
    std::fs::write(&state_path, b"{not json").unwrap();
    let store = SqliteStore::in_memory().await.unwrap();
    let error = prepare(&store, &cheap_hasher(), &state_path)
        .await
        .unwrap_err();
    assert!(matches!(error, IdentityError::Corrupt(_)), "{error:?}");
    assert!(error.to_string().contains("dev-state.json"));
}
