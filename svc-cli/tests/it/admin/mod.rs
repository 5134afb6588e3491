//! The admin commands (`svc token`, `usage`, `agent`, `user`, `audit`) and the command line
//! itself, run as the real `svc` binary against a real auth server on a fresh PostgreSQL
//! database, with `--json` output parsed.

mod agent;
mod audit;
mod budget;
mod command_line;
mod onboard;
mod token;
mod usage;
mod user;

use std::net::SocketAddr;
use std::process::Output;

use serde_json::Value;
use svc_auth_server::seed::{self, SeedOptions, SeedOutput};
use svc_auth_server::store::postgres::PoolSettings;
use svc_auth_server::{Config, RunningServer, Server};
use svc_testkit::TestDb;

/// A migrated, seeded database and an auth server over it.
struct Auth {
    _db: TestDb,
    server: RunningServer,
    seed: SeedOutput,
}

async fn auth_server() -> Auth {
    let db = TestDb::create().await;
    svc_auth_server::migrate::run(db.url(), &PoolSettings::default())
        .await
        .expect("migrate");
    let config = Config::local(db.url());
    let server = Server::start(config.clone()).await.expect("auth starts");
    let seed = seed::run_with_config(&config, &SeedOptions::default())
        .await
        .expect("seed");
    Auth {
        _db: db,
        server,
        seed,
    }
}

impl Auth {
    /// The variables that point `svc` at this server with the seeded admin token.
    fn admin_env(&self) -> Vec<(&'static str, String)> {
        vars(self.server.grpc_addr, &self.seed.admin_token)
    }

    /// `svc args` as the seeded admin, which must succeed and print JSON.
    async fn json(&self, args: &[&str]) -> Value {
        json(&svc(args, &self.admin_env()).await)
    }
}

/// Runs the `svc` binary with `args` and only the variables given.
async fn svc(args: &[&str], vars: &[(&str, String)]) -> Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_svc"));
    command.env_clear().args(args);
    for (name, value) in vars {
        command.env(name, value);
    }
    tokio::task::spawn_blocking(move || command.output().expect("run svc"))
        .await
        .unwrap()
}

fn vars(addr: SocketAddr, admin: &str) -> Vec<(&'static str, String)> {
    vec![
        ("SVC_AUTH_GRPC_ADDR", format!("http://{addr}")),
        ("SVC_ADMIN_TOKEN", admin.to_owned()),
    ]
}

fn json(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "svc failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("--json prints JSON")
}

/// Asserts a failure told in one line on stderr, with nothing on stdout; returns the line.
fn one_line(output: &Output, code: i32) -> String {
    assert_eq!(output.status.code(), Some(code), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(output.stdout.is_empty());
    stderr
}

/// The `items` array of a listing.
fn items<'a>(listing: &'a Value, items: &str) -> &'a Vec<Value> {
    listing[items]
        .as_array()
        .unwrap_or_else(|| panic!("no {items} in {listing}"))
}
