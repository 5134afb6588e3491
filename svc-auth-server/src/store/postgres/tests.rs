use sqlx::{Connection, Row};
use svc_core::permissions::Permissions;
use svc_testkit::TestDb;

use super::pool::{PoolSettings, app_pool, connect_options};
use super::*;
use crate::store::{AgentStatus, MembershipRole, suite};

async fn migrated_db() -> TestDb {
    let db = TestDb::create().await;
    crate::migrate::run(db.url(), &PoolSettings::default())
        .await
        .expect("migrate");
    db
}

fn store_for(db: &TestDb, max_connections: u32) -> PgStore {
    let settings = PoolSettings {
        max_connections,
        ..PoolSettings::default()
    };
    PgStore::new(app_pool(connect_options(db.url()).unwrap(), &settings))
}

#[tokio::test]
async fn postgres_passes_the_store_suite() {
    suite::run(|| async {
        let db = migrated_db().await;
        (store_for(&db, 4), db)
    })
    .await;
}

/// Two orgs, each with an agent and a token.
/// An unbound chat token with a placeholder hash, issued by `issuer`.
fn chat_token(issuer_token_id: Option<Uuid>) -> NewToken {
    NewToken {
        token_id: Uuid::new_v4(),
        user_id: None,
        agent_id: None,
        permissions: Permissions::CHAT_COMPLETIONS,
        name: None,
        secret_hash: "$argon2id$placeholder".into(),
        expires_at: None,
        issuer_token_id,
        limits: Default::default(),
    }
}

async fn two_orgs(store: &PgStore) -> (Uuid, Uuid) {
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    for org in [a, b] {
        store.ensure_organization(org).await.unwrap();
        store
            .create_agent(
                org,
                NewAgent {
                    agent_id: Uuid::new_v4(),
                    status: AgentStatus::Active,
                    name: None,
                },
                None,
            )
            .await
            .unwrap();
        store
            .create_user(
                org,
                NewUser {
                    user_id: Uuid::new_v4(),
                    display_name: None,
                    role: MembershipRole::Owner,
                },
                None,
            )
            .await
            .unwrap();
        store
            .create_token(org, chat_token(None), None)
            .await
            .unwrap();
    }
    (a, b)
}

#[tokio::test]
async fn pooled_connections_run_as_the_app_role() {
    let db = migrated_db().await;
    let store = store_for(&db, 2);
    let role: String = sqlx::query_scalar("SELECT current_user::text")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(role, APP_ROLE);
    let bypass: bool =
        sqlx::query_scalar("SELECT rolbypassrls FROM pg_roles WHERE rolname = current_user")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert!(!bypass);
}

#[tokio::test]
async fn row_level_security_hides_other_orgs_without_any_where() {
    let db = migrated_db().await;
    // One connection, so every statement below runs on the same pooled session.
    let store = store_for(&db, 1);
    let (a, b) = two_orgs(&store).await;

    let mut conn = store.pool().acquire().await.unwrap();
    let mut tx = conn.begin().await.unwrap();
    sqlx::query("SELECT set_config('svc.org_id', $1, true)")
        .bind(a.to_string())
        .execute(&mut *tx)
        .await
        .unwrap();
    for table in ["organizations", "org_memberships", "agents", "tokens"] {
        let orgs: Vec<Uuid> = sqlx::query_scalar(&format!("SELECT org_id FROM {table}"))
            .fetch_all(&mut *tx)
            .await
            .unwrap();
        assert!(!orgs.is_empty(), "{table}: org A's rows are visible");
        assert!(orgs.iter().all(|org| *org == a), "{table}: saw {orgs:?}");
        assert!(!orgs.contains(&b));
    }
    let users: i64 = sqlx::query_scalar("SELECT count(*) FROM users")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert_eq!(users, 1, "only org A's member is visible");

    // Writing into another org is refused by the policy's WITH CHECK.
    let foreign_insert = sqlx::query("INSERT INTO agents (agent_id, org_id) VALUES ($1, $2)")
        .bind(Uuid::new_v4())
        .bind(b)
        .execute(&mut *tx)
        .await;
    assert!(foreign_insert.is_err());
    tx.rollback().await.unwrap();

    // The setting was local to the transaction: the same session now carries no org...
    let setting: Option<String> = sqlx::query_scalar("SELECT current_setting('svc.org_id', true)")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(setting.unwrap_or_default(), "");
    // ... and without one, no tenant row is visible (and the empty setting does not raise).
    for table in [
        "organizations",
        "org_memberships",
        "agents",
        "tokens",
        "users",
    ] {
        let count: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        assert_eq!(count, 0, "{table} visible without an org");
    }
}

#[tokio::test]
async fn the_app_role_cannot_read_hashes_except_through_the_lookup_function() {
    let db = migrated_db().await;
    let store = store_for(&db, 1);
    let (a, _) = two_orgs(&store).await;
    let token_id: Uuid = {
        let tokens = store.list_tokens(a, None, 1).await.unwrap();
        tokens[0].token_id
    };

    let direct = sqlx::query("SELECT secret_hash FROM tokens")
        .fetch_all(store.pool())
        .await;
    let error = direct.expect_err("the hash column is not granted");
    assert!(error.to_string().contains("permission denied"), "{error}");

    // No org set: the function is the one path that finds the row.
    let row = sqlx::query("SELECT org_id, secret_hash FROM token_for_validation($1)")
        .bind(token_id)
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(row.get::<Uuid, _>("org_id"), a);
    assert_eq!(row.get::<String, _>("secret_hash"), "$argon2id$placeholder");
}

#[tokio::test]
async fn migrations_are_checked_and_idempotent() {
    let db = TestDb::create().await;
    let settings = PoolSettings::default();
    let unmigrated = crate::migrate::check(db.url(), &settings).await;
    assert!(
        matches!(
            unmigrated,
            Err(crate::migrate::MigrateError::NotMigrated { .. })
        ),
        "{unmigrated:?}"
    );
    crate::migrate::run(db.url(), &settings).await.unwrap();
    crate::migrate::run(db.url(), &settings).await.unwrap();
    crate::migrate::check(db.url(), &settings).await.unwrap();
}

#[tokio::test]
async fn an_unreachable_database_is_unavailable() {
    let port = svc_testkit::free_port();
    let dsn = format!("postgres://postgres@127.0.0.1:{port}/nothing");
    let settings = PoolSettings {
        acquire_timeout: std::time::Duration::from_millis(200),
        ..PoolSettings::default()
    };
    let store = PgStore::connect_lazy(&dsn, &settings).unwrap();
    let error = store.ping().await.expect_err("nothing listens there");
    assert!(matches!(error, StoreError::Unavailable(_)), "{error:?}");
    assert!(!error.to_string().contains(&dsn));
}

/// A cluster role for one test, dropped (after the databases it owns) when dropped.
struct TestRole {
    name: String,
}

impl TestRole {
    async fn create(attributes: &str) -> TestRole {
        let name = format!("svc_owner_{}", Uuid::new_v4().simple());
        let mut admin = sqlx::PgConnection::connect(&svc_testkit::postgres_admin_url())
            .await
            .unwrap();
        sqlx::query(&format!("CREATE ROLE {name} LOGIN {attributes}"))
            .execute(&mut admin)
            .await
            .unwrap();
        TestRole { name }
    }
}

impl Drop for TestRole {
    fn drop(&mut self) {
        let name = self.name.clone();
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                if let Ok(mut admin) =
                    sqlx::PgConnection::connect(&svc_testkit::postgres_admin_url()).await
                {
                    let _ = sqlx::query(&format!("DROP ROLE IF EXISTS {name}"))
                        .execute(&mut admin)
                        .await;
                }
            });
        })
        .join();
    }
}

#[tokio::test]
async fn a_non_superuser_owner_migrates_and_validation_still_finds_tokens() {
    let role = TestRole::create("CREATEROLE").await;
    let db = TestDb::create().await;
    let mut admin = sqlx::PgConnection::connect(db.url()).await.unwrap();
    sqlx::query(&format!(
        "ALTER DATABASE {} OWNER TO {}",
        db.name(),
        role.name
    ))
    .execute(&mut admin)
    .await
    .unwrap();
    sqlx::query(&format!("ALTER SCHEMA public OWNER TO {}", role.name))
        .execute(&mut admin)
        .await
        .unwrap();
    admin.close().await.unwrap();

    let mut url = url::Url::parse(db.url()).unwrap();
    url.set_username(&role.name).unwrap();
    let owner_dsn = url.to_string();
    crate::migrate::run(&owner_dsn, &PoolSettings::default())
        .await
        .expect("a non-superuser owner can migrate");
    let store = PgStore::connect_lazy(&owner_dsn, &PoolSettings::default()).unwrap();
    let role_in_use: String = sqlx::query_scalar("SELECT current_user::text")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(role_in_use, APP_ROLE);

    let (a, _) = two_orgs(&store).await;
    let token_id = store.list_tokens(a, None, 1).await.unwrap()[0].token_id;
    let record = store.token_for_validation(token_id).await.unwrap();
    assert_eq!(record.map(|r| r.org_id), Some(a), "FORCE RLS hid the token");
    // And the policies still bind the application role.
    let visible: i64 = sqlx::query_scalar("SELECT count(*) FROM tokens")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(visible, 0);
    store.pool().close().await;
    drop(db);
}

#[tokio::test]
async fn a_tenant_transaction_sees_its_org_only_and_leaves_nothing_on_the_connection() {
    let db = migrated_db().await;
    // One connection, so the check after the commit runs on the session the transaction used.
    let store = store_for(&db, 1);
    let (a, b) = two_orgs(&store).await;

    let mut tx = pool::begin_tenant(store.pool(), b).await.unwrap();
    let orgs: Vec<Uuid> = sqlx::query_scalar("SELECT org_id FROM agents")
        .fetch_all(&mut *tx)
        .await
        .unwrap();
    assert_eq!(orgs, [b]);
    assert!(!orgs.contains(&a));
    tx.commit().await.unwrap();

    let setting: Option<String> = sqlx::query_scalar("SELECT current_setting('svc.org_id', true)")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(setting.unwrap_or_default(), "");
}

#[tokio::test]
async fn the_agent_lookup_is_one_statement_under_the_policies_and_leaves_nothing_behind() {
    let db = migrated_db().await;
    let store = store_for(&db, 1);
    let (a, b) = two_orgs(&store).await;
    let agent_of = |org: Uuid| {
        let pool = store.pool().clone();
        async move {
            sqlx::query_scalar::<_, Uuid>("SELECT agent_id FROM agents")
                .fetch_all(&mut *pool::begin_tenant(&pool, org).await.unwrap())
                .await
                .unwrap()[0]
        }
    };
    let (agent_a, agent_b) = (agent_of(a).await, agent_of(b).await);
    let found = store.agent(a, agent_a).await.unwrap().expect("own agent");
    assert_eq!((found.org_id, found.agent_id), (a, agent_a));
    assert!(
        store.agent(a, agent_b).await.unwrap().is_none(),
        "another org's agent"
    );

    // The function reads as its caller: with the org setting pointing elsewhere, the policies
    // hide even a row the WHERE clause would match.
    let hidden: Option<Uuid> = sqlx::query_scalar(
        "SELECT a.agent_id FROM (SELECT set_config('svc.org_id', $1, true)) AS s, \
         LATERAL (SELECT agent_id FROM agents WHERE agent_id = $2) AS a",
    )
    .bind(b.to_string())
    .bind(agent_a)
    .fetch_optional(store.pool())
    .await
    .unwrap();
    assert_eq!(hidden, None);
    let definer: bool =
        sqlx::query_scalar("SELECT prosecdef FROM pg_proc WHERE proname = 'agent_in_org'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert!(!definer, "agent_in_org must run as its caller, under RLS");

    let setting: Option<String> = sqlx::query_scalar("SELECT current_setting('svc.org_id', true)")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(
        setting.unwrap_or_default(),
        "",
        "the setting ends with the statement"
    );
}

#[tokio::test]
async fn an_issuer_must_be_a_token_of_the_same_org() {
    let db = migrated_db().await;
    let store = store_for(&db, 2);
    let (a, b) = two_orgs(&store).await;
    let token_of = |org| {
        let store = store.clone();
        async move { store.list_tokens(org, None, 1).await.unwrap()[0].token_id }
    };
    let issuer_in_b = token_of(b).await;
    let child = |issuer| chat_token(Some(issuer));
    let error = store
        .create_token(a, child(issuer_in_b), None)
        .await
        .expect_err("an issuer in another org");
    assert!(matches!(error, StoreError::Query(_)), "{error:?}");
    let created = store.create_token(a, child(token_of(a).await), None).await;
    assert!(created.is_ok(), "{created:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_token_reads_share_statements_and_each_gets_its_own_row() {
    let db = migrated_db().await;
    let store = store_for(&db, 4);
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let mut tokens = Vec::new();
    for (i, org) in [a, b].into_iter().cycle().take(20).enumerate() {
        if i < 2 {
            store.ensure_organization(org).await.unwrap();
        }
        let created = store
            .create_token(org, chat_token(None), None)
            .await
            .unwrap();
        tokens.push((created.token_id, org));
    }
    let revoked = tokens[3];
    store
        .revoke_token(revoked.1, revoked.0, None)
        .await
        .unwrap();
    let missing = Uuid::new_v4();

    let before = store.token_reads.statements();
    // Ten reads of each token and of an id that does not exist, all at once.
    let asks: Vec<(Uuid, Option<Uuid>)> = tokens
        .iter()
        .map(|&(token, org)| (token, Some(org)))
        .chain([(missing, None)])
        .cycle()
        .take(210)
        .collect();
    let answers = futures_util::future::join_all(asks.iter().map(|&(token, _)| {
        let store = store.clone();
        tokio::spawn(async move { store.token_for_validation(token).await })
    }))
    .await;
    for (&(token, org), answer) in asks.iter().zip(answers) {
        let record = answer.unwrap().unwrap();
        match org {
            Some(org) => {
                let record = record.expect("an existing token is found");
                assert_eq!((record.token_id, record.org_id), (token, org));
                assert_eq!(record.revoked_at.is_some(), token == revoked.0);
            }
            None => assert!(record.is_none()),
        }
    }
    let statements = store.token_reads.statements() - before;
    assert!(
        (1..210).contains(&statements),
        "210 queued reads took {statements} statements"
    );

    // A read after a revocation sees it.
    store
        .revoke_token(tokens[0].1, tokens[0].0, None)
        .await
        .unwrap();
    let record = store.token_for_validation(tokens[0].0).await.unwrap();
    assert!(record.unwrap().revoked_at.is_some());
}

#[tokio::test]
async fn a_failed_token_statement_fails_each_of_its_reads_as_unavailable() {
    let store = PgStore::connect_lazy(
        "postgres://svc@127.0.0.1:1/nowhere",
        &PoolSettings {
            acquire_timeout: std::time::Duration::from_millis(200),
            ..PoolSettings::default()
        },
    )
    .unwrap();
    let reads = (0..5).map(|_| store.token_for_validation(Uuid::new_v4()));
    for answer in futures_util::future::join_all(reads).await {
        assert!(
            matches!(answer, Err(StoreError::Unavailable(_))),
            "{answer:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_reads_with_agents_find_only_agents_of_the_tokens_org() {
    let db = migrated_db().await;
    let store = store_for(&db, 4);
    let mut orgs = Vec::new();
    for _ in 0..2 {
        let org = Uuid::new_v4();
        store.ensure_organization(org).await.unwrap();
        let agent = Uuid::new_v4();
        let new_agent = NewAgent {
            agent_id: agent,
            status: AgentStatus::Active,
            name: None,
        };
        store.create_agent(org, new_agent, None).await.unwrap();
        let token = store
            .create_token(org, chat_token(None), None)
            .await
            .unwrap();
        orgs.push((org, agent, token.token_id));
    }
    let (a, b) = (orgs[0], orgs[1]);
    // Each token with its own org's agent, with the other org's, and with none.
    let asks = [
        (a.2, a.1, Some(a.1)),
        (a.2, b.1, None),
        (b.2, b.1, Some(b.1)),
        (b.2, a.1, None),
    ];
    let before = store.token_reads.statements();
    let reads = asks.iter().cycle().take(200).map(|&(token, agent, _)| {
        let store = store.clone();
        tokio::spawn(async move { store.token_with_agent(token, agent).await })
    });
    let answers = futures_util::future::join_all(reads).await;
    for (&(token, _, expected), answer) in asks.iter().cycle().zip(answers) {
        let (record, agent) = answer.unwrap().unwrap().expect("the token exists");
        assert_eq!(record.token_id, token);
        assert_eq!(agent.map(|agent| agent.agent_id), expected);
    }
    let statements = store.token_reads.statements() - before;
    assert!((1..200).contains(&statements), "{statements} statements");
    // No org setting is left on the lookup connections.
    let missing = store.token_with_agent(Uuid::new_v4(), a.1).await.unwrap();
    assert!(missing.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_read_stuck_past_the_timeout_fails_and_the_next_ones_go_on() {
    let db = migrated_db().await;
    let settings = PoolSettings {
        max_connections: 4,
        acquire_timeout: std::time::Duration::from_millis(300),
        ..PoolSettings::default()
    };
    let store = PgStore::new(app_pool(connect_options(db.url()).unwrap(), &settings));
    let org = Uuid::new_v4();
    store.ensure_organization(org).await.unwrap();
    let token = store
        .create_token(org, chat_token(None), None)
        .await
        .unwrap();
    assert!(
        store
            .token_for_validation(token.token_id)
            .await
            .unwrap()
            .is_some()
    );

    // A lock no read can pass: every read waits on it.
    let mut admin = sqlx::PgConnection::connect(db.url()).await.unwrap();
    sqlx::query("BEGIN").execute(&mut admin).await.unwrap();
    sqlx::query("LOCK TABLE tokens IN ACCESS EXCLUSIVE MODE")
        .execute(&mut admin)
        .await
        .unwrap();
    // Three reads, one statement at a time, each bounded: not a wait on the lock for ever.
    let reads = (0..3).map(|_| store.token_for_validation(token.token_id));
    let answers = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        futures_util::future::join_all(reads),
    )
    .await
    .expect("stuck reads fail within their timeout");
    for answer in answers {
        assert!(
            matches!(answer, Err(StoreError::Unavailable(_))),
            "{answer:?}"
        );
    }

    sqlx::query("COMMIT").execute(&mut admin).await.unwrap();
    let record = store.token_for_validation(token.token_id).await.unwrap();
    assert_eq!(record.map(|r| r.token_id), Some(token.token_id));
}

/// ValidateToken's statements are planned as the few rows they read: an estimate past
/// `jit_above_cost` (PostgreSQL's default guess of 1,000 rows for each function they join)
/// would compile them with JIT on every validation, about 100 ms each.
#[tokio::test]
async fn the_validation_statements_are_planned_as_the_rows_they_read() {
    let db = migrated_db().await;
    let mut conn = sqlx::PgConnection::connect(db.url()).await.unwrap();
    let id = Uuid::new_v4();
    let ids = vec![id; 8];
    for (name, statement, arrays) in [
        ("one token", batch::ONE_TOKEN.as_str(), false),
        (
            "one token and an agent",
            batch::ONE_TOKEN_WITH_AGENT.as_str(),
            false,
        ),
        ("many", batch::MANY.as_str(), true),
    ] {
        let explain = format!("EXPLAIN (FORMAT JSON) {statement}");
        let query = sqlx::query_scalar::<_, serde_json::Value>(&explain);
        let plan = if arrays {
            query.bind(&ids).bind(&ids)
        } else if name == "one token" {
            query.bind(id)
        } else {
            query.bind(id).bind(id)
        }
        .fetch_one(&mut conn)
        .await
        .unwrap();
        let cost = plan[0]["Plan"]["Total Cost"].as_f64().unwrap();
        assert!(cost < 1_000.0, "{name}: estimated cost {cost}: {plan}");
    }
}
