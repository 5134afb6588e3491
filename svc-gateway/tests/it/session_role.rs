//! The gateway's database role: sessions still record under row-level security, and the
//! tokens are out of its reach (no read, no write, no `token_for_validation`); the usage
//! ledger it may append to and not read.

use sqlx::{Executor, PgPool};
use svc_auth_server::pat::Pat;
use svc_auth_server::seed::{self, SeedOptions, SeedOutput};
use svc_auth_server::store::postgres::PoolSettings;
use svc_gateway::session::store::GATEWAY_ROLE;
use svc_gateway::session::{Checkpoint, SessionStore};
use svc_testkit::TestDb;
use uuid::Uuid;

async fn seeded() -> (TestDb, SeedOutput) {
    let db = TestDb::create().await;
    svc_auth_server::migrate::run(db.url(), &PoolSettings::default())
        .await
        .expect("migrate");
    let config = svc_auth_server::Config::local(db.url());
    let seed = seed::run_with_config(&config, &SeedOptions::default())
        .await
        .expect("seed");
    (db, seed)
}

fn checkpoint() -> Checkpoint {
    Checkpoint {
        request_id: Uuid::now_v7(),
        model: "svc-mock-1".to_owned(),
        message_count: 1,
        status: 200,
        latency_ms: 3,
        stream: false,
        usage: None,
    }
}

/// Runs `sql` as the gateway's pool does, in a transaction scoped to `org_id`; the error's
/// SQLSTATE when refused.
async fn as_gateway(pool: &PgPool, org_id: Uuid, sql: &str) -> Result<(), String> {
    let mut tx = svc_runtime::postgres::begin_tenant(pool, org_id)
        .await
        .expect("begin");
    let result = tx.execute(sql).await;
    let _ = tx.rollback().await;
    match result {
        Ok(_) => Ok(()),
        Err(error) => Err(error
            .as_database_error()
            .and_then(|e| e.code().map(|code| code.into_owned()))
            .unwrap_or_else(|| error.to_string())),
    }
}

#[tokio::test]
async fn the_gateway_role_records_sessions_and_cannot_touch_tokens() {
    let (db, seed) = seeded().await;
    let store = SessionStore::connect_lazy(db.url()).expect("valid DSN");
    let role: String = sqlx::query_scalar("SELECT current_user::text")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(role, GATEWAY_ROLE);

    // Sessions still record, under the org's policies.
    let recorded = checkpoint();
    store
        .record(seed.org_id, None, "sess-role", &recorded)
        .await
        .expect("the session records");
    let mut tx = svc_runtime::postgres::begin_tenant(store.pool(), seed.org_id)
        .await
        .unwrap();
    let seen: Vec<Uuid> = sqlx::query_scalar("SELECT request_id FROM session_checkpoints")
        .fetch_all(&mut *tx)
        .await
        .unwrap();
    assert_eq!(seen, [recorded.request_id]);
    tx.rollback().await.unwrap();
    let mut tx = svc_runtime::postgres::begin_tenant(store.pool(), Uuid::new_v4())
        .await
        .unwrap();
    let other_org: i64 = sqlx::query_scalar("SELECT count(*) FROM session_checkpoints")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert_eq!(other_org, 0, "another org sees nothing");
    tx.rollback().await.unwrap();

    // Nothing of the identity plane: 42501 is insufficient_privilege.
    let admin = Pat::parse(&seed.admin_token).unwrap().token_id();
    let org = seed.org_id;
    for sql in [
        "SELECT token_id FROM tokens".to_owned(),
        "SELECT secret_hash FROM tokens".to_owned(),
        format!("UPDATE tokens SET revoked_at = now() WHERE token_id = '{admin}'"),
        format!(
            "INSERT INTO tokens (token_id, org_id, permissions, secret_hash) \
             VALUES ('{}', '{org}', 63, 'x')",
            Uuid::new_v4()
        ),
        format!("SELECT * FROM token_for_validation('{admin}')"),
        "SELECT agent_id FROM agents".to_owned(),
        format!(
            "INSERT INTO organizations (org_id) VALUES ('{}')",
            Uuid::new_v4()
        ),
        // The usage ledger is write-only: GetUsage reads it through the auth server.
        "SELECT count(*) FROM usage_ledger".to_owned(),
        "DELETE FROM usage_ledger".to_owned(),
        "UPDATE usage_ledger SET prompt_tokens = 0".to_owned(),
    ] {
        assert_eq!(
            as_gateway(store.pool(), org, &sql).await,
            Err("42501".to_owned()),
            "{sql}"
        );
    }
    // It may append to the ledger, for its own org only.
    let ledger = |org: Uuid| {
        format!(
            "INSERT INTO usage_ledger (record_id, org_id, token_id, model, provider, \
                 prompt_tokens, completion_tokens, status, latency_ms, created_at) \
             VALUES ('{}', '{org}', '{admin}', 'm', 'p', 1, 1, 200, 1, now())",
            Uuid::now_v7()
        )
    };
    assert_eq!(as_gateway(store.pool(), org, &ledger(org)).await, Ok(()));
    // 42501 too: the row-level security check refuses a row of another org.
    assert_eq!(
        as_gateway(store.pool(), org, &ledger(Uuid::new_v4())).await,
        Err("42501".to_owned())
    );
    store.pool().close().await;
}

/// The production guide's statements for the gateway's database user, in the order written.
fn documented_gateway_user() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/operations/production.md"
    ))
    .expect("docs/operations/production.md");
    let mut lines = readme
        .lines()
        .skip_while(|l| l.trim() != "# Running in production");
    lines
        .find(|l| l.trim() == "```sql")
        .expect("a sql block under Running in production");
    lines
        .take_while(|l| l.trim() != "```")
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect()
}

#[tokio::test]
async fn the_documented_gateway_user_becomes_svc_gateway_and_nothing_else() {
    let (db, seed) = seeded().await;
    let statements = documented_gateway_user();
    assert_eq!(statements.len(), 2, "{statements:?}");
    // Roles are cluster-wide and tests run at once: the same statements, under a name of this
    // test's own.
    let name = format!("svc_gw_{}", Uuid::new_v4().simple());
    let owner = sqlx::PgPool::connect(db.url()).await.unwrap();
    for statement in &statements {
        let statement = statement
            .replace("svc_gateway_login", &name)
            .replace("'change-me'", "'s3cret-test'");
        owner.execute(statement.as_str()).await.expect(&statement);
    }
    let options: sqlx::postgres::PgConnectOptions = db.url().parse().unwrap();
    let dsn = format!(
        "postgres://{name}:s3cret-test@{}:{}/{}",
        options.get_host(),
        options.get_port(),
        db.name()
    );

    // The gateway's own pool: SET ROLE svc_gateway, and sessions record.
    let store = SessionStore::connect_lazy(&dsn).expect("valid DSN");
    store
        .record(seed.org_id, None, "sess-login", &checkpoint())
        .await
        .expect("the session records as the documented user");

    // The user itself: no other role to become, no token to read.
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&dsn)
        .await
        .unwrap();
    let admin = Pat::parse(&seed.admin_token).unwrap().token_id();
    for sql in [
        "SET ROLE svc_app".to_owned(),
        "SELECT secret_hash FROM tokens".to_owned(),
        "SELECT token_id FROM tokens".to_owned(),
        format!("SELECT * FROM token_for_validation('{admin}')"),
    ] {
        let error = conn.execute(sql.as_str()).await.expect_err(&sql);
        let code = error
            .as_database_error()
            .and_then(|e| e.code().map(|c| c.into_owned()));
        assert_eq!(code.as_deref(), Some("42501"), "{sql}: {error}");
    }
    drop(conn);
    store.pool().close().await;
    owner
        .execute(format!("DROP OWNED BY {name}; DROP ROLE {name}").as_str())
        .await
        .ok();
}
