//! The real binaries as child processes, killed when the test ends. Shared by test files that
//! each use part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use http::Request;
use http_body_util::Full;

use crate::support::client;

pub(crate) const GATEWAY_BIN: &str = env!("CARGO_BIN_EXE_svc-gateway");

/// The `svc-auth-server` binary beside the gateway's. Cargo builds only this package's
/// binaries for its tests, so the auth server's is brought up to date once per run (a no-op
/// when it is fresh).
pub(crate) fn auth_bin() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let status = Command::new(env!("CARGO"))
                .args([
                    "build",
                    "--quiet",
                    "-p",
                    "svc-auth-server",
                    "--bin",
                    "svc-auth-server",
                ])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .expect("run cargo");
            assert!(status.success(), "svc-auth-server builds");
            PathBuf::from(GATEWAY_BIN).with_file_name("svc-auth-server")
        })
        .clone()
}

/// Kills the child when the test ends, however it ends.
pub(crate) struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Child {
    /// Sends SIGTERM and waits, at most `within`, for the process to exit; its exit code.
    pub(crate) async fn terminate(mut self, within: Duration) -> Option<i32> {
        let pid = self.0.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(matches!(sent, Ok(s) if s.success()), "SIGTERM sent");
        let waited = tokio::task::spawn_blocking(move || self.0.wait());
        match tokio::time::timeout(within, waited).await {
            Ok(Ok(Ok(status))) => status.code(),
            _ => None,
        }
    }
}

/// Starts `bin` with only `vars` in its environment; the caller waits for it to serve.
pub(crate) fn spawn(bin: &std::path::Path, vars: &[(&str, String)]) -> Child {
    let mut command = Command::new(bin);
    command
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    for (name, value) in vars {
        command.env(name, value);
    }
    Child(command.spawn().expect("start the binary"))
}

/// Runs `bin` with `vars` to completion: exit code and stderr.
pub(crate) fn run(bin: &std::path::Path, vars: &[(&str, &str)]) -> (Option<i32>, String) {
    let output = Command::new(bin)
        .env_clear()
        .envs(vars.iter().copied())
        .output()
        .expect("run the binary");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Waits (bounded) until `http://127.0.0.1:{port}/health` answers 200.
pub(crate) async fn wait_healthy(port: u16) -> bool {
    let http = client();
    svc_testkit::eventually(Duration::from_secs(30), || {
        let http = http.clone();
        async move {
            let request = Request::get(format!("http://127.0.0.1:{port}/health"))
                .body(Full::default())
                .unwrap();
            matches!(http.request(request).await, Ok(r) if r.status() == 200)
        }
    })
    .await
}
