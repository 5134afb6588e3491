//! `svc-auth-server bootstrap`: an org and its first admin token in any environment, or a new
//! admin token for an org that exists (the break-glass path when every admin token is lost).
//!
//! This is how production gets its first identity: `seed` refuses production on purpose, and
//! the API needs an admin token to do anything. Whoever can run this command holds the
//! database's DSN already, which is the only credential it asks for. The token holds every
//! permission bit that exists; its plaintext goes to stdout once and never into a log. The act
//! is one transaction with its `org.bootstrap` audit event.

use std::fmt;

use serde::Serialize;
use uuid::Uuid;

use crate::config::Config;
use crate::grpc::MAX_DISPLAY_NAME_CHARS;
use crate::migrate::{self, MigrateError};
use crate::pat::Pat;
use crate::store::{AuditAction, AuditEntry, BootstrapOrg, NewToken, PgStore, Store, StoreError};
use crate::verify::{HashError, Hasher};
use svc_core::permissions::Permissions;

/// Which org to mint for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootstrapTarget {
    /// A new org with this name.
    NewOrg(String),
    /// An org that exists.
    Org(Uuid),
}

/// What bootstrap printed, as JSON on stdout.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct BootstrapOutput {
    /// The org.
    pub org_id: Uuid,
    /// The admin token's id.
    pub token_id: Uuid,
    /// The admin token, shown this once.
    pub admin_token: String,
}

impl fmt::Debug for BootstrapOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BootstrapOutput")
            .field("org_id", &self.org_id)
            .field("token_id", &self.token_id)
            .field("admin_token", &"<omitted>")
            .finish()
    }
}

/// Why bootstrap failed.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// The org name is empty or too long.
    #[error("--org-name must be 1 to {MAX_DISPLAY_NAME_CHARS} characters")]
    Name,
    /// `--org-id` names no org.
    #[error("no organization {0} exists")]
    NoSuchOrg(Uuid),
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

/// Mints the admin token (and creates the org when asked) through `store`.
pub async fn run<S: Store>(
    store: &S,
    hasher: &Hasher,
    target: &BootstrapTarget,
) -> Result<BootstrapOutput, BootstrapError> {
    let org = match target {
        BootstrapTarget::NewOrg(name) => {
            let length = name.chars().count();
            if length == 0 || length > MAX_DISPLAY_NAME_CHARS {
                return Err(BootstrapError::Name);
            }
            BootstrapOrg::New {
                org_id: Uuid::new_v4(),
                name: name.clone(),
            }
        }
        BootstrapTarget::Org(org_id) => BootstrapOrg::Existing(*org_id),
    };
    let org_id = org.org_id();
    let pat = Pat::generate(Uuid::new_v4());
    let secret_hash = hasher.hash(pat.secret()).await?;
    let mut audit = AuditEntry::ok(None, AuditAction::OrgBootstrap)
        .target(org_id)
        .detail("token_id", pat.token_id().to_string());
    if let BootstrapOrg::New { name, .. } = &org {
        audit = audit.detail("org_name", name.clone());
    }
    let token = NewToken {
        token_id: pat.token_id(),
        user_id: None,
        agent_id: None,
        permissions: Permissions::ALL_KNOWN,
        name: Some("bootstrap admin".to_owned()),
        secret_hash,
        expires_at: None,
        issuer_token_id: None,
        limits: Default::default(),
    };
    store
        .bootstrap(org, token, audit)
        .await?
        .ok_or(BootstrapError::NoSuchOrg(org_id))?;
    Ok(BootstrapOutput {
        org_id,
        token_id: pat.token_id(),
        admin_token: pat.expose(),
    })
}

/// Checks migrations and bootstraps the configured PostgreSQL.
pub async fn run_with_config(
    config: &Config,
    target: &BootstrapTarget,
) -> Result<BootstrapOutput, BootstrapError> {
    let dsn = config.postgres_dsn.expose();
    migrate::check(dsn, &config.pool).await?;
    let store = PgStore::connect_lazy(dsn, &config.pool)?;
    let hasher = Hasher::new(config.argon2, config.hash_concurrency)?;
    let output = run(&store, &hasher, target).await;
    store.pool().close().await;
    output
}
