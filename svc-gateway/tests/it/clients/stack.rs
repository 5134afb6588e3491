//! One stack per client run: the real auth server on a fresh database (seeded with an org, its
//! chat token and agents), the scripted upstream, and the `svc-gateway` binary in live mode
//! in front of both, its provider registry sending `gpt-*` to the upstream as an
//! OpenAI-compatible provider and `claude-*` to it as an Anthropic one.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::Request;
use http_body_util::Full;
use svc_auth_server::RunningServer;
use svc_auth_server::seed::SeedOutput;
use svc_testkit::{TempDir, TestDb};

use super::plane;
use super::upstream::Upstream;

const BIN: &str = env!("CARGO_BIN_EXE_svc-gateway");
/// An OpenAI model of the registry.
pub(crate) const GPT: &str = "gpt-4.1";
/// A Claude model of the registry.
pub(crate) const CLAUDE: &str = "claude-sonnet-4-5";
/// The variables holding the providers' keys; only the upstream ever sees them.
const OPENAI_KEY: (&str, &str) = ("SVC_CLIENTS_OPENAI_KEY", "sk-upstream-openai-0123456789");
const ANTHROPIC_KEY: (&str, &str) = ("SVC_CLIENTS_ANTHROPIC_KEY", "sk-ant-upstream-0123456789");

pub(crate) struct Stack {
    _db: TestDb,
    _auth: RunningServer,
    seed: SeedOutput,
    pub(crate) upstream: Upstream,
    gateway: Gateway,
    _dir: TempDir,
}

/// The gateway's process, killed when the stack goes; and what it logged.
struct Gateway {
    child: Child,
    url: String,
    logs: Arc<Mutex<String>>,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Stack {
    pub(crate) async fn start() -> Stack {
        let (db, auth, seed) = plane::auth_plane().await;
        let upstream = Upstream::start().await;
        let dir = TempDir::create();
        let registry = dir.path().join("providers.toml");
        let base = upstream.base_url();
        let file = format!(
            "[[providers]]\nname = \"openai\"\nkind = \"openai\"\nbase_url = \"{base}\"\n\
             api_key_env = \"{}\"\n\n\
             [[providers]]\nname = \"anthropic\"\nkind = \"anthropic\"\nbase_url = \"{base}\"\n\
             api_key_env = \"{}\"\n\n\
             [[models]]\nname = \"gpt-*\"\ntargets = [\"openai\"]\n\n\
             [[models]]\nname = \"claude-*\"\ntargets = [\"anthropic\"]\n",
            OPENAI_KEY.0, ANTHROPIC_KEY.0
        );
        std::fs::write(&registry, file).unwrap();
        let gateway = Gateway::start(auth.grpc_addr, &registry).await;
        Stack {
            _db: db,
            _auth: auth,
            seed,
            upstream,
            gateway,
            _dir: dir,
        }
    }

    /// The gateway's root URL (no `/v1`).
    pub(crate) fn url(&self) -> &str {
        &self.gateway.url
    }

    /// The seeded chat token: the key every client is given.
    pub(crate) fn token(&self) -> &str {
        &self.seed.chat_token
    }

    /// The seeded active agent: every client's `X-SVC-Agent-ID`.
    pub(crate) fn agent(&self) -> String {
        plane::agent(&self.seed, "active")
    }

    /// What the gateway logged so far.
    pub(crate) fn logs(&self) -> String {
        self.gateway.logs.lock().unwrap().clone()
    }

    /// The config every client script gets: where the gateway is, its key, the agent, the
    /// models.
    pub(crate) fn config(&self) -> serde_json::Value {
        serde_json::json!({
            "base_url": self.url(),
            "token": self.token(),
            "agent_id": self.agent(),
            "gpt": GPT,
            "claude": CLAUDE,
        })
    }
}

impl Gateway {
    async fn start(auth: std::net::SocketAddr, registry: &std::path::Path) -> Gateway {
        let port = svc_testkit::free_port();
        let mut child = Command::new(BIN)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("SVC_PORT", port.to_string())
            .env("SVC_AUTH_GRPC_ADDR", auth.to_string())
            // A first token's check hashes it, slowly in a debug build.
            .env("SVC_AUTH_VALIDATE_TIMEOUT", "5s")
            .env("SVC_PROVIDERS_FILE", registry)
            .env(OPENAI_KEY.0, OPENAI_KEY.1)
            .env(ANTHROPIC_KEY.0, ANTHROPIC_KEY.1)
            .env("REDIS_URL", svc_testkit::redis_url())
            .env("SVC_REDIS_KEY_PREFIX", svc_testkit::redis_prefix())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the gateway binary");
        let logs = Arc::new(Mutex::new(String::new()));
        let pipes: [Box<dyn std::io::Read + Send>; 2] = [
            Box::new(child.stdout.take().unwrap()),
            Box::new(child.stderr.take().unwrap()),
        ];
        for pipe in pipes {
            let logs = logs.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let mut logs = logs.lock().unwrap();
                    logs.push_str(&line);
                    logs.push('\n');
                }
            });
        }
        let gateway = Gateway {
            child,
            url: format!("http://127.0.0.1:{port}"),
            logs,
        };
        let http = super::support::client();
        let ready = format!("{}/ready", gateway.url);
        let up = svc_testkit::eventually(Duration::from_secs(20), || async {
            let request = Request::get(&ready).body(Full::default()).unwrap();
            matches!(http.request(request).await, Ok(r) if r.status() == 200)
        })
        .await;
        assert!(
            up,
            "the gateway binary is ready: {}",
            gateway.logs.lock().unwrap()
        );
        gateway
    }
}
