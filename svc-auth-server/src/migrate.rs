//! Schema migrations (the workspace's `migrations/` folder, embedded in the binary) and the
//! check that refuses to serve an unmigrated database.
//!
//! Migrations run as the DSN's own user, the owner of the schema: they create the application
//! role, the tables, the policies and the one `SECURITY DEFINER` function. Services then run as
//! the application role.

use std::collections::HashMap;

use sqlx::PgConnection;
use sqlx::migrate::Migrator;

use crate::store::postgres::pool::{PoolSettings, connect_options, connect_owner};
use crate::store::{StoreError, postgres::map_error};

/// Every migration of the workspace, in version order.
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

/// Why migrating, or checking migrations, failed.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// The database could not be reached or answered with an error.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A migration failed to apply.
    #[error("applying migrations failed")]
    Apply(#[source] sqlx::migrate::MigrateError),
    /// Some migrations this binary knows are not applied.
    #[error(
        "the database is not migrated ({missing} of {known} migrations missing): run `svc-auth-server migrate` first"
    )]
    NotMigrated {
        /// How many are missing.
        missing: usize,
        /// How many this binary knows.
        known: usize,
    },
}

/// Applies every pending migration, as the DSN's user.
pub async fn run(dsn: &str, settings: &PoolSettings) -> Result<(), MigrateError> {
    let options = connect_options(dsn)?;
    let mut conn = connect_owner(&options, settings.connect_timeout).await?;
    MIGRATOR.run(&mut conn).await.map_err(MigrateError::Apply)?;
    Ok(())
}

/// Succeeds when every migration this binary knows is applied. Later migrations from a newer
/// binary are fine: rolling deploys migrate before the old replicas are gone.
pub async fn check(dsn: &str, settings: &PoolSettings) -> Result<(), MigrateError> {
    let options = connect_options(dsn)?;
    let mut conn = connect_owner(&options, settings.connect_timeout).await?;
    check_connection(&mut conn).await
}

async fn check_connection(conn: &mut PgConnection) -> Result<(), MigrateError> {
    let known = MIGRATOR
        .iter()
        .filter(|m| !m.migration_type.is_down_migration());
    let applied: HashMap<i64, bool> =
        match sqlx::query_as::<_, (i64, bool)>("SELECT version, success FROM _sqlx_migrations")
            .fetch_all(&mut *conn)
            .await
        {
            Ok(rows) => rows.into_iter().collect(),
            Err(sqlx::Error::Database(db)) if db.code().as_deref() == Some("42P01") => {
                HashMap::new()
            }
            Err(error) => return Err(map_error(error).into()),
        };
    let known: Vec<i64> = known.map(|m| m.version).collect();
    let missing = known
        .iter()
        .filter(|version| applied.get(version) != Some(&true))
        .count();
    if missing > 0 {
        return Err(MigrateError::NotMigrated {
            missing,
            known: known.len(),
        });
    }
    Ok(())
}
