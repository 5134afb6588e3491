//! `svc token`: create, then validate, list, revoke, then validate fails; `--json` output
//! parses; bad usage exits 2 with one line.

use std::net::SocketAddr;

use svc_proto::v1::ValidateTokenRequest;
use svc_proto::v1::auth_service_client::AuthServiceClient;
use tonic::Code;

use super::{auth_server, items, json, one_line, svc, vars};

async fn validate(addr: SocketAddr, token: &str) -> Result<String, Code> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .expect("connect");
    let mut client = AuthServiceClient::new(channel);
    client
        .validate_token(ValidateTokenRequest {
            access_token: token.to_owned(),
            agent_id: None,
        })
        .await
        .map(|response| response.into_inner().org_id)
        .map_err(|status| status.code())
}

#[tokio::test(flavor = "multi_thread")]
async fn create_validate_list_revoke_then_validation_fails() {
    let auth = auth_server().await;
    let addr = auth.server.grpc_addr;
    let env = vars(addr, &auth.seed.admin_token);

    let created = json(
        &svc(
            &[
                "token",
                "create",
                "--permissions",
                "chat,embeddings",
                "--name",
                "ci",
                "--expires-in",
                "2h",
                "--rpm",
                "30",
                "--tpm",
                "40000",
                "--json",
            ],
            &env,
        )
        .await,
    );
    let token = created["token"].as_str().expect("plaintext once");
    let token_id = created["token_id"].as_str().unwrap().to_owned();
    assert!(token.starts_with(&format!("svc_pat_{token_id}_")));
    // Without --org-id the token lands in the admin token's org.
    assert_eq!(created["org_id"], auth.seed.org_id.to_string());
    assert_eq!(created["permissions"], 0b1_0001);
    assert_eq!(created["permission_names"], "chat,embeddings");
    assert!(created["expires_at"].as_str().is_some());
    assert_eq!(
        (created["rpm_limit"].as_u64(), created["tpm_limit"].as_u64()),
        (Some(30), Some(40_000))
    );
    assert_eq!(
        validate(addr, token).await,
        Ok(auth.seed.org_id.to_string())
    );

    let listed = json(&svc(&["token", "list", "--json"], &env).await);
    let tokens = listed["tokens"].as_array().unwrap();
    let row = tokens
        .iter()
        .find(|t| t["token_id"] == token_id.as_str())
        .expect("the new token is listed");
    assert_eq!(row["name"], "ci");
    assert_eq!(row["rpm_limit"], 30);
    assert!(row["revoked_at"].is_null());
    assert!(
        !listed.to_string().contains(token),
        "list never shows a secret"
    );

    let page = json(&svc(&["token", "list", "--page-size", "1", "--json"], &env).await);
    assert_eq!(page["tokens"].as_array().unwrap().len(), 1);
    assert!(page["next_page_token"].as_str().is_some(), "{page}");

    let revoked = json(&svc(&["token", "revoke", &token_id, "--json"], &env).await);
    assert_eq!(revoked["token_id"], token_id.as_str());
    assert!(revoked["revoked_at"].as_str().is_some());
    assert_eq!(validate(addr, token).await, Err(Code::Unauthenticated));
}

#[tokio::test(flavor = "multi_thread")]
async fn human_output_shows_the_token_once_and_lists_it() {
    let auth = auth_server().await;
    let env = vars(auth.server.grpc_addr, &auth.seed.admin_token);
    let output = svc(&["token", "create", "--name", "laptop"], &env).await;
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    let token = text
        .lines()
        .find_map(|line| line.strip_prefix("token:"))
        .map(str::trim)
        .expect("a token line");
    assert!(token.starts_with("svc_pat_"));
    assert!(text.contains("permissions: chat (1)"), "{text}");
    assert!(text.contains("limits:      org limits only"), "{text}");

    let output = svc(&["token", "list"], &env).await;
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.starts_with("TOKEN ID"), "{text}");
    assert!(text.contains("laptop") && !text.contains(token), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn refusals_are_one_line() {
    let auth = auth_server().await;
    let addr = auth.server.grpc_addr;
    let env = vars(addr, &auth.seed.admin_token);
    for bad in [
        &["token"][..],
        &["token", "mint"],
        &["token", "create", "--permissions", "root"],
        &["token", "revoke", "not-a-uuid"],
        &["token", "create", "--rpm", "0"],
        &["frobnicate"],
    ] {
        one_line(&svc(bad, &env).await, 2);
    }
    let stderr = one_line(&svc(&["token", "list"], &env[..1]).await, 2);
    assert!(stderr.contains("SVC_ADMIN_TOKEN"), "{stderr}");
    let stderr = one_line(&svc(&["token", "list"], &env[1..]).await, 2);
    assert!(stderr.contains("SVC_AUTH_GRPC_ADDR"), "{stderr}");

    // The server's refusals: the chat token holds no TOKEN_CREATE, and is not an admin.
    let chat = vars(addr, &auth.seed.chat_token);
    let stderr = one_line(&svc(&["token", "create"], &chat).await, 1);
    assert!(stderr.contains("CreateToken: PermissionDenied"), "{stderr}");
    assert!(!stderr.contains(&auth.seed.chat_token), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flag_is_never_taken_as_a_value() {
    let auth = auth_server().await;
    let env = auth.admin_env();
    // `--name` needs a value and `--json` is a flag: bad usage, not a token named "--json".
    let stderr = one_line(
        &svc(&["token", "create", "--name", "--json"], &env).await,
        2,
    );
    assert!(stderr.contains("--name"), "{stderr}");
    let listed = auth.json(&["token", "list", "--json"]).await;
    assert!(
        items(&listed, "tokens")
            .iter()
            .all(|t| t["name"] != "--json"),
        "{listed}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn revoke_takes_what_the_token_issued_unless_kept() {
    let auth = auth_server().await;
    let addr = auth.server.grpc_addr;
    let admin = vars(addr, &auth.seed.admin_token);
    let mint = |env: Vec<(&'static str, String)>| async move {
        let args = [
            "token",
            "create",
            "--permissions",
            "chat,token_create",
            "--json",
        ];
        json(&svc(&args, &env).await)
    };
    let issuer = mint(admin.clone()).await;
    let issuer_token = issuer["token"].as_str().unwrap().to_owned();
    let child = mint(vars(addr, &issuer_token)).await;
    let child_id = child["token_id"].as_str().unwrap();

    let issuer_id = issuer["token_id"].as_str().unwrap();
    let revoked = json(&svc(&["token", "revoke", issuer_id, "--json"], &admin).await);
    assert_eq!(revoked["issued_revoked"], serde_json::json!([child_id]));
    assert_eq!(
        validate(addr, child["token"].as_str().unwrap()).await,
        Err(Code::Unauthenticated)
    );

    let kept_issuer = mint(admin.clone()).await;
    let kept_child = mint(vars(addr, kept_issuer["token"].as_str().unwrap())).await;
    let kept_id = kept_issuer["token_id"].as_str().unwrap();
    let revoked = json(
        &svc(
            &["token", "revoke", kept_id, "--keep-issued", "--json"],
            &admin,
        )
        .await,
    );
    assert_eq!(revoked["issued_revoked"], serde_json::json!([]));
    assert!(
        validate(addr, kept_child["token"].as_str().unwrap())
            .await
            .is_ok()
    );
}
