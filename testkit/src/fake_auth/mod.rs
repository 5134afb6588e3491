//! An in-process `svc.auth.v1.AuthService` on loopback, scripted per token and per agent, for
//! testing its clients without the real auth server and its database.
//!
//! One fake stands for one org. It answers as the real server does where a test says nothing
//! (an unknown token is Unauthenticated, an unknown agent or another org's is PermissionDenied
//! with reason `AGENT_NOT_AUTHORIZED`), records every call's metadata, and serves plaintext or,
//! with [`FakeAuth::tls`], TLS (mutual when the config names a client CA).
//!
//! ```no_run
//! # async fn demo() {
//! use svc_testkit::fake_auth::{AgentAnswer, FakeAuth, Grant, Method, TokenAnswer};
//!
//! let agent = uuid::Uuid::new_v4().to_string();
//! let auth = FakeAuth::new()
//!     .token("svc_pat_...", TokenAnswer::Valid(Grant::chat()))
//!     .agent(&agent, AgentAnswer::Denied(svc_testkit::fake_auth::AGENT_SUSPENDED))
//!     .start()
//!     .await;
//! // ... point the client under test at auth.addr() ...
//! assert!(auth.calls_to(Method::ValidateAgent).is_empty());
//! auth.shutdown().await;
//! # }
//! ```

mod script;
mod service;

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use svc_proto::v1::auth_service_server::AuthServiceServer;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::metadata::MetadataMap;
use tonic::transport::ServerTlsConfig;
use tonic::transport::server::TcpIncoming;
use uuid::Uuid;

pub use script::{
    AGENT_NOT_AUTHORIZED, AGENT_SUSPENDED, AgentAnswer, CHAT_COMPLETIONS, Grant, TokenAnswer,
};

/// A method of `svc.auth.v1.AuthService`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    ValidateToken,
    ValidateAgent,
    CreateToken,
    RevokeToken,
    ListTokens,
    GetUsage,
    CreateAgent,
    GetAgent,
    ListAgents,
    SetAgentStatus,
    SetAgentTools,
    CreateUser,
    ListUsers,
    ListAuditEvents,
    SetBudget,
    DeleteBudget,
    ListBudgets,
    GetBudgetSpend,
}

impl Method {
    /// The method's name in the proto, e.g. `ValidateToken`.
    pub fn name(self) -> &'static str {
        match self {
            Method::ValidateToken => "ValidateToken",
            Method::ValidateAgent => "ValidateAgent",
            Method::CreateToken => "CreateToken",
            Method::RevokeToken => "RevokeToken",
            Method::ListTokens => "ListTokens",
            Method::GetUsage => "GetUsage",
            Method::CreateAgent => "CreateAgent",
            Method::GetAgent => "GetAgent",
            Method::ListAgents => "ListAgents",
            Method::SetAgentStatus => "SetAgentStatus",
            Method::SetAgentTools => "SetAgentTools",
            Method::CreateUser => "CreateUser",
            Method::ListUsers => "ListUsers",
            Method::ListAuditEvents => "ListAuditEvents",
            Method::SetBudget => "SetBudget",
            Method::DeleteBudget => "DeleteBudget",
            Method::ListBudgets => "ListBudgets",
            Method::GetBudgetSpend => "GetBudgetSpend",
        }
    }
}

/// One call the fake received, recorded on arrival (before any scripted delay). Access tokens
/// are not recorded: a test that needs one already has it.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: Method,
    /// The request metadata as the server saw it (`grpc-timeout`, `traceparent`, ...).
    pub metadata: MetadataMap,
    /// ValidateAgent's `org_id`; `None` for the other methods.
    pub org_id: Option<String>,
    /// ValidateAgent's `agent_id`; `None` for the other methods.
    pub agent_id: Option<String>,
}

impl Call {
    fn new(method: Method, metadata: &MetadataMap) -> Call {
        Call {
            method,
            metadata: metadata.clone(),
            org_id: None,
            agent_id: None,
        }
    }

    /// The ASCII metadata value `key`, if the call carried one.
    pub fn metadata_str(&self, key: &str) -> Option<&str> {
        self.metadata.get(key).and_then(|v| v.to_str().ok())
    }
}

type Hook = Arc<dyn Fn(&Call) + Send + Sync>;

/// Where calls go: the fake's own list, then each hook.
#[derive(Clone, Default)]
struct Recorder {
    calls: Arc<Mutex<Vec<Call>>>,
    hooks: Vec<Hook>,
}

impl Recorder {
    fn record(&self, call: Call) {
        for hook in &self.hooks {
            hook(&call);
        }
        // A test that panicked while holding the lock has failed already; keep answering.
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        calls.push(call);
    }

    fn snapshot(&self) -> Vec<Call> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder")
            .field("hooks", &self.hooks.len())
            .finish_non_exhaustive()
    }
}

/// The script of one fake: its org, its tokens and agents, and how it serves.
pub struct FakeAuth {
    org_id: Uuid,
    tokens: HashMap<String, TokenAnswer>,
    agents: HashMap<String, AgentAnswer>,
    tls: Option<ServerTlsConfig>,
    recorder: Recorder,
}

impl fmt::Debug for FakeAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Tokens stay out of Debug output, as they do everywhere else.
        f.debug_struct("FakeAuth")
            .field("org_id", &self.org_id)
            .field("tokens", &self.tokens.len())
            .field("agents", &self.agents)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for FakeAuth {
    fn default() -> FakeAuth {
        FakeAuth::new()
    }
}

impl FakeAuth {
    /// A fake for a random org, knowing no token and no agent.
    pub fn new() -> FakeAuth {
        FakeAuth::for_org(Uuid::new_v4())
    }

    /// A fake for `org_id`, knowing no token and no agent.
    pub fn for_org(org_id: Uuid) -> FakeAuth {
        FakeAuth {
            org_id,
            tokens: HashMap::new(),
            agents: HashMap::new(),
            tls: None,
            recorder: Recorder::default(),
        }
    }

    /// The org every valid token belongs to and every known agent lives in.
    pub fn org_id(&self) -> Uuid {
        self.org_id
    }

    /// ValidateToken answers `answer` for `access_token`.
    pub fn token(mut self, access_token: impl Into<String>, answer: TokenAnswer) -> FakeAuth {
        self.tokens.insert(access_token.into(), answer);
        self
    }

    /// ValidateAgent answers `answer` for `agent_id` asked with the fake's org.
    pub fn agent(mut self, agent_id: impl ToString, answer: AgentAnswer) -> FakeAuth {
        self.agents.insert(agent_id.to_string(), answer);
        self
    }

    /// Serves over TLS with `config`; `client_ca_root` in it makes the TLS mutual.
    pub fn tls(mut self, config: ServerTlsConfig) -> FakeAuth {
        self.tls = Some(config);
        self
    }

    /// Also hands each call to `hook` as it arrives, for a test that keeps calls its own way.
    pub fn on_call(mut self, hook: impl Fn(&Call) + Send + Sync + 'static) -> FakeAuth {
        self.recorder.hooks.push(Arc::new(hook));
        self
    }

    /// Serves on a fresh port of 127.0.0.1 until [`FakeAuthServer::shutdown`] or the end of the
    /// test's runtime; dropping the handle leaves it serving.
    ///
    /// # Panics
    ///
    /// When no loopback port can be bound or the TLS config is unusable: test setup errors.
    pub async fn start(self) -> FakeAuthServer {
        self.start_on(SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// As [`start`](FakeAuth::start), on `addr`: the port of a server that was shut down, for
    /// a client to find the service back where it was.
    ///
    /// # Panics
    ///
    /// When `addr` cannot be bound or the TLS config is unusable: test setup errors.
    pub async fn start_on(self, addr: SocketAddr) -> FakeAuthServer {
        let listener = TcpListener::bind(addr)
            .await
            .expect("bind a loopback port for the fake AuthService");
        let addr = listener
            .local_addr()
            .expect("the fake AuthService's address");
        let mut server = tonic::transport::Server::builder();
        if let Some(tls) = self.tls {
            server = server
                .tls_config(tls)
                .expect("a usable TLS config for the fake AuthService");
        }
        let recorder = self.recorder.clone();
        let service = service::Scripted {
            org_id: self.org_id,
            tokens: self.tokens,
            agents: self.agents,
            recorder: self.recorder,
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let signal = async move {
            // A dropped handle is not a request to stop.
            if stopped.await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        // Without TCP_NODELAY a reply written in two parts waits on the peer's delayed ACK.
        let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
        let serving = tokio::spawn(async move {
            let _ = server
                .add_service(AuthServiceServer::new(service))
                .serve_with_incoming_shutdown(incoming, signal)
                .await;
        });
        FakeAuthServer {
            addr,
            recorder,
            stop,
            serving,
        }
    }
}

/// A running [`FakeAuth`].
#[derive(Debug)]
pub struct FakeAuthServer {
    addr: SocketAddr,
    recorder: Recorder,
    stop: oneshot::Sender<()>,
    serving: JoinHandle<()>,
}

impl FakeAuthServer {
    /// The address it listens on, `127.0.0.1:<port>`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every call received so far, in arrival order.
    pub fn calls(&self) -> Vec<Call> {
        self.recorder.snapshot()
    }

    /// The calls received so far to `method`, in arrival order.
    pub fn calls_to(&self, method: Method) -> Vec<Call> {
        let mut calls = self.calls();
        calls.retain(|call| call.method == method);
        calls
    }

    /// Stops accepting, lets calls in flight finish, and returns once the server is gone.
    pub async fn shutdown(self) {
        let _ = self.stop.send(());
        let _ = self.serving.await;
    }
}
