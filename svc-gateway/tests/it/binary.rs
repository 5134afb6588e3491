//! The `svc-gateway` binary: configuration errors exit 2 naming the variable, and the logs it
//! writes while serving never carry a token, a key or message content.

use crate::support;

use std::process::Command;

use http::Request;
use serde_json::json;
use support::logs::LoggedGateway;
use support::{
    LIVE_MODEL, PROVIDER_KEY, Script, Upstream, World, auth, client, completion, json_body, send,
};

const BIN: &str = env!("CARGO_BIN_EXE_svc-gateway");

#[test]
fn help_and_version_exit_0_and_an_unknown_flag_exits_2() {
    let run = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .env_clear()
            .output()
            .expect("run the binary")
    };
    for help in ["--help", "-h"] {
        let output = run(&[help]);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        let stdout = String::from_utf8(output.stdout).unwrap();
        assert!(stdout.contains("usage: svc-gateway"), "{stdout}");
        // Every variable the gateway reads, from its one list.
        for variable in [
            "SVC_AUTH_GRPC_ADDR",
            "SVC_PORT",
            "SVC_WRITE_TIMEOUT",
            "SVC_WORKER_THREADS",
            "SVC_AUTH_FAILURES_PER_MINUTE",
        ] {
            assert!(
                stdout.contains(variable),
                "{variable} missing from:\n{stdout}"
            );
        }
        assert!(output.stderr.is_empty());
    }
    let output = run(&["--version"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(output.stdout).unwrap().trim(),
        concat!("svc-gateway ", env!("CARGO_PKG_VERSION"))
    );
    let output = run(&["--fast"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(r#"error: unknown argument "--fast""#),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
}

#[test]
fn a_configuration_error_exits_2_with_one_line() {
    let output = Command::new(BIN)
        .env_clear()
        .env("SVC_PORT", "not-a-port")
        .output()
        .expect("run the binary");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("SVC_PORT") || stderr.contains("SVC_AUTH_GRPC_ADDR"),
        "{stderr}"
    );

    let output = Command::new(BIN)
        .env_clear()
        .env("SVC_AUTH_GRPC_ADDR", "127.0.0.1:9091")
        .env("SVC_ENV", "production")
        .env("SVC_GRPC_ALLOW_PLAINTEXT", "true")
        .output()
        .expect("run the binary");
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8(output.stderr)
            .unwrap()
            .contains("SVC_LLM_MODE")
    );
}

#[tokio::test]
async fn logs_carry_metadata_only() {
    let world = World::random();
    let auth_addr = auth::start(&world).await.to_string();
    let upstream = Upstream::start(Script::Json(200, completion("fine"), vec![])).await;
    let base_url = upstream.base_url();
    let gateway = LoggedGateway::start(&[
        ("SVC_AUTH_GRPC_ADDR", auth_addr.as_str()),
        ("SVC_AUTH_VALIDATE_TIMEOUT", "2s"),
        ("SVC_PROVIDER_BASE_URL", base_url.as_str()),
        ("SVC_PROVIDER_API_KEY", PROVIDER_KEY),
        ("SVC_PROVIDER_MODELS", LIVE_MODEL),
        ("SVC_LOG_LEVEL", "DEBUG"),
    ])
    .await;
    let http = client();
    let base = gateway.base.clone();

    let secret_content = "TOP-SECRET-CONTENT-4711";
    let body =
        json!({"model": LIVE_MODEL, "messages": [{"role": "user", "content": secret_content}]});
    let chat = |token: &str, key: &str| {
        Request::post(format!("{base}/v1/chat/completions"))
            .header("authorization", format!("Bearer {token}"))
            .header("x-svc-agent-id", world.agent_id.to_string())
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .body(json_body(&body))
            .unwrap()
    };
    assert_eq!(
        send(&http, chat(&world.chat_token, "idem-secret-key"))
            .await
            .status,
        200
    );
    let wrong = format!("svc_pat_{}_{}", uuid::Uuid::new_v4(), "WRONGSECRETabcdef");
    assert_eq!(
        send(&http, chat(&wrong, "idem-secret-key")).await.status,
        401
    );
    upstream.set(Script::Json(
        400,
        json!({"error": {"message": "rejected"}}),
        vec![],
    ));
    assert_eq!(
        send(&http, chat(&world.chat_token, "idem-secret-key-2"))
            .await
            .status,
        400
    );

    // The call's one line is the access log's.
    let line = gateway
        .line(|l| {
            let fields = &l["fields"];
            fields["message"] == "access"
                && fields["route"] == "/v1/chat/completions"
                && fields["status"] == 200
        })
        .await;
    let fields = &line["fields"];
    assert_eq!(fields["org_id"], world.org_id.to_string());
    assert_eq!(fields["model"], LIVE_MODEL);
    assert_eq!(fields["message_count"], 1);
    assert_eq!(fields["stream"], false);
    assert!(fields["request_id"].as_str().is_some());
    let logs = gateway.stop().await;
    for secret in [
        world.chat_token.as_str(),
        "WRONGSECRETabcdef",
        PROVIDER_KEY,
        secret_content,
        "idem-secret-key",
    ] {
        assert!(!logs.contains(secret), "{secret} reached the logs:\n{logs}");
    }
}
