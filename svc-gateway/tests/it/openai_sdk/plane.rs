//! The identity plane the client tests run against: the real auth server on a fresh
//! database, seeded with one org and an agent in every status.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use svc_auth_server::seed::{self, SeedOptions, SeedOutput};
use svc_auth_server::store::AgentStatus;
use svc_auth_server::store::postgres::PoolSettings;
use svc_auth_server::{RunningServer, Server};
use svc_testkit::TestDb;

/// The auth server's pool wait and statement deadline, and the gateway's ValidateToken
/// deadline.
const SLOW_MACHINE: Duration = Duration::from_secs(30);

/// The auth server on a fresh database, and what the seed made.
pub(crate) async fn auth_plane() -> (TestDb, RunningServer, SeedOutput) {
    let db = TestDb::create().await;
    svc_auth_server::migrate::run(db.url(), &PoolSettings::default())
        .await
        .expect("migrate");
    let mut config = svc_auth_server::Config::local(db.url());
    // The clients' tests check what the clients see, not deadlines: a busy machine running the
    // other tests beside a fuzzer's thousands of calls must not turn a slow read into a 503.
    config.pool.acquire_timeout = SLOW_MACHINE;
    let auth = Server::start(config.clone())
        .await
        .expect("auth server starts");
    let options = SeedOptions {
        org_id: None,
        agent_statuses: AgentStatus::ALL.to_vec(),
    };
    let seed = seed::run_with_config(&config, &options)
        .await
        .expect("seed");
    (db, auth, seed)
}

/// The id of the seeded agent in `status`.
pub(crate) fn agent(seed: &SeedOutput, status: &str) -> String {
    seed.agents
        .iter()
        .find(|a| a.status == status)
        .map(|a| a.agent_id.to_string())
        .expect("seeded agent")
}

/// A gateway in process in front of the auth server at `auth`, with the shared Redis under a
/// random key prefix and `vars` on top.
pub(crate) async fn gateway(auth: SocketAddr, vars: &[(&str, &str)]) -> svc_gateway::Running {
    let redis = svc_testkit::redis_url();
    let prefix = svc_testkit::redis_prefix();
    let deadline = format!("{}s", SLOW_MACHINE.as_secs());
    let mut all = vec![
        ("REDIS_URL", redis.as_str()),
        ("SVC_REDIS_KEY_PREFIX", &prefix),
        ("SVC_AUTH_VALIDATE_TIMEOUT", &deadline),
    ];
    all.extend_from_slice(vars);
    super::support::start(super::support::config(auth, &all)).await
}
