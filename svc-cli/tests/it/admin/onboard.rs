//! The agents guide's "Onboard an agent" block (`docs/guide/agents.md`), run as written
//! against the real binaries: the auth server (production settings) over a fresh migrated
//! database and a gateway on the mock provider, both on loopback ports. The guide cannot drift
//! from what the commands do.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use svc_auth_server::store::postgres::PoolSettings;
use svc_testkit::{TestDb, free_port};
use tokio::process::{Child, Command};

const HEADING: &str = "## Onboard an agent";
const MODEL: &str = "svc-mock-1";
/// The binaries are usually built already; a cold build on a busy machine takes longer.
const BUILD: Duration = Duration::from_secs(15 * 60);
const START: Duration = Duration::from_secs(60);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate sits in the workspace")
        .to_owned()
}

/// The first fenced block under the heading.
fn walkthrough(readme: &str) -> String {
    let mut lines = readme.lines();
    lines
        .find(|line| line.trim_end() == HEADING)
        .unwrap_or_else(|| panic!("the agents guide has a {HEADING:?} section"));
    let mut lines = lines.skip_while(|line| !line.trim_start().starts_with("```"));
    lines.next().expect("a fenced block");
    lines
        .take_while(|line| !line.trim_start().starts_with("```"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Where `svc` was built: the other binaries land beside it.
fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_svc"))
        .parent()
        .expect("a target directory")
        .to_owned()
}

fn spawn(binary: &Path, vars: &[(&str, String)]) -> Child {
    Command::new(binary)
        .env_clear()
        .envs(vars.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()))
}

async fn wait_for_port(port: u16) {
    let deadline = Instant::now() + START;
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_onboarding_walkthrough_runs_as_written() {
    let guide = repo_root().join("docs/guide/agents.md");
    let block = walkthrough(&std::fs::read_to_string(guide).unwrap());
    assert!(block.contains("svc-auth-server bootstrap"), "{block}");

    // The sibling binaries, built as `cargo test --workspace` builds them.
    let built = tokio::time::timeout(
        BUILD,
        Command::new(env!("CARGO"))
            .args([
                "build",
                "-q",
                "-p",
                "svc-auth-server",
                "-p",
                "svc-gateway",
                "--bins",
            ])
            .current_dir(repo_root())
            .status(),
    )
    .await
    .expect("the build finished")
    .expect("cargo ran");
    assert!(built.success());

    let db = TestDb::create().await;
    svc_auth_server::migrate::run(db.url(), &PoolSettings::default())
        .await
        .expect("migrate");
    let (auth_http, grpc, gateway) = (free_port(), free_port(), free_port());
    let production = [
        ("POSTGRES_DSN", db.url().to_owned()),
        ("SVC_ENV", "production".to_owned()),
        ("SVC_GRPC_ALLOW_PLAINTEXT", "true".to_owned()),
    ];
    let mut auth_vars = production.to_vec();
    auth_vars.extend([
        ("SVC_PORT", auth_http.to_string()),
        ("SVC_GRPC_PORT", grpc.to_string()),
    ]);
    let _auth = spawn(&bin_dir().join("svc-auth-server"), &auth_vars);
    let _gateway = spawn(
        &bin_dir().join("svc-gateway"),
        &[
            ("SVC_PORT", gateway.to_string()),
            ("SVC_AUTH_GRPC_ADDR", format!("127.0.0.1:{grpc}")),
            ("SVC_LLM_MODE", "mock".to_owned()),
            // A cold token's first Argon2 check in a debug build on a busy machine.
            ("SVC_AUTH_VALIDATE_TIMEOUT", "2s".to_owned()),
        ],
    );
    wait_for_port(grpc).await;
    wait_for_port(gateway).await;

    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut script_vars = production.to_vec();
    script_vars.extend([
        ("PATH", path),
        ("SVC_AUTH_GRPC_ADDR", format!("127.0.0.1:{grpc}")),
        ("GATEWAY", format!("http://127.0.0.1:{gateway}")),
        ("MODEL", MODEL.to_owned()),
    ]);
    let output = tokio::time::timeout(
        START,
        Command::new("bash")
            .args(["-euo", "pipefail", "-c", &block])
            .env_clear()
            .envs(script_vars.iter().map(|(k, v)| (*k, v.as_str())))
            .current_dir(std::env::temp_dir())
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("the walkthrough finished")
    .expect("bash ran");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );

    // The call passed, the call after the pause was refused, and the trail shows each act.
    assert!(stdout.contains("\"choices\""), "{stdout}");
    assert!(stdout.lines().any(|line| line.trim() == "403"), "{stdout}");
    for action in [
        "org.bootstrap",
        "agent.create",
        "token.create",
        "agent.status",
    ] {
        assert!(stdout.contains(action), "no {action} in:\n{stdout}");
    }
    assert!(
        !stderr.contains("svc_pat_"),
        "no token in the logs: {stderr}"
    );
}
