//! The pool of [`svc_runtime::postgres`] (every connection as the application role, bounded
//! waits, org-scoped transactions), with its errors as [`StoreError`]s.

use std::time::Duration;

use sqlx::PgConnection;
use sqlx::postgres::PgConnectOptions;
use svc_runtime::postgres::{self, ConnectError};

pub use svc_runtime::postgres::{
    APP_ROLE, DEFAULT_ACQUIRE_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
    PoolSettings, app_pool, begin_tenant,
};

use crate::store::StoreError;

/// Parses a DSN without echoing it in the error.
pub fn connect_options(dsn: &str) -> Result<PgConnectOptions, StoreError> {
    postgres::connect_options(dsn).map_err(|error| StoreError::Query(error.problem.into()))
}

/// One connection as the DSN's own user (migrations need the owner), within `timeout`.
pub async fn connect_owner(
    options: &PgConnectOptions,
    timeout: Duration,
) -> Result<PgConnection, StoreError> {
    match postgres::connect_owner(options, timeout).await {
        Ok(conn) => Ok(conn),
        Err(ConnectError::Driver(error)) => Err(super::map_error(error)),
        Err(error @ ConnectError::Timeout) => Err(StoreError::Unavailable(error.into())),
    }
}
