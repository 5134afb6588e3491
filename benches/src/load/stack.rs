//! Starting and stopping the stack under test: the auth server and the gateway in live mode,
//! pointed at the fake upstream, in either mode.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use svc_auth_server::seed::{self, SeedOptions};
use svc_auth_server::store::AgentStatus;
use svc_auth_server::{RunningServer, Server};
use svc_cli::dev::{DevConfig, DevServer, SVC_DEV_DATA_DIR};
use svc_gateway::config::{
    Config, POSTGRES_DSN, REDIS_URL, SVC_AUTH_GRPC_ADDR, SVC_AUTH_VALIDATE_TIMEOUT, SVC_LLM_MODE,
    SVC_PROVIDER_API_KEY, SVC_PROVIDER_BASE_URL, SVC_PROVIDER_MODELS, SVC_PROVIDER_TIMEOUT,
    SVC_RATE_LIMIT_RPM, SVC_REDIS_KEY_PREFIX,
};
use svc_gateway::{Gateway, Running};
use uuid::Uuid;

use super::postgres::FreshDatabase;
use super::redis_keys::RedisKeys;
use super::upstream::{MODEL, PROVIDER_KEY, Upstream};
use super::{LoadConfig, LoadError, Mode};

/// The ValidateToken deadline. Only the first call of a token runs Argon2id (about 17 ms in a
/// release build, far more in a debug one, and several at once on two cores); the production
/// 50 ms would turn that cold start into a 503 before any measurement. Warm calls, the ones
/// measured, are unaffected.
const VALIDATE_TIMEOUT: &str = "2s";
/// Per org and minute: far above what one machine can send, so the limiter decides on every
/// request (its cost is measured) but never refuses one.
const RATE_LIMIT_RPM: &str = "100000000";
/// One provider call; the fake answers at once.
const PROVIDER_TIMEOUT: &str = "10s";

/// How long [`Stack::settle`] waits for the last session checkpoints.
pub const SETTLE_WITHIN: Duration = Duration::from_secs(10);

/// The running stack and the identity requests use.
pub struct Stack {
    /// Where the gateway serves HTTP.
    pub gateway_addr: SocketAddr,
    /// Where the auth server serves gRPC.
    pub auth_grpc: SocketAddr,
    /// A PAT with CHAT_COMPLETIONS.
    pub chat_token: String,
    /// An active agent of the token's org.
    pub agent_id: Uuid,
    parts: Parts,
}

#[derive(Debug)]
enum Parts {
    Postgres {
        gateway: Running,
        auth: RunningServer,
        database: FreshDatabase,
        redis: RedisKeys,
        org_id: Uuid,
        sessions: bool,
    },
    Embedded {
        server: DevServer,
        data_dir: PathBuf,
    },
}

impl std::fmt::Debug for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stack")
            .field("gateway_addr", &self.gateway_addr)
            .field("auth_grpc", &self.auth_grpc)
            .field("chat_token", &"<omitted>")
            .field("agent_id", &self.agent_id)
            .field("parts", &self.parts)
            .finish()
    }
}

impl Stack {
    /// Starts the stack `config.mode` names in front of `upstream`. On failure whatever was
    /// started is stopped and removed again.
    pub async fn start(config: &LoadConfig, upstream: &Upstream) -> Result<Stack, LoadError> {
        match config.mode {
            Mode::Postgres => start_postgres(config, upstream).await,
            Mode::Embedded => start_embedded(upstream).await,
        }
    }

    /// The database the run created (PostgreSQL mode).
    pub fn database(&self) -> Option<String> {
        match &self.parts {
            Parts::Postgres { database, .. } => Some(database.name().to_owned()),
            Parts::Embedded { .. } => None,
        }
    }

    /// The Redis key prefix of the run (PostgreSQL mode).
    pub fn redis_prefix(&self) -> Option<String> {
        match &self.parts {
            Parts::Postgres { redis, .. } => Some(redis.prefix().to_owned()),
            Parts::Embedded { .. } => None,
        }
    }

    /// The embedded store's directory (embedded mode).
    pub fn data_dir(&self) -> Option<PathBuf> {
        match &self.parts {
            Parts::Embedded { data_dir, .. } => Some(data_dir.clone()),
            Parts::Postgres { .. } => None,
        }
    }

    /// With durable sessions, waits (up to [`SETTLE_WITHIN`]) until the gateway has written the
    /// checkpoints of its `answered` calls, which it does off the request path, so that the
    /// shutdown cuts none of them off. Returns what did not settle.
    pub async fn settle(&self, answered: usize) -> Option<String> {
        let Parts::Postgres {
            database,
            org_id,
            sessions: true,
            ..
        } = &self.parts
        else {
            return None;
        };
        match database
            .wait_for_checkpoints(*org_id, answered, SETTLE_WITHIN)
            .await
        {
            Ok(written) if written >= answered => None,
            Ok(written) => Some(format!(
                "{written} of {answered} session checkpoints written within {SETTLE_WITHIN:?}"
            )),
            Err(error) => Some(format!("session checkpoints: {error}")),
        }
    }

    /// Stops the gateway, then the auth server, then removes the run's data. Returns what
    /// could not be cleaned up, one line each.
    pub async fn shutdown(self) -> Vec<String> {
        let mut problems = Vec::new();
        match self.parts {
            Parts::Postgres {
                gateway,
                auth,
                database,
                redis,
                ..
            } => {
                gateway.shutdown().await;
                if let Err(error) = auth.shutdown().await {
                    problems.push(format!("auth server: {error}"));
                }
                if let Err(error) = redis.delete_all().await {
                    problems.push(format!("Redis keys {}*: {error}", redis.prefix()));
                }
                let name = database.name().to_owned();
                if let Err(error) = database.drop_now().await {
                    problems.push(format!("database {name}: {error}"));
                }
            }
            Parts::Embedded { server, data_dir } => {
                server.shutdown().await;
                if let Err(error) = std::fs::remove_dir_all(&data_dir) {
                    problems.push(format!("{}: {error}", data_dir.display()));
                }
            }
        }
        problems
    }
}

/// The gateway's variables in both modes: live provider on the fake upstream.
fn gateway_vars(upstream: &Upstream) -> Vec<(String, String)> {
    [
        (SVC_LLM_MODE, "live".to_owned()),
        (SVC_PROVIDER_BASE_URL, upstream.base_url()),
        (SVC_PROVIDER_API_KEY, PROVIDER_KEY.to_owned()),
        (SVC_PROVIDER_MODELS, MODEL.to_owned()),
        (SVC_PROVIDER_TIMEOUT, PROVIDER_TIMEOUT.to_owned()),
        (SVC_RATE_LIMIT_RPM, RATE_LIMIT_RPM.to_owned()),
        (SVC_AUTH_VALIDATE_TIMEOUT, VALIDATE_TIMEOUT.to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

fn loopback_any_port() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

async fn start_embedded(upstream: &Upstream) -> Result<Stack, LoadError> {
    let data_dir = std::env::temp_dir().join(format!("svc-load-{}", Uuid::new_v4().simple()));
    let mut vars = gateway_vars(upstream);
    vars.push((SVC_DEV_DATA_DIR.to_owned(), data_dir.display().to_string()));
    let mut config = DevConfig::from_map(vars).map_err(LoadError::DevConfig)?;
    config.gateway.listen = loopback_any_port();
    config.grpc_addr = loopback_any_port();
    match DevServer::start(config).await {
        Ok(server) => Ok(Stack {
            gateway_addr: server.http_addr,
            auth_grpc: server.grpc_addr,
            chat_token: server.identity.chat_token.clone(),
            agent_id: server.identity.agent_id,
            parts: Parts::Embedded { server, data_dir },
        }),
        Err(error) => {
            let _ = std::fs::remove_dir_all(&data_dir);
            Err(LoadError::Embedded(error))
        }
    }
}

async fn start_postgres(config: &LoadConfig, upstream: &Upstream) -> Result<Stack, LoadError> {
    let redis = RedisKeys::open(&config.redis_url).await?;
    let database = FreshDatabase::create(&config.postgres_url).await?;
    match start_on(config, upstream, &database, &redis).await {
        Ok((auth, gateway, identity)) => Ok(Stack {
            gateway_addr: gateway.addr(),
            auth_grpc: auth.grpc_addr,
            chat_token: identity.chat_token,
            agent_id: identity.agent_id,
            parts: Parts::Postgres {
                gateway,
                auth,
                database,
                redis,
                org_id: identity.org_id,
                sessions: config.sessions,
            },
        }),
        Err(error) => {
            let _ = database.drop_now().await;
            Err(error)
        }
    }
}

/// The seeded org, its active agent and its chat token.
struct Identity {
    org_id: Uuid,
    agent_id: Uuid,
    chat_token: String,
}

/// Migrates and seeds `database`, then starts the auth server and the gateway over it.
async fn start_on(
    config: &LoadConfig,
    upstream: &Upstream,
    database: &FreshDatabase,
    redis: &RedisKeys,
) -> Result<(RunningServer, Running, Identity), LoadError> {
    let auth_config = svc_auth_server::Config::local(database.url());
    svc_auth_server::migrate::run(database.url(), &auth_config.pool)
        .await
        .map_err(LoadError::Migrate)?;
    let seeded = seed::run_with_config(
        &auth_config,
        &SeedOptions {
            org_id: None,
            agent_statuses: vec![AgentStatus::Active],
        },
    )
    .await
    .map_err(LoadError::Seed)?;
    let agent_id = seeded
        .agents
        .first()
        .map(|agent| agent.agent_id)
        .ok_or(LoadError::NoAgent)?;
    let auth = Server::start(auth_config).await.map_err(LoadError::Auth)?;

    let mut vars = gateway_vars(upstream);
    vars.extend([
        (SVC_AUTH_GRPC_ADDR.to_owned(), auth.grpc_addr.to_string()),
        (REDIS_URL.to_owned(), config.redis_url.clone()),
        (SVC_REDIS_KEY_PREFIX.to_owned(), redis.prefix().to_owned()),
    ]);
    if config.sessions {
        vars.push((POSTGRES_DSN.to_owned(), database.url().to_owned()));
    }
    let gateway = match gateway_config(vars) {
        Ok(gateway_config) => start_gateway(gateway_config).await,
        Err(error) => Err(error),
    };
    match gateway {
        Ok(gateway) => {
            let identity = Identity {
                org_id: seeded.org_id,
                agent_id,
                chat_token: seeded.chat_token,
            };
            Ok((auth, gateway, identity))
        }
        Err(error) => {
            let _ = auth.shutdown().await;
            Err(error)
        }
    }
}

fn gateway_config(vars: Vec<(String, String)>) -> Result<Config, LoadError> {
    let mut config = Config::from_map(vars).map_err(LoadError::GatewayConfig)?;
    config.listen = loopback_any_port();
    Ok(config)
}

async fn start_gateway(config: Config) -> Result<Running, LoadError> {
    Gateway::new(config)
        .map_err(LoadError::Gateway)?
        .start()
        .await
        .map_err(LoadError::Gateway)
}
