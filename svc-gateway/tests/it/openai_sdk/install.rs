//! Client tools installed once under the target directory (a Python virtualenv, an npm
//! prefix), and run with a deadline. A tool that cannot be had (no interpreter, no registry)
//! is a reason to skip, returned as `Err`; anything else going wrong fails the test.

#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use svc_testkit::TempDir;

/// Why a client test cannot run here; printed, and the test passes.
pub(crate) type Skip = String;

/// Bounds one install step (a virtualenv, a `pip install`, an `npm install`).
const INSTALL_DEADLINE: Duration = Duration::from_secs(300);

/// What pip and npm print when the registry cannot be reached.
const NETWORK_SIGNS: [&str; 14] = [
    "NewConnectionError",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "No matching distribution found",
    "ConnectTimeout",
    "ReadTimeout",
    "ProxyError",
    "ENOTFOUND",
    "EAI_AGAIN",
    "ECONNREFUSED",
    "ECONNRESET",
    "ETIMEDOUT",
    "ENETUNREACH",
];

/// Whether `program` runs at all (`program --version`).
pub(crate) fn installed(program: &str) -> bool {
    match Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => false,
        Err(error) => panic!("{program} does not run: {error}"),
        Ok(_) => true,
    }
}

/// Whether `command` exits 0, its output discarded.
pub(crate) fn succeeds(command: &mut Command) -> bool {
    command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// `target/<name>`, made by `build` in a staging directory unless `ready` already holds for
/// it, then renamed into place: a concurrent run never sees a half-made one.
pub(crate) fn once(
    name: &str,
    ready: impl Fn(&Path) -> bool,
    build: impl FnOnce(&Path) -> Result<(), Skip>,
) -> Result<PathBuf, Skip> {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the tests' temp dir sits in the target dir");
    let dir = target.join(name);
    if ready(&dir) {
        return Ok(dir);
    }
    let staging = target.join(format!("{name}.{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&staging).expect("create the staging directory");
    if let Err(skip) = build(&staging) {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(skip);
    }
    if std::fs::rename(&staging, &dir).is_err() {
        if ready(&dir) {
            // Another run put its own in place first; either will do.
            let _ = std::fs::remove_dir_all(&staging);
        } else {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::rename(&staging, &dir).expect("move the installation into place");
        }
    }
    assert!(ready(&dir), "{} was built but does not work", dir.display());
    Ok(dir)
}

/// Runs an install step within [`INSTALL_DEADLINE`]: `Err` when it failed for want of the
/// registry (or ran out of time waiting for it), a panic otherwise.
pub(crate) fn install_step(command: &mut Command, what: &str) -> Result<(), Skip> {
    let dir = TempDir::create();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = command
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let until = Instant::now() + INSTALL_DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the install step") {
            break status;
        }
        if Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{what} did not finish in {INSTALL_DEADLINE:?}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if status.success() {
        return Ok(());
    }
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    let stdout = std::fs::read_to_string(&out).unwrap_or_default();
    let network = stderr
        .lines()
        .chain(stdout.lines())
        .find(|line| NETWORK_SIGNS.iter().any(|sign| line.contains(sign)));
    if let Some(line) = network {
        return Err(format!("{what} cannot reach the registry: {}", line.trim()));
    }
    panic!("{what} failed ({status}): {stderr}{stdout}");
}

/// A virtualenv `target/<name>` with `packages`, ready when `probe` (Python code) runs in it.
pub(crate) fn venv(name: &str, packages: &[&str], probe: &str) -> Result<PathBuf, Skip> {
    if !installed("python3") {
        return Err("python3 is not installed".into());
    }
    let ready = |dir: &Path| succeeds(Command::new(python_in(dir)).args(["-c", probe]));
    let dir = once(name, ready, |staging| {
        install_step(
            Command::new("python3").args(["-m", "venv"]).arg(staging),
            "python3 -m venv",
        )?;
        install_step(
            Command::new(python_in(staging))
                .args(["-m", "pip", "install", "--quiet"])
                .arg("--disable-pip-version-check")
                .args(packages),
            &format!("pip install {}", packages.join(" ")),
        )
    })?;
    Ok(python_in(&dir))
}

/// The Python of the virtualenv `target/anthropic-venv`, with both official Python SDKs
/// (`anthropic`, `openai`), or `None` after printing why it cannot be had.
pub(crate) async fn both_python_sdks() -> Option<PathBuf> {
    let sdks = || {
        venv(
            "anthropic-venv",
            &["anthropic", "openai"],
            "import anthropic, openai",
        )
    };
    match tokio::task::spawn_blocking(sdks)
        .await
        .expect("the install task")
    {
        Ok(python) => Some(python),
        Err(why) => {
            println!("skipped: the Anthropic and OpenAI Python SDKs cannot run: {why}");
            None
        }
    }
}

/// The Python of the virtualenv at `dir`.
pub(crate) fn python_in(dir: &Path) -> PathBuf {
    dir.join("bin").join("python")
}

/// Removes what client libraries read from the environment (`OPENAI_*`, `ANTHROPIC_*`: base
/// URL, keys, org, project; proxies): a client must talk to the gateway with exactly what it
/// is given.
pub(crate) fn scrub_env(command: &mut Command) {
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().to_ascii_uppercase();
        if name.starts_with("OPENAI_") || name.starts_with("ANTHROPIC_") || name.ends_with("_PROXY")
        {
            command
                .env_remove(&name)
                .env_remove(name.to_ascii_lowercase());
        }
    }
}

/// Runs `program args… CONFIG.json` with `config` in that file and a scrubbed environment
/// ([`scrub_env`]), bounded by `deadline`; returns what it printed on stdout as JSON.
pub(crate) async fn run_json<S: AsRef<OsStr>>(
    program: &Path,
    args: &[S],
    config: &Value,
    deadline: Duration,
) -> Value {
    let dir = TempDir::create();
    let config_path = dir.path().join("config.json");
    std::fs::write(&config_path, config.to_string()).unwrap();
    let stdout_path = dir.path().join("stdout.json");
    let stderr_path = dir.path().join("stderr.txt");
    let mut command = Command::new(program);
    command
        .args(args)
        .arg(&config_path)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap());
    scrub_env(&mut command);
    let stderr = wait(command, deadline, &stderr_path).await;
    let stdout = std::fs::read_to_string(&stdout_path).unwrap();
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout:?}; stderr: {stderr}"))
}

/// Spawns `command` and polls it to its end within `deadline` (polled, not awaited in a
/// blocking call: the gateway answers on this same runtime); returns what it wrote to
/// `log_path` (its stderr, or all it printed), and panics with that unless it exited 0.
pub(crate) async fn wait(mut command: Command, deadline: Duration, log_path: &Path) -> String {
    let program = command.get_program().to_string_lossy().into_owned();
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {program}: {e}"));
    let until = Instant::now() + deadline;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break status;
        }
        if Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{program} did not finish in {deadline:?}: {}",
                std::fs::read_to_string(log_path).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let log = std::fs::read_to_string(log_path).unwrap_or_default();
    assert!(status.success(), "{program} failed ({status}): {log}");
    log
}
