//! Each client installed once under the target directory, at the version the matrix was
//! verified with (a Python virtualenv for the Python libraries, an npm prefix per Node client),
//! and run with a deadline. A client that cannot be had (no interpreter, no registry) is a
//! reason to skip, printed by the test, which then passes.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;
use svc_testkit::TempDir;

use super::install::{self, Skip};

/// The Python libraries, pinned.
pub(crate) const PYTHON_PACKAGES: [&str; 7] = [
    "openai==3.57.0",
    "openai-agents==0.24.0",
    "anthropic==2.14.0",
    "langchain-openai==1.7.4",
    "langchain-anthropic==1.7.10",
    "pydantic==2.14.4",
    "jsonschema==4.26.0",
];
/// Claude Code, pinned.
pub(crate) const CLAUDE_CODE: &[&str] = &["@anthropic-ai/claude-code@2.1.332"];
/// Codex CLI, pinned.
pub(crate) const CODEX: &[&str] = &["@openai/codex@0.169.0"];
/// The Vercel AI SDK and its two providers, pinned.
pub(crate) const AI_SDK: &[&str] = &[
    "ai@7.0.173",
    "@ai-sdk/openai@4.0.118",
    "@ai-sdk/anthropic@4.0.105",
    "zod@4.6.7",
];

/// One install at a time in this process: two tests needing one client wait for one install.
static INSTALLING: Mutex<()> = Mutex::new(());

/// The virtualenv's Python with [`PYTHON_PACKAGES`].
pub(crate) async fn python() -> Result<PathBuf, Skip> {
    tokio::task::spawn_blocking(|| {
        let _one = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
        let probe = format!(
            "import importlib.metadata as m, sys\n\
             sys.exit(any(m.version(n) != v for n, v in (p.split('==') for p in {:?})))",
            PYTHON_PACKAGES
        );
        install::venv("clients-venv", &PYTHON_PACKAGES, &probe)
    })
    .await
    .unwrap()
}

/// An npm prefix `target/<name>` with `packages` (`name@version`) installed.
pub(crate) async fn npm(
    name: &'static str,
    packages: &'static [&'static str],
) -> Result<PathBuf, Skip> {
    tokio::task::spawn_blocking(move || {
        let _one = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
        for program in ["node", "npm"] {
            if !install::installed(program) {
                return Err(format!("{program} is not installed"));
            }
        }
        let ready = |dir: &Path| packages.iter().all(|p| installed_version(dir, p));
        install::once(name, ready, |staging| {
            let manifest = format!(r#"{{"name": "svc-{name}", "private": true}}"#);
            std::fs::write(staging.join("package.json"), manifest).expect("write package.json");
            install::install_step(
                Command::new("npm")
                    .args(["install", "--no-audit", "--no-fund", "--fetch-retries=1"])
                    .args(packages)
                    .current_dir(staging),
                &format!("npm install {}", packages.join(" ")),
            )
        })
    })
    .await
    .unwrap()
}

/// Whether `dir/node_modules` holds `package` (`name@version`) at that version.
fn installed_version(dir: &Path, package: &str) -> bool {
    let (name, version) = package.rsplit_once('@').expect("name@version");
    let manifest = dir.join("node_modules").join(name).join("package.json");
    std::fs::read(manifest)
        .ok()
        .and_then(|m| serde_json::from_slice::<Value>(&m).ok())
        .is_some_and(|m| m["version"] == version)
}

/// The executable `bin` of an npm prefix.
pub(crate) fn bin(prefix: &Path, bin: &str) -> PathBuf {
    prefix.join("node_modules").join(".bin").join(bin)
}

/// Runs `tests/clients/<script>` (Python, or Node for `.mjs`) with `config`; returns its JSON.
pub(crate) async fn script(interpreter: &Path, script: &str, config: &Value) -> Value {
    let path = format!("{}/tests/clients/{script}", env!("CARGO_MANIFEST_DIR"));
    install::run_json(interpreter, &[path], config, SCRIPT_DEADLINE).await
}

/// Bounds one client run.
const SCRIPT_DEADLINE: Duration = Duration::from_secs(240);

/// What a CLI run left: its exit, stdout and stderr.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) success: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Run {
    /// Both outputs, for messages and searches.
    pub(crate) fn output(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

/// Runs `command` (its environment already set) in `cwd` to its end within the deadline,
/// polled so the gateway's tasks on this runtime keep running; a run past the deadline fails
/// the test with what it printed.
pub(crate) async fn run(mut command: Command, cwd: &Path) -> Run {
    let dir = TempDir::create();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = command
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {:?}: {e}", command.get_program()));
    let until = Instant::now() + SCRIPT_DEADLINE;
    let (status, in_time) = loop {
        if let Some(status) = child.try_wait().expect("wait for the client") {
            break (status, true);
        }
        if Instant::now() >= until {
            let _ = child.kill();
            break (child.wait().expect("the killed client's status"), false);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
    let run = Run {
        success: status.success(),
        stdout: read(&out),
        stderr: read(&err),
    };
    assert!(
        in_time,
        "{:?} did not finish in {SCRIPT_DEADLINE:?}: {}",
        command.get_program(),
        run.output()
    );
    run
}

/// A command with an empty environment but for `PATH` and a fresh `HOME` (the returned
/// directory, also a fine working directory): a client reads no settings, keys or proxies of
/// the machine's.
pub(crate) fn isolated(program: &Path) -> (Command, TempDir) {
    let home = TempDir::create();
    let mut command = Command::new(program);
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("LANG", "C.UTF-8");
    (command, home)
}
