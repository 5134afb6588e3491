//! Finding a Python with the `openai` package, and running a script of ours with it.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::install::{self, Skip};

/// Bounds a script; its own calls time out after 30 s each.
const SCRIPT_DEADLINE: Duration = Duration::from_secs(300);
/// Where the virtualenv lives, under the target directory.
const VENV_DIR: &str = "openai-venv";
/// Imports only with a 1.x-or-later SDK (the client class and its transport).
const PROBE: &str = "from openai import OpenAI, DefaultHttpxClient";

/// A Python with the `openai` package: the system `python3` when it has one, else a
/// virtualenv under the target directory (made once with `pip install openai`, then reused).
pub(crate) fn sdk_python() -> Result<PathBuf, Skip> {
    if install::installed("python3")
        && install::succeeds(Command::new("python3").args(["-c", PROBE]))
    {
        return Ok(PathBuf::from("python3"));
    }
    install::venv(VENV_DIR, &["openai"], PROBE)
}

/// Runs `tests/<script>` with `config`, bounded by [`SCRIPT_DEADLINE`]; returns its JSON output.
pub(crate) async fn run_script(python: &std::path::Path, script: &str, config: &Value) -> Value {
    let path = format!("{}/tests/{script}", env!("CARGO_MANIFEST_DIR"));
    install::run_json(python, &[path], config, SCRIPT_DEADLINE).await
}
