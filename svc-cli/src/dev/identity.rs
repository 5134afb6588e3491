//! The dev identity: an org, an owner, an active agent and an admin token, created once by the
//! auth server's seed ([`seed::seed_org`]) and remembered in a state file next to the database;
//! and a chat token minted at every start ([`seed::mint`]).

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use svc_auth_server::pat::Pat;
use svc_auth_server::seed::{self, CHAT_PERMISSIONS, SeedError, SeedOptions};
use svc_auth_server::store::{AgentStatus, Store, StoreError};
use svc_auth_server::verify::Hasher;
use uuid::Uuid;

/// The state file's format version.
const STATE_VERSION: u32 = 1;

/// Why the dev identity could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The state file could not be read or written.
    #[error("{path}: {source}")]
    StateFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The state file is not ours, or is damaged.
    #[error("{0}: not a dev state file; delete it (and identity.db) to start over")]
    Corrupt(PathBuf),
    /// A store call failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Seeding the org or minting a token failed.
    #[error(transparent)]
    Seed(#[from] SeedError),
}

/// What the state file remembers across restarts. It holds the admin token's plaintext (the
/// store keeps only its hash), so it is written readable by its owner alone.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
struct State {
    version: u32,
    org_id: Uuid,
    user_id: Uuid,
    agent_id: Uuid,
    admin_token: String,
}

/// The identity a dev run prints.
#[derive(Clone, PartialEq, Eq)]
pub struct DevIdentity {
    /// The dev org.
    pub org_id: Uuid,
    /// Its owner.
    pub user_id: Uuid,
    /// The active agent the chat token is bound to.
    pub agent_id: Uuid,
    /// A PAT holding every permission bit that exists.
    pub admin_token: String,
    /// A PAT minted at this start, with chat completions only, bound to the agent.
    pub chat_token: String,
    /// Whether the org, agent and admin token came from an earlier run.
    pub reused: bool,
}

impl fmt::Debug for DevIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DevIdentity")
            .field("org_id", &self.org_id)
            .field("user_id", &self.user_id)
            .field("agent_id", &self.agent_id)
            .field("admin_token", &"<omitted>")
            .field("chat_token", &"<omitted>")
            .field("reused", &self.reused)
            .finish()
    }
}

/// Reuses the identity named in `state_path` when the store still holds it (active agent,
/// unrevoked admin token of the same org), else creates a new one and rewrites the file; then
/// mints a fresh chat token.
pub async fn prepare<S: Store>(
    store: &S,
    hasher: &Hasher,
    state_path: &Path,
) -> Result<DevIdentity, IdentityError> {
    let (state, reused) = match read_state(state_path)? {
        Some(state) if still_valid(store, &state).await? => (state, true),
        _ => {
            let state = create(store, hasher).await?;
            write_state(state_path, &state)?;
            (state, false)
        }
    };
    let chat = seed::mint(
        store,
        hasher,
        state.org_id,
        state.user_id,
        Some(state.agent_id),
        CHAT_PERMISSIONS,
        "dev chat",
    )
    .await?;
    Ok(DevIdentity {
        org_id: state.org_id,
        user_id: state.user_id,
        agent_id: state.agent_id,
        admin_token: state.admin_token,
        chat_token: chat.expose(),
        reused,
    })
}

async fn still_valid<S: Store>(store: &S, state: &State) -> Result<bool, StoreError> {
    let Ok(admin) = Pat::parse(&state.admin_token) else {
        return Ok(false);
    };
    let agent_active = store
        .agent(state.org_id, state.agent_id)
        .await?
        .is_some_and(|agent| agent.status == AgentStatus::Active);
    let admin_valid = store
        .token_for_validation(admin.token_id())
        .await?
        .is_some_and(|token| {
            // An admin token from an older build lacks the bits added since: a new identity
            // gets one holding every bit that exists.
            token.org_id == state.org_id
                && token.revoked_at.is_none()
                && token.expires_at.is_none()
                && token.permissions.contains(seed::ADMIN_PERMISSIONS)
        });
    Ok(agent_active && admin_valid && store.is_member(state.org_id, state.user_id).await?)
}

/// One org with its owner, one active agent and an admin token, through the seed API.
async fn create<S: Store>(store: &S, hasher: &Hasher) -> Result<State, IdentityError> {
    let org = seed::seed_org(store, hasher, &SeedOptions::default()).await?;
    let agent = org
        .agents
        .first()
        .ok_or(SeedError::Store(StoreError::Query(
            "seed created no agent".into(),
        )))?;
    Ok(State {
        version: STATE_VERSION,
        org_id: org.org_id,
        user_id: org.user_id,
        agent_id: agent.agent_id,
        admin_token: org.admin_token,
    })
}

fn read_state(path: &Path) -> Result<Option<State>, IdentityError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(IdentityError::StateFile {
                path: path.to_owned(),
                source,
            });
        }
    };
    match serde_json::from_slice::<State>(&bytes) {
        Ok(state) if state.version == STATE_VERSION => Ok(Some(state)),
        _ => Err(IdentityError::Corrupt(path.to_owned())),
    }
}

/// Writes through a temporary file and a rename, so a crash never leaves half a file.
fn write_state(path: &Path, state: &State) -> Result<(), IdentityError> {
    let io = |source| IdentityError::StateFile {
        path: path.to_owned(),
        source,
    };
    let json = serde_json::to_vec_pretty(state).map_err(|e| io(e.into()))?;
    let temporary = path.with_extension("json.tmp");
    // A leftover from a crash may carry other permissions; the mode applies only at creation.
    let _ = std::fs::remove_file(&temporary);
    let mut file = private_file(&temporary).map_err(io)?;
    file.write_all(&json).map_err(io)?;
    file.sync_all().map_err(io)?;
    drop(file);
    std::fs::rename(&temporary, path).map_err(io)
}

#[cfg(unix)]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::create(path)
}

#[cfg(test)]
mod tests;
