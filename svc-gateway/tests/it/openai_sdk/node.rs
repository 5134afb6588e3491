//! The official OpenAI Node SDK (npm `openai`), installed once into `target/openai-node`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::install::{self, Skip};

/// Bounds a script; its own calls time out after 30 s each.
const SCRIPT_DEADLINE: Duration = Duration::from_secs(120);
/// Where the npm prefix lives, under the target directory.
const PREFIX_DIR: &str = "openai-node";

/// Whether `dir/node_modules` resolves `openai`.
fn has_sdk(dir: &Path) -> bool {
    let package = dir.join("node_modules").join("openai");
    install::succeeds(
        Command::new("node")
            .args(["-e", "require(process.argv[1])"])
            .arg(package),
    )
}

/// The npm prefix holding `node_modules/openai`, made once with `npm install openai`.
pub(crate) fn sdk_prefix() -> Result<PathBuf, Skip> {
    for program in ["node", "npm"] {
        if !install::installed(program) {
            return Err(format!("{program} is not installed"));
        }
    }
    install::once(PREFIX_DIR, has_sdk, |staging| {
        let manifest = r#"{"name": "svc-openai-node", "private": true}"#;
        std::fs::write(staging.join("package.json"), manifest).expect("write package.json");
        install::install_step(
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--fetch-retries=1"])
                .arg("openai")
                .current_dir(staging),
            "npm install openai",
        )
    })
}

/// The installed SDK's version.
pub(crate) fn sdk_version(prefix: &Path) -> String {
    let manifest = prefix.join("node_modules/openai/package.json");
    let manifest: Value = serde_json::from_slice(&std::fs::read(manifest).expect("package.json"))
        .expect("package.json is JSON");
    manifest["version"].as_str().unwrap_or("unknown").to_owned()
}

/// Runs `tests/<script>` with `config`, bounded by [`SCRIPT_DEADLINE`]; returns its JSON output.
pub(crate) async fn run_script(script: &str, config: &Value) -> Value {
    let path = format!("{}/tests/{script}", env!("CARGO_MANIFEST_DIR"));
    install::run_json(Path::new("node"), &[path], config, SCRIPT_DEADLINE).await
}
