//! The README's quickstart, run as written: `cargo run -p svc-cli -- dev` from the
//! repository root, then the curl command it prints, then a second start on the same data.
//!
//! The first start may compile the binary, so its bound is generous; every wait polls the
//! process output with a deadline.
#![cfg(unix)]

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::Value;
use svc_testkit::{TempDir, free_port};

/// What the README's quickstart block must start with; used when the README has none yet.
const QUICKSTART: &str = "cargo run -p svc-cli -- dev";
/// The first start may build the workspace on a busy machine.
const FIRST_START: Duration = Duration::from_secs(20 * 60);
/// A later start only checks the build is fresh.
const LATER_START: Duration = Duration::from_secs(5 * 60);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate sits in the workspace")
        .to_owned()
}

/// The first line of the fenced block right under `## Quickstart`.
fn quickstart_command(readme: &str) -> Option<String> {
    let mut lines = readme.lines();
    lines.find(|line| line.trim_end() == "## Quickstart")?;
    let mut lines = lines.skip_while(|line| line.trim().is_empty());
    let fence = lines.next()?;
    if !fence.trim_start().starts_with("```") {
        return None;
    }
    lines.next().map(|line| line.trim().to_owned())
}

/// The dev process, started in its own process group so the whole tree (sh, cargo, the
/// gateway) is stopped together, even when the test fails.
struct Dev {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
    stderr: PathBuf,
}

impl Dev {
    fn start(command: &str, data_dir: &Path, stderr: PathBuf) -> Dev {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .current_dir(repo_root())
            .env("SVC_PORT", free_port().to_string())
            .env("SVC_DEV_DATA_DIR", data_dir)
            // The printed command must work as it would on a clean machine: mock provider,
            // loopback, development.
            .env_remove("SVC_ENV")
            .env_remove("SVC_GRPC_PORT")
            .env_remove("SVC_BIND_ADDR")
            .env_remove("SVC_LLM_MODE")
            .env_remove("SVC_PROVIDER_BASE_URL")
            .env_remove("SVC_PROVIDER_MODELS")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .process_group(0)
            .spawn()
            .expect("spawn sh");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Dev {
            child,
            lines,
            seen: Vec::new(),
            stderr,
        }
    }

    /// Reads stdout until the whole curl command (a `curl ` line and its `\` continuations)
    /// has been printed, within `within`.
    fn wait_for_curl(&mut self, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            if let Some(command) = curl_command(&self.seen) {
                return command;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(RecvTimeoutError::Timeout) => self.fail("no curl command in time"),
                Err(RecvTimeoutError::Disconnected) => self.fail("the process closed stdout"),
            }
        }
    }

    /// The value printed after `label` on the banner.
    fn field(&self, label: &str) -> String {
        self.seen
            .iter()
            .find_map(|line| line.strip_prefix(label))
            .map(|rest| {
                rest.split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_owned()
            })
            .unwrap_or_else(|| self.fail(&format!("no {label:?} line")))
    }

    fn fail(&self, why: &str) -> ! {
        let stderr = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let tail: Vec<&str> = stderr.lines().rev().take(40).collect();
        panic!(
            "{why}\n--- stdout ---\n{}\n--- stderr (last lines) ---\n{}",
            self.seen.join("\n"),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }

    /// SIGTERM to the group, then SIGKILL if it has not exited within a bound.
    fn stop(&mut self) {
        signal_group(self.child.id(), "TERM");
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        signal_group(self.child.id(), "KILL");
        let _ = self.child.wait();
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            signal_group(self.child.id(), "KILL");
            let _ = self.child.wait();
        }
    }
}

fn signal_group(pgid: u32, signal: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg("--")
        .arg(format!("-{pgid}"))
        .stderr(Stdio::null())
        .status();
}

fn curl_command(lines: &[String]) -> Option<String> {
    let start = lines.iter().position(|line| line.starts_with("curl "))?;
    let mut command = Vec::new();
    for line in &lines[start..] {
        command.push(line.as_str());
        if !line.ends_with('\\') {
            return Some(command.join("\n"));
        }
    }
    None
}

/// Runs the printed command through `sh -c`, adding only `-w` to learn the status.
fn run_curl(command: &str) -> (u16, Value) {
    let output = Command::new("sh")
        .arg("-c")
        .arg(format!("{command} -w '\\n%{{http_code}}'"))
        .output()
        .expect("run sh");
    assert!(
        output.status.success(),
        "curl failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    let (body, status) = text.rsplit_once('\n').expect("body then status");
    let body = serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON: {body}"));
    (status.trim().parse().unwrap(), body)
}

/// Without curl: the same request from the same printed command, split into its arguments by
/// the shell itself, sent with hyper.
fn run_without_curl(command: &str) -> (u16, Value) {
    let printf = command.replacen("curl ", "printf '%s\\n' ", 1);
    let output = Command::new("sh").arg("-c").arg(printf).output().unwrap();
    let args: Vec<String> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let mut request = http::Request::builder().method("POST");
    let mut body = String::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-H" => {
                let (name, value) = args.next().unwrap().split_once(": ").unwrap();
                request = request.header(name, value);
            }
            "-d" => body = args.next().unwrap().clone(),
            flag if flag.starts_with('-') => {}
            url => request = request.uri(url),
        }
    }
    let request = request
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        use http_body_util::BodyExt;
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http();
        let response = client.request(request).await.expect("gateway reachable");
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, serde_json::from_slice(&bytes).expect("JSON body"))
    })
}

/// The printed command through curl when the machine has it, else the same request in Rust.
fn send_printed(command: &str) -> (u16, Value) {
    if curl_available() {
        run_curl(command)
    } else {
        eprintln!("curl is not installed: sending the printed request with hyper instead");
        run_without_curl(command)
    }
}

fn curl_available() -> bool {
    Command::new("sh")
        .args(["-c", "command -v curl"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

fn assert_openai_completion(status: u16, body: &Value) {
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "chat.completion", "{body}");
    let content = body["choices"][0]["message"]["content"]
        .as_str()
        .expect("choices[0].message.content");
    assert!(!content.is_empty());
    assert_eq!(body["choices"][0]["message"]["role"], "assistant");
    assert!(body["usage"]["total_tokens"].as_u64().is_some(), "{body}");
}

#[test]
fn the_readme_quickstart_serves_a_completion_and_restarts_on_the_same_data() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let command = quickstart_command(&readme).unwrap_or_else(|| {
        eprintln!("README.md has no quickstart block yet; using {QUICKSTART:?}");
        QUICKSTART.to_owned()
    });
    assert!(
        command.starts_with(QUICKSTART),
        "the quickstart starts dev mode: {command:?}"
    );
    let data = TempDir::create();
    let data_dir = data.path().join("dev-data");

    let mut first = Dev::start(&command, &data_dir, data.path().join("first.stderr"));
    let curl = first.wait_for_curl(FIRST_START);
    let (status, body) = send_printed(&curl);
    assert_openai_completion(status, &body);
    let org_id = first.field("org id:");
    let agent_id = first.field("agent id:");
    let chat_token = first.field("chat token:");
    assert!(chat_token.starts_with("svc_pat_"));
    assert!(curl.contains(&agent_id) && curl.contains(&chat_token));
    first.stop();
    assert!(data_dir.join("identity.db").exists());

    let mut second = Dev::start(&command, &data_dir, data.path().join("second.stderr"));
    let curl = second.wait_for_curl(LATER_START);
    assert_eq!(second.field("org id:"), org_id);
    assert_eq!(second.field("agent id:"), agent_id);
    let fresh_token = second.field("chat token:");
    assert_ne!(fresh_token, chat_token, "each start mints a new chat token");
    assert!(second.seen.iter().any(|line| line.contains("(reused)")));
    let (status, body) = send_printed(&curl);
    assert_openai_completion(status, &body);
    second.stop();
}

#[test]
fn production_refuses_dev_in_one_line() {
    let data = TempDir::create();
    let data_dir = data.path().join("never");
    let output = Command::new(env!("CARGO_BIN_EXE_svc"))
        .arg("dev")
        .env("SVC_ENV", "production")
        .env("SVC_DEV_DATA_DIR", &data_dir)
        .env("SVC_PORT", free_port().to_string())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("SVC_ENV=production"), "{stderr}");
    assert!(!data_dir.exists(), "nothing is created when refused");
}

#[test]
fn the_quickstart_block_is_found_under_its_heading() {
    let readme = "# x\n\n## Quickstart\n\n```sh\ncargo run -p svc-cli -- dev\n```\n";
    assert_eq!(quickstart_command(readme).as_deref(), Some(QUICKSTART));
    assert_eq!(quickstart_command("## Quickstart\n\nprose\n"), None);
    assert_eq!(quickstart_command("# nothing\n"), None);
}
