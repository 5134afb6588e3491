//! Finding a Python with an SDK package, and running a script with a deadline.
// Each test file that mounts it uses a part.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use svc_testkit::TempDir;

/// Bounds the script; its own calls time out after 30 s each.
const SCRIPT_DEADLINE: Duration = Duration::from_secs(300);

/// The packages a script needs, and the virtualenv that holds them.
pub(crate) struct Sdk {
    /// Where the virtualenv lives, under the target directory.
    pub(crate) venv: &'static str,
    /// What `pip install` is given.
    pub(crate) packages: &'static [&'static str],
    /// A Python line that succeeds only when the packages are there.
    pub(crate) check: &'static str,
}

/// The OpenAI SDK, 1.x or later (the client class and its transport).
pub(crate) const OPENAI: Sdk = Sdk {
    venv: "openai-venv",
    packages: &["openai"],
    check: "from openai import OpenAI, DefaultHttpxClient",
};

/// A Python with the `openai` package, or `None` without `python3`.
pub(crate) fn sdk_python() -> Option<PathBuf> {
    sdk_python_for(&OPENAI)
}

/// A Python with `sdk`'s packages, or `None` without `python3`.
pub(crate) fn sdk_python_for(sdk: &Sdk) -> Option<PathBuf> {
    let system = PathBuf::from("python3");
    let version = Command::new(&system)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match version {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
        Err(error) => panic!("python3 does not run: {error}"),
        Ok(_) => {}
    }
    if has_sdk(&system, sdk) {
        return Some(system);
    }
    Some(venv_python(sdk))
}

/// Whether `python` passes `sdk`'s check.
fn has_sdk(python: &Path, sdk: &Sdk) -> bool {
    Command::new(python)
        .args(["-c", sdk.check])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// The virtualenv's Python, making the virtualenv first when it has no SDK yet.
fn venv_python(sdk: &Sdk) -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the tests' temp dir sits in the target dir");
    let venv = target.join(sdk.venv);
    let python = venv.join("bin").join("python");
    if has_sdk(&python, sdk) {
        return python;
    }
    // Built aside and renamed into place: a concurrent run never sees a half-made one.
    let staging = target.join(format!("{}.{}", sdk.venv, uuid::Uuid::new_v4().simple()));
    run(
        Command::new("python3").args(["-m", "venv"]).arg(&staging),
        "python3 -m venv",
    );
    run(
        Command::new(staging.join("bin").join("python"))
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(sdk.packages),
        "pip install",
    );
    if std::fs::rename(&staging, &venv).is_err() {
        if has_sdk(&python, sdk) {
            // Another run put its own in place first; either will do.
            let _ = std::fs::remove_dir_all(&staging);
        } else {
            let _ = std::fs::remove_dir_all(&venv);
            std::fs::rename(&staging, &venv).expect("move the virtualenv into place");
        }
    }
    assert!(
        has_sdk(&python, sdk),
        "{} lacks {:?}",
        venv.display(),
        sdk.packages
    );
    python
}

fn run(command: &mut Command, what: &str) {
    let output = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runs `tests/openai_sdk.py` with `config`, bounded by [`SCRIPT_DEADLINE`]; returns its JSON
/// output.
pub(crate) async fn run_script(python: &Path, config: &Value) -> Value {
    run_script_at(python, "openai_sdk.py", config).await
}

/// Runs `tests/<script>` with `config`, bounded by [`SCRIPT_DEADLINE`]; returns its JSON output.
pub(crate) async fn run_script_at(python: &Path, script: &str, config: &Value) -> Value {
    let dir = TempDir::create();
    let config_path = dir.path().join("config.json");
    std::fs::write(&config_path, config.to_string()).unwrap();
    let stdout_path = dir.path().join("stdout.json");
    let stderr_path = dir.path().join("stderr.txt");
    let mut command = Command::new(python);
    command
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests")
                .join(script),
        )
        .arg(&config_path)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap());
    // The SDKs read OPENAI_* and ANTHROPIC_* (base URL, keys, org, project) and proxies from
    // the environment; the script must talk to this gateway with exactly what it configures.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().to_ascii_uppercase();
        if name.starts_with("OPENAI_") || name.starts_with("ANTHROPIC_") || name.ends_with("_PROXY")
        {
            command
                .env_remove(&name)
                .env_remove(name.to_ascii_lowercase());
        }
    }
    let mut child = command.spawn().expect("spawn the SDK script");
    let deadline = Instant::now() + SCRIPT_DEADLINE;
    // Polled, not awaited in a blocking call: the gateway answers on this same runtime.
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the SDK script") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the SDK script did not finish in {SCRIPT_DEADLINE:?}: {}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    assert!(status.success(), "the SDK script failed: {stderr}");
    let stdout = std::fs::read_to_string(&stdout_path).unwrap();
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout:?}; stderr: {stderr}"))
}
