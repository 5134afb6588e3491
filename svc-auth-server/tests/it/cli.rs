//! The real binary: configuration errors, the unmigrated-database refusal, migrate, seed and
//! its refusals, and what `serve` writes to its logs.

use std::time::Duration;

use crate::common::*;
use serde_json::Value;
use svc_auth_server::pat::Pat;
use svc_proto::v1;
use svc_testkit::TestDb;
use tokio::io::AsyncReadExt;
use tokio::process::Command;
use uuid::Uuid;

struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

async fn run(args: &[&str], vars: &[(&str, &str)]) -> Outcome {
    let output = tokio::time::timeout(Duration::from_secs(30), command(args, vars).output())
        .await
        .expect("the binary finished")
        .expect("the binary ran");
    Outcome {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn assert_one_error_line(outcome: &Outcome, starts_with: &str) {
    let lines: Vec<&str> = outcome.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "stderr: {}", outcome.stderr);
    assert!(
        lines[0].starts_with(starts_with),
        "stderr: {}",
        outcome.stderr
    );
    assert!(!outcome.stderr.contains("panicked") && !outcome.stderr.contains("backtrace"));
}

#[tokio::test]
async fn a_bad_variable_exits_2_with_one_line_naming_it() {
    let dsn = "postgres://owner:s3cret@127.0.0.1:5432/none";
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[("POSTGRES_DSN", dsn), ("SVC_PORT", "abc")],
            r#"error: SVC_PORT: invalid port "abc""#,
        ),
        (&[], "error: POSTGRES_DSN: required"),
        (
            &[("POSTGRES_DSN", dsn), ("SVC_LOG_LEVEL", "chatty")],
            "error: SVC_LOG_LEVEL:",
        ),
        (
            &[("POSTGRES_DSN", dsn), ("SVC_ENV", "production")],
            "error: SVC_GRPC_ALLOW_PLAINTEXT:",
        ),
        (
            &[
                ("POSTGRES_DSN", dsn),
                ("SVC_ENV", "production"),
                ("SVC_GRPC_ALLOW_PLAINTEXT", "true"),
                ("SVC_LOG_FORMAT", "text"),
            ],
            "error: SVC_LOG_FORMAT:",
        ),
    ];
    for (vars, expected) in cases {
        for args in [&[][..], &["serve"], &["migrate"], &["seed"]] {
            // Seed refuses production before reading the rest (see seed_refuses_production_…),
            // and the plaintext-gRPC rule is about serving: migrate and seed serve nothing.
            let production = vars.contains(&("SVC_ENV", "production"));
            let serving_rule = expected.contains("SVC_GRPC_ALLOW_PLAINTEXT");
            if (args == ["seed"] && production)
                || (serving_rule && args.len() == 1 && args[0] != "serve")
            {
                continue;
            }
            let outcome = run(args, vars).await;
            assert_eq!(
                outcome.code,
                Some(2),
                "{args:?} {vars:?}: {}",
                outcome.stderr
            );
            assert_one_error_line(&outcome, expected);
            assert!(!outcome.stderr.contains("s3cret"));
        }
    }
}

#[tokio::test]
async fn bad_usage_exits_2() {
    let outcome = run(&["launch"], &[]).await;
    assert_eq!(outcome.code, Some(2));
    assert_one_error_line(&outcome, "error: unknown command");
    let outcome = run(&["seed", "--agent-status", "asleep"], &[]).await;
    assert_eq!(outcome.code, Some(2));
    assert_one_error_line(&outcome, "error: --agent-status");
    let outcome = run(&["--help"], &[]).await;
    assert_eq!(outcome.code, Some(0));
    assert!(outcome.stdout.contains("usage: svc-auth-server"));
}

#[tokio::test]
async fn help_and_version_exit_0_and_an_unknown_flag_exits_2() {
    for help in [&["--help"][..], &["-h"], &["help"], &["seed", "--help"]] {
        let outcome = run(help, &[]).await;
        assert_eq!(outcome.code, Some(0), "{help:?}: {}", outcome.stderr);
        assert!(outcome.stdout.contains("svc-auth-server"), "{help:?}");
        assert!(outcome.stderr.is_empty(), "{help:?}: {}", outcome.stderr);
    }
    // The help lists the variables the server reads.
    let help = run(&["--help"], &[]).await.stdout;
    for variable in [
        "POSTGRES_DSN",
        "SVC_GRPC_PORT",
        "SVC_WRITE_TIMEOUT",
        "SVC_LOG_LEVEL",
    ] {
        assert!(help.contains(variable), "{variable} missing from:\n{help}");
    }
    let outcome = run(&["--version"], &[]).await;
    assert_eq!(outcome.code, Some(0));
    assert_eq!(
        outcome.stdout.trim(),
        concat!("svc-auth-server ", env!("CARGO_PKG_VERSION"))
    );
    for unknown in [&["--fast"][..], &["migrate", "--fast"]] {
        let outcome = run(unknown, &[]).await;
        assert_eq!(outcome.code, Some(2), "{unknown:?}");
        assert_one_error_line(&outcome, r#"error: unknown argument "--fast""#);
        assert!(outcome.stdout.is_empty());
    }
}

#[tokio::test]
async fn serve_refuses_an_unmigrated_database() {
    let db = TestDb::create().await;
    let outcome = run(
        &["serve"],
        &[
            ("POSTGRES_DSN", db.url()),
            ("SVC_PORT", "0"),
            ("SVC_GRPC_PORT", "0"),
        ],
    )
    .await;
    assert_eq!(outcome.code, Some(1), "{}", outcome.stderr);
    assert_one_error_line(&outcome, "error: the database is not migrated");
    assert!(outcome.stderr.contains("svc-auth-server migrate"));
}

#[tokio::test]
async fn migrate_then_seed_prints_working_tokens() {
    let db = TestDb::create().await;
    let vars = [("POSTGRES_DSN", db.url())];
    let migrated = run(&["migrate"], &vars).await;
    assert_eq!(migrated.code, Some(0), "{}", migrated.stderr);
    assert!(migrated.stdout.is_empty(), "migrate logs go to stderr");

    let org_id = Uuid::new_v4();
    let seeded = run(
        &[
            "seed",
            "--org-id",
            &org_id.to_string(),
            "--agent-status",
            "active",
            "--agent-status",
            "suspended",
        ],
        &vars,
    )
    .await;
    assert_eq!(seeded.code, Some(0), "{}", seeded.stderr);
    let output: Value = serde_json::from_str(seeded.stdout.trim()).expect("one JSON document");
    assert_eq!(output["org_id"], org_id.to_string());
    assert!(output["user_id"].is_string());
    let statuses: Vec<&str> = output["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["active", "suspended"]);

    let config = svc_auth_server::Config::local(db.url());
    let server = svc_auth_server::Server::start(config).await.unwrap();
    let mut client = connect(server.grpc_addr).await;
    let admin = validate(&mut client, output["admin_token"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(
        admin.permissions,
        svc_core::permissions::Permissions::ALL_KNOWN.bits()
    );
    let chat = validate(&mut client, output["chat_token"].as_str().unwrap())
        .await
        .unwrap();
    // Chat, embeddings and MCP tools.
    assert_eq!(chat.permissions, 0b1000_0001_0001);
    assert_eq!(chat.org_id, org_id.to_string());

    // Default: one active agent.
    let again = run(&["seed"], &vars).await;
    let output: Value = serde_json::from_str(again.stdout.trim()).unwrap();
    assert_eq!(output["agents"].as_array().unwrap().len(), 1);
    assert_eq!(output["agents"][0]["status"], "active");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn seed_refuses_production_and_remote_databases() {
    let db = migrated_db().await;
    // Only SVC_ENV: the serving rules of production (TLS, log format) must not mask the refusal.
    let production = run(
        &["seed"],
        &[("POSTGRES_DSN", db.url()), ("SVC_ENV", "production")],
    )
    .await;
    assert_ne!(production.code, Some(0));
    assert_one_error_line(
        &production,
        "error: seed refuses to run with SVC_ENV=production",
    );
    assert!(production.stdout.is_empty());

    let remote = run(
        &["seed"],
        &[(
            "POSTGRES_DSN",
            "postgres://owner:s3cret@db.example.com:5432/svc",
        )],
    )
    .await;
    assert_ne!(remote.code, Some(0));
    assert_one_error_line(&remote, "error: seed refuses non-local database host");
    assert!(!remote.stderr.contains("s3cret"));
    assert!(remote.stdout.is_empty());
}

#[tokio::test]
async fn serve_logs_never_contain_tokens_or_secrets() {
    let h = start().await;
    let Serving {
        mut child,
        mut stdout,
        grpc_addr,
        mut logs,
    } = serve_binary(&[("POSTGRES_DSN", h.db.url()), ("SVC_LOG_LEVEL", "debug")]).await;
    let mut client = connect(grpc_addr).await;

    let admin = h.seed.admin_token.clone();
    let chat = h.seed.chat_token.clone();
    let chat_id = Pat::parse(&chat).unwrap().token_id();
    let wrong = Pat::generate(chat_id).expose();
    validate(&mut client, &chat).await.unwrap();
    validate(&mut client, &chat).await.unwrap();
    assert_unauthenticated(&mut client, &wrong).await;
    assert_unauthenticated(&mut client, &Pat::generate(Uuid::new_v4()).expose()).await;
    assert_unauthenticated(&mut client, "svc_pat_garbage").await;
    let created = create_token(&mut client, &admin, create_request(h.seed.org_id, 1))
        .await
        .unwrap();
    client
        .revoke_token(bearer(
            v1::RevokeTokenRequest {
                token_id: created.token_id.clone(),
                keep_issued: false,
            },
            &admin,
        ))
        .await
        .unwrap();
    assert_unauthenticated(&mut client, &created.token).await;

    let pid = child.id().unwrap().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().await;
    assert!(killed.unwrap().success());
    let status = tokio::time::timeout(Duration::from_secs(15), child.wait())
        .await
        .expect("the server stops on SIGTERM")
        .unwrap();
    assert!(status.success(), "{status:?}");
    stdout.read_to_string(&mut logs).await.unwrap();

    assert!(
        logs.contains("token rejected"),
        "debug lines were written: {logs}"
    );
    assert!(logs.contains("token created") && logs.contains("token revoked"));
    for token in [&admin, &chat, &wrong, &created.token] {
        let secret = Pat::parse(token).unwrap().secret().to_owned();
        assert!(!logs.contains(token.as_str()), "a full token was logged");
        assert!(!logs.contains(&secret), "a secret was logged");
    }
    assert!(!logs.contains("svc_pat_garbage"));
    assert!(!logs.contains(h.db.url()));
}

#[tokio::test]
async fn a_production_migration_job_needs_no_grpc_settings() {
    let db = TestDb::create().await;
    let migrated = run(
        &["migrate"],
        &[("POSTGRES_DSN", db.url()), ("SVC_ENV", "production")],
    )
    .await;
    assert_eq!(migrated.code, Some(0), "{}", migrated.stderr);

    // Serving is what the plaintext rule is about.
    let served = run(
        &["serve"],
        &[("POSTGRES_DSN", db.url()), ("SVC_ENV", "production")],
    )
    .await;
    assert_eq!(served.code, Some(2));
    assert_one_error_line(&served, "error: SVC_GRPC_ALLOW_PLAINTEXT:");
}

/// The environment "Running in production" describes: nothing development about it.
fn production(dsn: &str) -> Vec<(&str, &str)> {
    vec![
        ("POSTGRES_DSN", dsn),
        ("SVC_ENV", "production"),
        ("SVC_GRPC_ALLOW_PLAINTEXT", "true"),
    ]
}

#[tokio::test]
async fn bootstrap_in_production_mints_an_admin_token_that_runs_the_org() {
    let db = TestDb::create().await;
    let vars = production(db.url());
    let unmigrated = run(&["bootstrap", "--org-name", "Acme"], &vars).await;
    assert_eq!(unmigrated.code, Some(1), "{}", unmigrated.stderr);
    assert_one_error_line(&unmigrated, "error: the database is not migrated");
    assert_eq!(run(&["migrate"], &vars).await.code, Some(0));

    let out = run(&["bootstrap", "--org-name", "Acme Corp"], &vars).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON object: {}", out.stdout);
    let printed: Value = serde_json::from_str(lines[0]).unwrap();
    let keys: Vec<&str> = printed
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["admin_token", "org_id", "token_id"]);
    let admin = printed["admin_token"].as_str().unwrap().to_owned();
    let org_id = printed["org_id"].as_str().unwrap().to_owned();
    let token_id = printed["token_id"].as_str().unwrap().to_owned();
    assert!(
        !out.stderr.contains(&admin),
        "the token never reaches a log"
    );
    assert_eq!(Pat::parse(&admin).unwrap().token_id().to_string(), token_id);

    let config = svc_auth_server::Config::local(db.url());
    let server = svc_auth_server::Server::start(config).await.unwrap();
    let mut client = connect(server.grpc_addr).await;
    let validated = validate(&mut client, &admin).await.unwrap();
    assert_eq!(validated.org_id, org_id);
    assert_eq!(
        validated.permissions,
        svc_core::permissions::Permissions::ALL_KNOWN.bits()
    );
    let agent = client
        .create_agent(bearer(
            v1::CreateAgentRequest {
                org_id: String::new(),
                name: Some("first agent".into()),
                status: None,
            },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner();
    let mut request = create_request(Uuid::try_parse(&org_id).unwrap(), 1);
    request.agent_id = Some(agent.agent_id.clone());
    let agent_token = create_token(&mut client, &admin, request).await.unwrap();
    assert_eq!(
        agent_token.agent_id.as_deref(),
        Some(agent.agent_id.as_str())
    );
    let trail = client
        .list_audit_events(bearer(v1::ListAuditEventsRequest::default(), &admin))
        .await
        .unwrap()
        .into_inner()
        .events;
    let actions: Vec<&str> = trail.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, ["token.create", "agent.create", "org.bootstrap"]);
    let bootstrap = &trail[2];
    assert_eq!(bootstrap.actor_token_id, None);
    assert_eq!(bootstrap.target_id.as_deref(), Some(org_id.as_str()));
    assert_eq!(bootstrap.outcome, "ok");
    assert_eq!(bootstrap.detail.get("token_id"), Some(&token_id));
    assert_eq!(
        bootstrap.detail.get("org_name").map(String::as_str),
        Some("Acme Corp")
    );

    // Break glass: a new admin token for the same org; the first one still works.
    let again = run(&["bootstrap", "--org-id", &org_id], &vars).await;
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    let second: Value = serde_json::from_str(again.stdout.trim()).unwrap();
    assert_eq!(second["org_id"].as_str(), Some(org_id.as_str()));
    assert_ne!(second["admin_token"], printed["admin_token"]);
    let validated = validate(&mut client, second["admin_token"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(validated.org_id, org_id);

    // A missing org, a bad name, bad usage.
    let missing = Uuid::new_v4().to_string();
    let refused = run(&["bootstrap", "--org-id", &missing], &vars).await;
    assert_eq!(refused.code, Some(1), "{}", refused.stderr);
    assert_one_error_line(&refused, "error: no organization");
    assert!(refused.stdout.is_empty());
    let long = "n".repeat(129);
    let refused = run(&["bootstrap", "--org-name", &long], &vars).await;
    assert_eq!(refused.code, Some(1), "{}", refused.stderr);
    assert_one_error_line(&refused, "error: --org-name");
    let refused = run(&["bootstrap"], &vars).await;
    assert_eq!(refused.code, Some(2));
    assert_one_error_line(&refused, "error: bootstrap needs");
    server.shutdown().await.unwrap();
}
