//! The MCP server of the tests: `tests/mcp/server.py`, the official Python SDK's FastMCP over
//! Streamable HTTP on loopback, and what it recorded of each request it received.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use svc_testkit::TempDir;

use super::install::{self, Skip};

/// Where the virtualenv lives, under the target directory.
const VENV_DIR: &str = "mcp-venv";
/// Imports only with the 1.x SDK, which has FastMCP and the Streamable HTTP client.
const PROBE: &str = "from mcp.server.fastmcp import FastMCP; \
                     from mcp.client.streamable_http import streamablehttp_client";
/// Bounds the server's start.
const START_DEADLINE: Duration = Duration::from_secs(60);

/// A Python with the `mcp` SDK (1.x): a virtualenv under the target directory, made once.
pub(crate) fn sdk_python() -> Result<PathBuf, Skip> {
    install::venv(VENV_DIR, &["mcp>=1.10,<2"], PROBE)
}

/// The running server; killed on drop.
pub(crate) struct McpServer {
    child: Child,
    pub(crate) port: u16,
    log: PathBuf,
    _dir: TempDir,
}

impl McpServer {
    /// Starts `server.py` with `python` and waits (bounded) until it listens; with
    /// `json_response` it answers POSTs with JSON, else with event streams.
    pub(crate) async fn start(python: &Path, json_response: bool) -> McpServer {
        let dir = TempDir::create();
        let ready = dir.path().join("ready");
        let log = dir.path().join("requests.jsonl");
        let config = dir.path().join("server.json");
        std::fs::write(
            &config,
            json!({"ready": ready, "log": log, "json_response": json_response}).to_string(),
        )
        .unwrap();
        let script = format!("{}/tests/mcp/server.py", env!("CARGO_MANIFEST_DIR"));
        let stderr = std::fs::File::create(dir.path().join("stderr.txt")).unwrap();
        let mut command = Command::new(python);
        command
            .arg(script)
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        install::scrub_env(&mut command);
        let mut child = command.spawn().expect("start the MCP server");
        let until = Instant::now() + START_DEADLINE;
        let port = loop {
            if let Ok(text) = std::fs::read_to_string(&ready) {
                break text.trim().parse().expect("a port");
            }
            if let Some(status) = child.try_wait().unwrap() {
                let stderr =
                    std::fs::read_to_string(dir.path().join("stderr.txt")).unwrap_or_default();
                panic!("the MCP server exited ({status}): {stderr}");
            }
            assert!(Instant::now() < until, "the MCP server did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        McpServer {
            child,
            port,
            log,
            _dir: dir,
        }
    }

    /// Its Streamable HTTP endpoint.
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// Every request it received so far: `{"http", "headers", "calls": [{"method", "tool"}]}`.
    pub(crate) fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).expect("a logged request"))
            .collect()
    }

    /// How many `tools/call` of `tool` it received.
    pub(crate) fn calls_of(&self, tool: &str) -> usize {
        self.requests()
            .iter()
            .flat_map(|r| r["calls"].as_array().cloned().unwrap_or_default())
            .filter(|c| c["method"] == "tools/call" && c["tool"] == tool)
            .count()
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where the npm prefix of the TypeScript SDK lives, under the target directory.
const NODE_PREFIX: &str = "mcp-node";
/// The TypeScript SDK's package.
const NODE_SDK: &str = "@modelcontextprotocol/sdk";

/// The npm prefix holding the official TypeScript SDK, made once with `npm install`.
pub(crate) fn node_sdk_prefix() -> Result<PathBuf, Skip> {
    for program in ["node", "npm"] {
        if !install::installed(program) {
            return Err(format!("{program} is not installed"));
        }
    }
    let ready = |dir: &Path| {
        let package = dir.join("node_modules").join(NODE_SDK).join("package.json");
        install::succeeds(
            Command::new("node")
                .args(["-e", "require(process.argv[1])"])
                .arg(package),
        )
    };
    install::once(NODE_PREFIX, ready, |staging| {
        let manifest = r#"{"name": "svc-mcp-node", "private": true}"#;
        std::fs::write(staging.join("package.json"), manifest).expect("write package.json");
        install::install_step(
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--fetch-retries=1"])
                .arg(NODE_SDK)
                .current_dir(staging),
            &format!("npm install {NODE_SDK}"),
        )
    })
}
