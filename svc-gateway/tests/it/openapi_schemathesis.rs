//! schemathesis (from PyPI) against a running gateway, reading the gateway's own
//! `GET /openapi.json`: no 5xx, no status, content type, body or header the document does not
//! describe, and no crash.
//!
//! The gateway runs in process over loopback in front of the real auth server on a fresh
//! database, with the mock provider and a rate limit high enough never to be met; schemathesis
//! sends the seeded chat token and active agent with every request. Generated models are
//! replaced with the registered one, and about half the generated org ids with the token's own
//! (`openapi_schemathesis_hooks.py`): an unregistered model is SPEC's 501, which the document
//! cannot rule out, and only the token's own org answers the probe with 200. schemathesis is installed once into a
//! virtualenv under the target directory (`schemathesis-venv`); without `python3`, or without a
//! registry to install it from, the test says why and passes.
#![cfg(unix)]

use crate::openai_sdk::install;
use crate::openai_sdk::plane;

use std::process::{Command, Stdio};
use std::time::Duration;

use svc_testkit::TempDir;

/// The command line, run by the virtualenv's Python (its console script names the directory
/// the virtualenv was built in, not where it was moved to).
const CLI: &str = "import sys; from schemathesis.cli import schemathesis; \
                   sys.argv[0] = 'schemathesis'; sys.exit(schemathesis())";
/// Imports the command line.
const CLI_PROBE: &str = "from schemathesis.cli import schemathesis";
/// The registered model the hooks put in generated bodies.
const MODEL: &str = "svc-mock-1";
/// The checks run: a server error, or a response the document does not describe.
const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,\
                      response_schema_conformance,response_headers_conformance";
/// Test cases per operation and phase; bounds the run to a couple of minutes.
const MAX_EXAMPLES: &str = "30";
/// Bounds the whole run.
const DEADLINE: Duration = Duration::from_secs(600);

/// How many operations the document describes beside `GET /openapi.json` (schemathesis does
/// not test the document it reads).
fn operations() -> usize {
    let document: serde_json::Value =
        serde_json::from_str(svc_gateway::routes::OPENAPI_DOCUMENT).expect("the document");
    let methods = ["get", "put", "post", "delete", "patch", "head", "options"];
    document["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .filter(|(path, _)| *path != "/openapi.json")
        .map(|(_, item)| methods.iter().filter(|m| item.get(**m).is_some()).count())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_nothing_the_document_does_not_describe() {
    let venv = tokio::task::spawn_blocking(|| {
        install::venv("schemathesis-venv", &["schemathesis"], CLI_PROBE)
    })
    .await
    .unwrap();
    let python = match venv {
        Ok(python) => python,
        Err(why) => {
            println!("skipped: schemathesis cannot run: {why}");
            return;
        }
    };
    let cli = || {
        let mut command = Command::new(&python);
        command.args(["-c", CLI]);
        command
    };
    let version = cli()
        .arg("--version")
        .output()
        .expect("schemathesis --version");
    println!("{}", String::from_utf8_lossy(&version.stdout).trim());

    let (_db, auth, seed) = plane::auth_plane().await;
    let vars = [("SVC_LLM_MODE", "mock"), ("SVC_RATE_LIMIT_RPM", "1000000")];
    let gateway = plane::gateway(auth.grpc_addr, &vars).await;
    let dir = TempDir::create();
    let log_path = dir.path().join("schemathesis.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut command = cli();
    command
        .arg("run")
        .arg(format!("{}/openapi.json", gateway.url()))
        .args(["--checks", CHECKS, "--max-examples", MAX_EXAMPLES])
        .args(["--request-timeout", "10", "--generation-database", "none"])
        .arg("--no-color")
        .arg("-H")
        .arg(format!("Authorization: Bearer {}", seed.chat_token))
        .arg("-H")
        .arg(format!("X-SVC-Agent-ID: {}", plane::agent(&seed, "active")))
        .env(
            "SCHEMATHESIS_HOOKS",
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/openapi_schemathesis_hooks.py"
            ),
        )
        .env("SVC_SCHEMATHESIS_MODEL", MODEL)
        .env("SVC_SCHEMATHESIS_ORG_ID", seed.org_id.to_string())
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log);
    install::scrub_env(&mut command);
    let output = install::wait(command, DEADLINE, &log_path).await;
    let tested = format!("Tested: {}", operations());
    assert!(
        output.contains(&tested),
        "every operation was tested ({tested}): {output}"
    );
    assert!(
        !output.contains("FAILURES"),
        "schemathesis reported failures: {output}"
    );
    // Generated from the document, bodies the gateway refuses would mean the document says
    // less than validation checks.
    assert!(
        !output.contains("Schema validation mismatch"),
        "the request schemas are looser than validation: {output}"
    );
    let summary = output.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
    println!("{}", summary.trim_matches(|c| c == '=' || c == ' '));
    gateway.shutdown().await;
}
