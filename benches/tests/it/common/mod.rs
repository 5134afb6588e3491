//! What the load tests check after a run: nothing it made is left.

/// Fails unless the database `name` is gone and no Redis key starts with `prefix`.
pub(crate) async fn assert_removed(database: &str, prefix: &str) {
    let mut conn =
        <sqlx::PgConnection as sqlx::Connection>::connect(&svc_testkit::postgres_admin_url())
            .await
            .expect("PostgreSQL");
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_database WHERE datname = $1")
        .bind(database)
        .fetch_one(&mut conn)
        .await
        .expect("query pg_database");
    assert_eq!(left, 0, "database {database} left behind");

    let client = redis::Client::open(svc_testkit::redis_url()).expect("a Redis URL");
    let mut redis = client
        .get_multiplexed_async_connection()
        .await
        .expect("Redis");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query_async(&mut redis)
        .await
        .expect("KEYS");
    assert!(keys.is_empty(), "left behind: {keys:?}");
}
