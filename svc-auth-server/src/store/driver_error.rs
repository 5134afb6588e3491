//! Driver errors sorted into the store's: "could not get the database in time" and "the database
//! said no", the same way for every backend.
//!
//! The sorting matters upstream: [`StoreError::Unavailable`] is what readiness and the gRPC
//! mapping treat as a dependency outage, so it must not swallow refusals, and a refusal must not
//! hide an outage.

use super::StoreError;

/// Which errors beyond the pool's and the socket's mean this backend could not be used (a lost
/// TLS session, SQLite's busy lock), as opposed to a query it refused.
pub(super) type UnavailableHere = fn(&sqlx::Error) -> bool;

/// Sorts `error`; the pool and I/O failures every backend shares are unavailability.
pub(super) fn classify(error: sqlx::Error, unavailable_here: UnavailableHere) -> StoreError {
    let unavailable = matches!(
        error,
        sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::WorkerCrashed
    ) || unavailable_here(&error);
    if unavailable {
        StoreError::Unavailable(Box::new(error))
    } else {
        StoreError::Query(Box::new(error))
    }
}

/// [`classify`] for an insert of `what`, where a unique violation means the row exists already.
pub(super) fn classify_insert(
    error: sqlx::Error,
    what: &'static str,
    unavailable_here: UnavailableHere,
) -> StoreError {
    match &error {
        sqlx::Error::Database(db) if db.is_unique_violation() => StoreError::AlreadyExists(what),
        _ => classify(error, unavailable_here),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nothing_else(_: &sqlx::Error) -> bool {
        false
    }

    fn protocol(error: &sqlx::Error) -> bool {
        matches!(error, sqlx::Error::Protocol(_))
    }

    #[test]
    fn pool_and_socket_failures_are_unavailable_on_every_backend() {
        for error in [
            sqlx::Error::PoolTimedOut,
            sqlx::Error::PoolClosed,
            sqlx::Error::WorkerCrashed,
            sqlx::Error::Io(std::io::ErrorKind::ConnectionRefused.into()),
        ] {
            let sorted = classify(error, nothing_else);
            assert!(matches!(sorted, StoreError::Unavailable(_)), "{sorted:?}");
        }
    }

    #[test]
    fn the_backend_decides_the_rest() {
        let refused = classify(sqlx::Error::Protocol("bad".into()), nothing_else);
        assert!(matches!(refused, StoreError::Query(_)), "{refused:?}");
        let lost = classify(sqlx::Error::Protocol("bad".into()), protocol);
        assert!(matches!(lost, StoreError::Unavailable(_)), "{lost:?}");
        let missing = classify_insert(sqlx::Error::RowNotFound, "agent", protocol);
        assert!(matches!(missing, StoreError::Query(_)), "{missing:?}");
    }
}
