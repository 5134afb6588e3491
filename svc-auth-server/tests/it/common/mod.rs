//! A real auth server on loopback over a fresh, migrated PostgreSQL database.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use svc_auth_server::config::Config;
use svc_auth_server::seed::{self, SeedOptions, SeedOutput};
use svc_auth_server::store::{AgentStatus, PgStore, postgres::PoolSettings};
use svc_auth_server::{RunningServer, Server};
use svc_proto::v1;
use svc_proto::v1::auth_service_client::AuthServiceClient;
use svc_testkit::TestDb;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{ChildStdout, Command};
use tonic::transport::Channel;
use tonic::{Code, Request};
use uuid::Uuid;

pub type Client = AuthServiceClient<Channel>;

pub struct Harness {
    pub db: TestDb,
    pub config: Config,
    pub server: RunningServer,
    /// An org with one agent per status (active, paused, suspended, archived).
    pub seed: SeedOutput,
    pub client: Client,
}

pub async fn migrated_db() -> TestDb {
    let db = TestDb::create().await;
    svc_auth_server::migrate::run(db.url(), &PoolSettings::default())
        .await
        .expect("migrate");
    db
}

pub async fn start() -> Harness {
    start_with(|_| {}).await
}

pub async fn start_with(tweak: impl FnOnce(&mut Config)) -> Harness {
    let db = migrated_db().await;
    let mut config = Config::local(db.url());
    tweak(&mut config);
    let server = Server::start(config.clone()).await.expect("server starts");
    let seed = seed_org(&config, None).await;
    let client = connect(server.grpc_addr).await;
    Harness {
        db,
        config,
        server,
        seed,
        client,
    }
}

/// Seeds an org (a new one unless `org_id`) with one agent in each status.
pub async fn seed_org(config: &Config, org_id: Option<Uuid>) -> SeedOutput {
    seed::run_with_config(
        config,
        &SeedOptions {
            org_id,
            agent_statuses: AgentStatus::ALL.to_vec(),
        },
    )
    .await
    .expect("seed")
}

/// A plaintext channel to a gRPC server on loopback.
pub async fn channel(addr: SocketAddr) -> Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(2))
        .connect()
        .await
        .expect("connect to the gRPC server")
}

pub async fn connect(addr: SocketAddr) -> Client {
    AuthServiceClient::new(channel(addr).await)
}

/// A store over the harness database, for writing fixtures without the API.
pub fn store(config: &Config) -> PgStore {
    PgStore::connect_lazy(config.postgres_dsn.expose(), &PoolSettings::default()).unwrap()
}

pub fn bearer<T>(message: T, token: &str) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    request
}

pub async fn validate(
    client: &mut Client,
    token: &str,
) -> Result<v1::ValidateTokenResponse, tonic::Status> {
    client
        .validate_token(v1::ValidateTokenRequest {
            access_token: token.to_owned(),
            agent_id: None,
        })
        .await
        .map(tonic::Response::into_inner)
}

pub async fn assert_unauthenticated(client: &mut Client, token: &str) {
    let status = validate(client, token).await.expect_err("token rejected");
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
}

pub fn create_request(org_id: Uuid, permissions: i64) -> v1::CreateTokenRequest {
    v1::CreateTokenRequest {
        org_id: org_id.to_string(),
        user_id: None,
        agent_id: None,
        permissions,
        expires_at: None,
        name: Some("test".into()),
        rpm_limit: None,
        tpm_limit: None,
    }
}

/// A chat token the server has never verified.
pub async fn fresh_token(h: &mut Harness) -> String {
    create_token(
        &mut h.client,
        &h.seed.admin_token,
        create_request(h.seed.org_id, 1),
    )
    .await
    .unwrap()
    .token
}

pub async fn create_token(
    client: &mut Client,
    admin: &str,
    request: v1::CreateTokenRequest,
) -> Result<v1::CreateTokenResponse, tonic::Status> {
    client
        .create_token(bearer(request, admin))
        .await
        .map(tonic::Response::into_inner)
}

pub fn agent_id(seed: &SeedOutput, status: &str) -> Uuid {
    seed.agents
        .iter()
        .find(|agent| agent.status == status)
        .map(|agent| agent.agent_id)
        .expect("seeded agent")
}

/// The google.rpc.ErrorInfo reason of a status.
pub fn error_reason(status: &tonic::Status) -> Option<String> {
    use tonic_types::StatusExt;
    status
        .get_error_details()
        .error_info()
        .map(|info| info.reason.clone())
}

/// A raw HTTP/1.1 GET: (status, headers lowercased, body).
pub async fn http_get(addr: SocketAddr, path: &str) -> (u16, Vec<(String, String)>, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("a full response");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status, headers, body.to_owned())
}

/// The real binary.
pub const BIN: &str = env!("CARGO_BIN_EXE_svc-auth-server");

/// The binary with exactly `vars` as its environment.
pub fn command(args: &[&str], vars: &[(&str, &str)]) -> Command {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .env_clear()
        .envs(vars.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// `svc-auth-server serve` on loopback ports, once it has logged where it listens.
pub struct Serving {
    pub child: tokio::process::Child,
    pub stdout: BufReader<ChildStdout>,
    pub grpc_addr: SocketAddr,
    /// Every line logged up to the start.
    pub logs: String,
}

/// Starts `serve` with `vars` and both listeners on 127.0.0.1, OS-assigned ports.
pub async fn serve_binary(vars: &[(&str, &str)]) -> Serving {
    let mut vars = vars.to_vec();
    vars.extend([
        ("SVC_PORT", "0"),
        ("SVC_GRPC_PORT", "0"),
        ("SVC_BIND_ADDR", "127.0.0.1"),
    ]);
    let mut child = command(&["serve"], &vars)
        .spawn()
        .expect("spawn the binary");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut logs = String::new();
    let grpc_addr = loop {
        let mut line = String::new();
        let read = tokio::time::timeout(Duration::from_secs(20), stdout.read_line(&mut line))
            .await
            .expect("the server logs its start")
            .expect("read the logs");
        assert!(read > 0, "the server exited: {logs}");
        logs.push_str(&line);
        let parsed: serde_json::Value = serde_json::from_str(&line).expect("JSON log lines");
        if parsed["message"] == "svc-auth-server listening" {
            break parsed["grpc_addr"]
                .as_str()
                .and_then(|addr| addr.parse().ok())
                .expect("the gRPC address");
        }
    };
    Serving {
        child,
        stdout,
        grpc_addr,
        logs,
    }
}

/// `subscriber` as this thread's default while the guard lives, seeing every span and event of
/// this thread although the other tests of the binary log on theirs.
///
/// `tracing` caches, per callsite, whether any subscriber is interested. While only one
/// subscriber is registered, a callsite first reached on another thread is asked of that
/// thread's default (none) and cached as never, for every thread. With a second one registered
/// first, every callsite is asked of all of them when `subscriber` registers, and later ones
/// too, so the answer is "sometimes" and each thread's own default decides.
pub fn logs_of_this_thread(subscriber: impl tracing::Subscriber + Send + Sync) -> ThreadLogs {
    let second = tracing::Dispatch::new(tracing_subscriber::registry());
    ThreadLogs {
        _default: tracing::subscriber::set_default(subscriber),
        _second: second,
    }
}

/// See [`logs_of_this_thread`].
pub struct ThreadLogs {
    _default: tracing::subscriber::DefaultGuard,
    _second: tracing::Dispatch,
}

/// Held by a test that floods a server for its whole run: the flood is sized to the machine's
/// cores, and two at once (the tests of this binary run side by side) would starve each
/// other's servers of the database.
pub async fn flood_turn() -> tokio::sync::MutexGuard<'static, ()> {
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    TURN.lock().await
}

/// ValidateToken of `token`, encoded.
pub fn validate_request(token: &str) -> Vec<u8> {
    prost::Message::encode_to_vec(&v1::ValidateTokenRequest {
        access_token: token.to_owned(),
        agent_id: None,
    })
}

/// `message` as one length-prefixed gRPC message, `flag` its compressed flag.
pub fn grpc_message(flag: u8, message: &[u8]) -> bytes::Bytes {
    let mut framed = vec![flag];
    framed.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    framed.extend_from_slice(message);
    bytes::Bytes::from(framed)
}
