//! The PostgreSQL mode's database: created fresh beside the maintenance database, dropped
//! afterwards. The server must be on this machine: the harness loads only loopback.

use std::time::Duration;

use sqlx::PgConnection;
use svc_auth_server::seed::refuse_unsafe_target;
use svc_auth_server::store::postgres::pool::{connect_options, connect_owner};
use svc_runtime::{Environment, Secret};
use tokio::time::Instant;
use url::Url;
use uuid::Uuid;

use super::LoadError;

/// Connecting to PostgreSQL or Redis never waits longer than this.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Database names and Redis key prefixes start with this, so a leftover says where it came
/// from.
pub(crate) const NAME_PREFIX: &str = "svc_load_";
/// Between two looks at the checkpoint count.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// A database of its own for one run; [`FreshDatabase::drop_now`] removes it.
pub struct FreshDatabase {
    admin_url: String,
    name: String,
    url: String,
}

impl std::fmt::Debug for FreshDatabase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URLs may carry a password.
        f.debug_struct("FreshDatabase")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl FreshDatabase {
    /// Creates a randomly named database on the server of `admin_url` (a loopback host).
    pub async fn create(admin_url: &str) -> Result<FreshDatabase, LoadError> {
        refuse_unsafe_target(Environment::Development, &Secret::new(admin_url))
            .map_err(|e| LoadError::NotLocal(format!("SVC_TEST_POSTGRES_URL: {e}")))?;
        let name = format!("{NAME_PREFIX}{}", Uuid::new_v4().simple());
        let mut url = Url::parse(admin_url).map_err(|_| {
            LoadError::NotLocal("SVC_TEST_POSTGRES_URL: not a PostgreSQL URL".to_owned())
        })?;
        url.set_path(&format!("/{name}"));
        execute(admin_url, &format!("CREATE DATABASE {name}")).await?;
        Ok(FreshDatabase {
            admin_url: admin_url.to_owned(),
            name,
            url: url.into(),
        })
    }

    /// The owner's URL of the new database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Drops it, closing whatever connections are still open on it.
    pub async fn drop_now(self) -> Result<(), LoadError> {
        let statement = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        execute(&self.admin_url, &statement).await
    }

    /// Waits, polling up to `within`, until `org_id` has at least `expected` session
    /// checkpoints: the gateway writes them off the request path, and dropping the database
    /// under a write still in flight would only produce noise. Returns how many there are.
    pub async fn wait_for_checkpoints(
        &self,
        org_id: Uuid,
        expected: usize,
        within: Duration,
    ) -> Result<usize, LoadError> {
        let mut conn = connect(&self.url).await?;
        let deadline = Instant::now() + within;
        let result = loop {
            match checkpoints(&mut conn, org_id).await {
                Ok(count) if count >= expected || Instant::now() >= deadline => break Ok(count),
                Ok(_) => tokio::time::sleep(POLL_INTERVAL).await,
                Err(error) => break Err(LoadError::postgres("counting checkpoints", error)),
            }
        };
        let _ = sqlx::Connection::close(conn).await;
        result
    }
}

/// The org's checkpoints, read as the gateway would: inside the org's row-level security
/// context, so an owner that is not a superuser sees them too.
async fn checkpoints(conn: &mut PgConnection, org_id: Uuid) -> Result<usize, sqlx::Error> {
    let mut tx = sqlx::Connection::begin(conn).await?;
    sqlx::query("SELECT set_config('svc.org_id', $1, true)")
        .bind(org_id.to_string())
        .execute(&mut *tx)
        .await?;
    let count: i64 =
        sqlx::query_scalar("SELECT count(*) FROM session_checkpoints WHERE org_id = $1")
            .bind(org_id)
            .fetch_one(&mut *tx)
            .await?;
    tx.commit().await?;
    Ok(usize::try_from(count).unwrap_or_default())
}

/// A connection of its own, as the URL's user.
async fn connect(url: &str) -> Result<PgConnection, LoadError> {
    let context = "connecting to the server of SVC_TEST_POSTGRES_URL";
    let options = connect_options(url).map_err(|e| LoadError::postgres(context, e))?;
    connect_owner(&options, CONNECT_TIMEOUT)
        .await
        .map_err(|e| LoadError::postgres(context, e))
}

/// Runs one statement on a connection of its own.
async fn execute(admin_url: &str, statement: &str) -> Result<(), LoadError> {
    let mut conn = connect(admin_url).await?;
    let result = sqlx::query(statement).execute(&mut conn).await;
    let _ = sqlx::Connection::close(conn).await;
    result
        .map(drop)
        .map_err(|e| LoadError::postgres("creating or dropping the run's database", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_remote_database_is_refused_before_any_connection() {
        let error = FreshDatabase::create("postgres://u:pw@db.example.com/postgres")
            .await
            .expect_err("refused");
        assert!(matches!(error, LoadError::NotLocal(_)), "{error}");
        assert!(!error.to_string().contains("pw"), "{error}");
    }
}
