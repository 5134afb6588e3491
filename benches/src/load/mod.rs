//! `svc-load`: what the gateway adds to a chat completion, end to end, on this machine,
//! against SPEC's "Proxy overhead budget target: under 20ms".
//!
//! [`run`] starts everything in this process, all on 127.0.0.1:
//!
//! | part | PostgreSQL mode (default) | embedded mode |
//! |---|---|---|
//! | upstream | a fake OpenAI-compatible provider answering a fixed completion at once | same |
//! | identity | svc-auth-server over a fresh, migrated, seeded database | `svc-gateway dev`'s auth plane over SQLite in a temporary directory |
//! | rate limit, idempotency | Redis, under a random key prefix | in process |
//! | gateway | svc-gateway in live mode on the fake upstream | same |
//!
//! It then sends the same small chat completion, first straight to the upstream and then
//! through the gateway, over a fixed number of HTTP/1.1 keep-alive connections with one request
//! in flight each (see [`client`]). One request alone goes first on each target (it pays the
//! token's one Argon2id run and names a misconfigured stack), then unmeasured warm-up requests,
//! then the measured ones; each target may use half of the time bound. The report gives
//! latency percentiles and throughput of both, and the difference: the added latency, whose
//! p99 must stay under the budget. Afterwards everything is stopped and the database, the
//! Redis keys or the temporary directory are removed.
//!
//! Both targets share the machine's cores with the auth server, PostgreSQL, Redis and the
//! client itself, so the added latency includes the gateway's share of CPU contention, as in a
//! small single-host deployment; it excludes the network between machines.
//!
//! ```no_run
//! # async fn example() -> Result<(), svc_benches::load::LoadError> {
//! use svc_benches::load::{LoadConfig, Mode};
//!
//! let config = LoadConfig { mode: Mode::Embedded, requests: 500, ..LoadConfig::default() };
//! let report = svc_benches::load::run(&config).await?;
//! println!("{report}");
//! assert!(report.passed());
//! # Ok(())
//! # }
//! ```

pub mod client;
pub mod config;
pub mod postgres;
pub mod redis_keys;
pub mod report;
pub mod stack;
pub mod upstream;

use std::fmt::Display;

use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderName, HeaderValue};
use tokio::time::Instant;

pub use config::{LoadArgs, LoadConfig, Mode};
pub use report::{Footprint, OVERHEAD_BUDGET, PhaseStats, Report};

use client::{Plan, Target};
use stack::Stack;
use upstream::{PROVIDER_KEY, Upstream};

/// The agent header of protected gateway routes.
const X_SVC_AGENT_ID: HeaderName = HeaderName::from_static("x-svc-agent-id");

/// Why a run could not measure anything. Messages never carry a DSN, a password or a token.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A server URL names a host that is not this machine.
    #[error("{0}")]
    NotLocal(String),
    /// The PostgreSQL server refused or did not answer.
    #[error("PostgreSQL, {context}: {reason}")]
    Postgres {
        /// What the harness was doing.
        context: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// The Redis server refused or did not answer.
    #[error("Redis: {0}")]
    Redis(String),
    /// The fake upstream could not listen.
    #[error("the fake upstream did not start")]
    Upstream(#[source] std::io::Error),
    /// The embedded stack's configuration was refused.
    #[error("the embedded stack's configuration was refused")]
    DevConfig(#[source] svc_cli::dev::DevConfigError),
    /// The embedded stack did not start.
    #[error("the embedded stack did not start")]
    Embedded(#[source] svc_cli::dev::DevStartError),
    /// Migrating the fresh database failed.
    #[error("migrating the run's database failed")]
    Migrate(#[source] svc_auth_server::migrate::MigrateError),
    /// Seeding the fresh database failed.
    #[error("seeding the run's database failed")]
    Seed(#[source] svc_auth_server::seed::SeedError),
    /// Seeding created no agent.
    #[error("seeding created no agent")]
    NoAgent,
    /// The auth server did not start.
    #[error("the auth server did not start")]
    Auth(#[source] svc_auth_server::server::StartError),
    /// The gateway's configuration was refused.
    #[error("the gateway's configuration was refused")]
    GatewayConfig(#[source] svc_gateway::config::ConfigError),
    /// The gateway did not start.
    #[error("the gateway did not start")]
    Gateway(#[source] svc_gateway::StartError),
    /// A target failed the request sent before the load, so nothing was measured.
    #[error("the {target} target failed its first request: {reason}")]
    Refused {
        /// `direct` or `gateway`.
        target: &'static str,
        /// Its answer, or why there was none.
        reason: String,
    },
    /// Ctrl-C or SIGTERM arrived while measuring; what the run made was removed.
    #[error("interrupted; the run's database and keys were removed")]
    Interrupted,
}

impl LoadError {
    pub(crate) fn postgres(context: &'static str, error: impl Display) -> LoadError {
        LoadError::Postgres {
            context,
            reason: error.to_string(),
        }
    }

    pub(crate) fn redis(error: redis::RedisError) -> LoadError {
        LoadError::Redis(error.to_string())
    }
}

/// Starts the stack, measures both targets, stops everything, and reports.
pub async fn run(config: &LoadConfig) -> Result<Report, LoadError> {
    let upstream = Upstream::start().await.map_err(LoadError::Upstream)?;
    let stack = match Stack::start(config, &upstream).await {
        Ok(stack) => stack,
        Err(error) => {
            upstream.shutdown().await;
            return Err(error);
        }
    };
    // A stop signal still removes the run's database and keys below. Its handler is in place
    // (polled first) before the line that says the stack is up.
    let measured = tokio::select! {
        biased;
        () = svc_runtime::shutdown::shutdown_signal() => Err(LoadError::Interrupted),
        measured = async {
            tracing::info!(
                database = stack.database().as_deref().unwrap_or("none"),
                redis_prefix = stack.redis_prefix().as_deref().unwrap_or("none"),
                "the stack is up"
            );
            measure(config, &upstream, &stack).await
        } => measured,
    };
    let mut cleanup = Vec::new();
    if let Ok(measured) = &measured {
        cleanup.extend(stack.settle(measured.gateway_answered).await);
    }
    let footprint = Footprint {
        upstream: upstream.addr(),
        gateway: stack.gateway_addr,
        auth_grpc: stack.auth_grpc,
        database: stack.database(),
        redis_prefix: stack.redis_prefix(),
        data_dir: stack.data_dir(),
    };
    cleanup.extend(stack.shutdown().await);
    let upstream_calls = upstream.calls();
    upstream.shutdown().await;
    let Measured {
        direct, gateway, ..
    } = measured?;
    Ok(Report {
        mode: config.mode,
        requests: config.requests,
        concurrency: config.concurrency,
        idempotency: config.idempotency,
        sessions: config.sessions,
        direct,
        gateway,
        upstream_calls,
        budget: config.budget,
        footprint,
        cleanup,
    })
}

/// Both measured phases.
struct Measured {
    direct: PhaseStats,
    gateway: PhaseStats,
    /// Gateway requests answered 200, checked and warm-up ones included.
    gateway_answered: usize,
}

/// One checked request per target, the warm-up, then the measured phases one after the other.
async fn measure(
    config: &LoadConfig,
    upstream: &Upstream,
    stack: &Stack,
) -> Result<Measured, LoadError> {
    let direct = Target {
        name: "direct",
        addr: upstream.addr(),
        headers: headers(&[(AUTHORIZATION, format!("Bearer {PROVIDER_KEY}"))]),
    };
    let gateway = Target {
        name: "gateway",
        addr: stack.gateway_addr,
        headers: headers(&[
            (AUTHORIZATION, format!("Bearer {}", stack.chat_token)),
            (X_SVC_AGENT_ID, stack.agent_id.to_string()),
        ]),
    };
    // One request alone first: it pays the token's one Argon2id run, and a misconfigured
    // stack is named here instead of as thousands of failures.
    for target in [&direct, &gateway] {
        client::check(target, config.idempotency)
            .await
            .map_err(|reason| LoadError::Refused {
                target: target.name,
                reason,
            })?;
    }
    // Each target gets half the time, so a long direct phase cannot starve the gateway's.
    let share = config.max_time / 2;
    let phase = |target: Target| async move {
        let deadline = Instant::now() + share;
        let plan = |requests| Plan {
            requests,
            concurrency: config.concurrency,
            idempotency: config.idempotency,
            deadline,
        };
        // Warm-up right before the measured requests: open connections, filled caches.
        let warm = client::run(&target, plan(config.warmup)).await;
        (warm, client::run(&target, plan(config.requests)).await)
    };
    let (_, direct) = phase(direct).await;
    let (warm, gateway) = phase(gateway).await;
    let gateway_answered = 1 + warm.ok + gateway.ok;
    Ok(Measured {
        direct,
        gateway,
        gateway_answered,
    })
}

/// Header values that never show in a `Debug` print.
fn headers(pairs: &[(HeaderName, String)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        if let Ok(mut value) = HeaderValue::from_str(value) {
            value.set_sensitive(true);
            map.insert(name.clone(), value);
        }
    }
    map
}
