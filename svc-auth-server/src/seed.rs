//! Local development data: an org, an owner, agents, an admin token and a chat token.
//!
//! Seeding works through the [`Store`] trait, so it fills the PostgreSQL store
//! (`svc-auth-server seed`) and the embedded SQLite one (`svc dev`) alike: [`run`] is
//! [`seed_org`] plus a chat token from [`mint`]. Against PostgreSQL it mints working tokens,
//! so it refuses production and any database that is not on this machine
//! ([`refuse_unsafe_target`]).

use std::fmt;

use serde::Serialize;
use svc_core::permissions::Permissions;
use uuid::Uuid;

use svc_runtime::{Environment, Secret};

use crate::config::Config;
use crate::migrate::{self, MigrateError};
use crate::pat::Pat;
use crate::store::postgres::pool::connect_options;
use crate::store::{
    AgentStatus, MembershipRole, NewAgent, NewToken, NewUser, PgStore, Store, StoreError,
};
use crate::verify::{HashError, Hasher};

/// The admin token's permissions: every bit that exists, so every administrative call works
/// with it (bootstrap's admin token holds the same).
pub const ADMIN_PERMISSIONS: Permissions = Permissions::ALL_KNOWN;
/// The chat token's permissions: chat-like routes, embeddings and MCP tools.
pub const CHAT_PERMISSIONS: Permissions = Permissions::CHAT_COMPLETIONS
    .union(Permissions::EMBEDDINGS)
    .union(Permissions::MCP_TOOLS);

/// What to create.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeedOptions {
    /// Reuse (or create) this org instead of a fresh one.
    pub org_id: Option<Uuid>,
    /// One agent per entry; one active agent when empty.
    pub agent_statuses: Vec<AgentStatus>,
}

/// One created agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeededAgent {
    /// Its id.
    pub agent_id: Uuid,
    /// Its status word.
    pub status: &'static str,
}

/// What was created, printed as JSON by `svc-auth-server seed`.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct SeedOutput {
    /// The org.
    pub org_id: Uuid,
    /// The owner.
    pub user_id: Uuid,
    /// A PAT with [`ADMIN_PERMISSIONS`].
    pub admin_token: String,
    /// A PAT with [`CHAT_PERMISSIONS`].
    pub chat_token: String,
    /// The agents.
    pub agents: Vec<SeededAgent>,
}

impl fmt::Debug for SeedOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SeedOutput")
            .field("org_id", &self.org_id)
            .field("user_id", &self.user_id)
            .field("admin_token", &"<omitted>")
            .field("chat_token", &"<omitted>")
            .field("agents", &self.agents)
            .finish()
    }
}

/// What [`seed_org`] created: everything [`SeedOutput`] holds but the chat token.
#[derive(Clone, PartialEq, Eq)]
pub struct SeededOrg {
    /// The org.
    pub org_id: Uuid,
    /// The owner.
    pub user_id: Uuid,
    /// A PAT with [`ADMIN_PERMISSIONS`].
    pub admin_token: String,
    /// The agents.
    pub agents: Vec<SeededAgent>,
}

impl fmt::Debug for SeededOrg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SeededOrg")
            .field("org_id", &self.org_id)
            .field("user_id", &self.user_id)
            .field("admin_token", &"<omitted>")
            .field("agents", &self.agents)
            .finish()
    }
}

/// Why seeding failed or was refused.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    /// SVC_ENV is production.
    #[error("seed refuses to run with SVC_ENV=production")]
    Production,
    /// The database is not on this machine.
    #[error(
        "seed refuses non-local database host {0:?} (use localhost, 127.0.0.1, ::1 or a socket)"
    )]
    RemoteHost(String),
    /// The DSN is not usable.
    #[error("POSTGRES_DSN: not a valid PostgreSQL connection string")]
    Dsn,
    /// The database is unreachable or not migrated.
    #[error(transparent)]
    Migrations(#[from] MigrateError),
    /// A write failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Hashing failed.
    #[error(transparent)]
    Hash(#[from] HashError),
}

/// Refuses production and any database host that is not loopback or a local socket.
pub fn refuse_unsafe_target(environment: Environment, dsn: &Secret) -> Result<(), SeedError> {
    if environment == Environment::Production {
        return Err(SeedError::Production);
    }
    let options = connect_options(dsn.expose()).map_err(|_| SeedError::Dsn)?;
    if options.get_socket().is_some() {
        return Ok(());
    }
    let host = options.get_host();
    let local = host.eq_ignore_ascii_case("localhost")
        || host.starts_with('/')
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if local {
        Ok(())
    } else {
        Err(SeedError::RemoteHost(host.to_owned()))
    }
}

/// Seeds through `store`, hashing with `hasher`: [`seed_org`], then a chat token bound to no
/// agent.
pub async fn run<S: Store>(
    store: &S,
    hasher: &Hasher,
    options: &SeedOptions,
) -> Result<SeedOutput, SeedError> {
    let org = seed_org(store, hasher, options).await?;
    let chat_token = mint(
        store,
        hasher,
        org.org_id,
        org.user_id,
        None,
        CHAT_PERMISSIONS,
        "seed chat",
    )
    .await?;
    Ok(SeedOutput {
        org_id: org.org_id,
        user_id: org.user_id,
        admin_token: org.admin_token,
        chat_token: chat_token.expose(),
        agents: org.agents,
    })
}

/// Creates (or reuses) the org, an owner, the agents and an admin token.
pub async fn seed_org<S: Store>(
    store: &S,
    hasher: &Hasher,
    options: &SeedOptions,
) -> Result<SeededOrg, SeedError> {
    let org_id = options.org_id.unwrap_or_else(Uuid::new_v4);
    store.ensure_organization(org_id).await?;
    let user = store
        .create_user(
            org_id,
            NewUser {
                user_id: Uuid::new_v4(),
                display_name: Some("seed owner".into()),
                role: MembershipRole::Owner,
            },
            None,
        )
        .await?;

    let statuses = if options.agent_statuses.is_empty() {
        vec![AgentStatus::Active]
    } else {
        options.agent_statuses.clone()
    };
    let mut agents = Vec::with_capacity(statuses.len());
    for status in statuses {
        let agent = store
            .create_agent(
                org_id,
                NewAgent {
                    agent_id: Uuid::new_v4(),
                    status,
                    name: Some(format!("seed {status} agent")),
                },
                None,
            )
            .await?;
        agents.push(SeededAgent {
            agent_id: agent.agent.agent_id,
            status: agent.agent.status.as_str(),
        });
    }

    let admin_token = mint(
        store,
        hasher,
        org_id,
        user.user_id,
        None,
        ADMIN_PERMISSIONS,
        "seed admin",
    )
    .await?;
    Ok(SeededOrg {
        org_id,
        user_id: user.user_id,
        admin_token: admin_token.expose(),
        agents,
    })
}

/// Mints a token of `user_id` in `org_id` (bound to `agent_id` when given) that never expires,
/// and returns it: the plaintext exists only here.
pub async fn mint<S: Store>(
    store: &S,
    hasher: &Hasher,
    org_id: Uuid,
    user_id: Uuid,
    agent_id: Option<Uuid>,
    permissions: Permissions,
    name: &str,
) -> Result<Pat, SeedError> {
    let pat = Pat::generate(Uuid::new_v4());
    let secret_hash = hasher.hash(pat.secret()).await?;
    store
        .create_token(
            org_id,
            NewToken {
                token_id: pat.token_id(),
                user_id: Some(user_id),
                agent_id,
                permissions,
                name: Some(name.to_owned()),
                secret_hash,
                expires_at: None,
                issuer_token_id: None,
                limits: Default::default(),
            },
            None,
        )
        .await?;
    Ok(pat)
}

/// Refuses unsafe targets, checks migrations, and seeds the configured PostgreSQL.
pub async fn run_with_config(
    config: &Config,
    options: &SeedOptions,
) -> Result<SeedOutput, SeedError> {
    refuse_unsafe_target(config.environment, &config.postgres_dsn)?;
    let dsn = config.postgres_dsn.expose();
    migrate::check(dsn, &config.pool).await?;
    let store = PgStore::connect_lazy(dsn, &config.pool)?;
    let hasher = Hasher::new(config.argon2, config.hash_concurrency)?;
    let output = run(&store, &hasher, options).await;
    store.pool().close().await;
    output
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_production_and_remote_hosts() {
        let local = [
            "postgres://u@localhost/db",
            "postgres://u@127.0.0.1:5432/db",
            "postgres://u@127.1.2.3/db",
            "postgres://u@[::1]:5432/db",
            "postgres://u@localhost/db?host=/var/run/postgresql",
        ];
        for dsn in local {
            refuse_unsafe_target(Environment::Development, &Secret::new(dsn)).expect(dsn);
        }
        let remote = [
            "postgres://u:pw@db.example.com/db",
            "postgres://u@10.0.0.5/db",
            "postgres://u@[2001:db8::1]/db",
        ];
        for dsn in remote {
            let error = refuse_unsafe_target(Environment::Staging, &Secret::new(dsn)).unwrap_err();
            assert!(matches!(error, SeedError::RemoteHost(_)), "{dsn}");
            assert!(!error.to_string().contains("pw"));
        }
        let error =
            refuse_unsafe_target(Environment::Production, &Secret::new(local[0])).unwrap_err();
        assert!(matches!(error, SeedError::Production));
    }

    #[test]
    fn admin_holds_management_and_chat() {
        assert!(ADMIN_PERMISSIONS.contains(Permissions::ALL_KNOWN));
        assert_eq!(CHAT_PERMISSIONS.bits(), 1 | 1 << 4 | 1 << 11);
    }
}
