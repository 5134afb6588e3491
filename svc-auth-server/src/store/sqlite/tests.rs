use svc_core::permissions::Permissions;
use svc_testkit::TempDir;

use super::*;
use crate::store::{AgentStatus, TokenLimits, suite};

fn database_in(dir: &TempDir) -> std::path::PathBuf {
    dir.path().join("identity.db")
}

#[tokio::test]
async fn a_file_database_passes_the_store_suite() {
    suite::run(|| async {
        let dir = TempDir::create();
        let store = SqliteStore::open(database_in(&dir)).await.unwrap();
        (store, dir)
    })
    .await;
}

#[tokio::test]
async fn an_in_memory_database_passes_the_store_suite() {
    suite::run(|| async { (SqliteStore::in_memory().await.unwrap(), ()) }).await;
}

fn new_token(permissions: Permissions) -> NewToken {
    NewToken {
        token_id: Uuid::new_v4(),
        user_id: None,
        agent_id: None,
        permissions,
        name: None,
        secret_hash: "$argon2id$placeholder".into(),
        expires_at: None,
        issuer_token_id: None,
        limits: Default::default(),
    }
}

#[tokio::test]
async fn data_survives_reopening_and_the_schema_is_created_once() {
    let dir = TempDir::create();
    let path = database_in(&dir);
    let org_id = Uuid::new_v4();
    let agent_id = Uuid::new_v4();
    {
        let store = SqliteStore::open(&path).await.unwrap();
        store.ensure_organization(org_id).await.unwrap();
        store
            .create_agent(
                org_id,
                NewAgent {
                    agent_id,
                    status: AgentStatus::Paused,
                    name: None,
                },
                None,
            )
            .await
            .unwrap();
        store.close().await;
    }
    let store = SqliteStore::open(&path).await.unwrap();
    let agent = store.agent(org_id, agent_id).await.unwrap().unwrap();
    assert_eq!(agent.status, AgentStatus::Paused);
    let version: i64 = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
}

#[tokio::test]
async fn a_file_runs_in_wal_mode_with_a_busy_timeout_and_foreign_keys() {
    let dir = TempDir::create();
    let store = SqliteStore::open(database_in(&dir)).await.unwrap();
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(mode, "wal");
    let busy_ms: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(busy_ms, DEFAULT_BUSY_TIMEOUT.as_millis() as i64);
    let foreign_keys: i64 = sqlx::query_scalar("PRAGMA foreign_keys")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(foreign_keys, 1);
}

#[tokio::test]
async fn a_database_from_a_newer_build_is_refused() {
    let dir = TempDir::create();
    let path = database_in(&dir);
    let store = SqliteStore::open(&path).await.unwrap();
    sqlx::query(&format!("PRAGMA user_version = {}", SCHEMA_VERSION + 1))
        .execute(store.pool())
        .await
        .unwrap();
    store.close().await;

    let error = SqliteStore::open(&path).await.expect_err("newer schema");
    assert!(matches!(error, StoreError::Query(_)), "{error:?}");
    let source = std::error::Error::source(&error).unwrap().to_string();
    assert!(source.contains("newer"), "{source}");
}

#[tokio::test]
async fn concurrent_writers_wait_for_the_lock_instead_of_failing() {
    let dir = TempDir::create();
    let store = SqliteStore::open(database_in(&dir)).await.unwrap();
    let org_id = Uuid::new_v4();
    store.ensure_organization(org_id).await.unwrap();

    let writers = (0..32).map(|_| {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .create_token(org_id, new_token(Permissions::CHAT_COMPLETIONS), None)
                .await
        })
    });
    for writer in writers {
        writer.await.unwrap().unwrap();
    }
    let listed = store.list_tokens(org_id, None, 100).await.unwrap();
    assert_eq!(listed.len(), 32);
}

#[tokio::test]
async fn the_composite_keys_refuse_a_foreign_agent_even_without_the_check() {
    // The explicit membership checks in create_token are one line of defence; the schema's
    // composite foreign keys are the next, since SQLite has no row-level security.
    let store = SqliteStore::in_memory().await.unwrap();
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    store.ensure_organization(a).await.unwrap();
    store.ensure_organization(b).await.unwrap();
    let foreign_agent = Uuid::new_v4();
    store
        .create_agent(
            b,
            NewAgent {
                agent_id: foreign_agent,
                status: AgentStatus::Active,
                name: None,
            },
            None,
        )
        .await
        .unwrap();
    let insert = sqlx::query(
        "INSERT INTO tokens (token_id, org_id, agent_id, secret_hash, created_at) \
         VALUES (?1, ?2, ?3, 'h', 0)",
    )
    .bind(Uuid::new_v4())
    .bind(a)
    .bind(foreign_agent)
    .execute(store.pool())
    .await;
    let error = insert.expect_err("foreign agent");
    assert!(
        matches!(&error, sqlx::Error::Database(db) if db.is_foreign_key_violation()),
        "{error}"
    );
}

#[tokio::test]
async fn an_unopenable_path_is_an_error_without_a_panic() {
    let dir = TempDir::create();
    // A directory where the file should be.
    let path = dir.path().join("taken");
    std::fs::create_dir(&path).unwrap();
    let error = SqliteStore::open(&path).await.expect_err("a directory");
    assert!(
        matches!(error, StoreError::Query(_) | StoreError::Unavailable(_)),
        "{error:?}"
    );
}

#[tokio::test]
async fn query_durations_are_recorded() {
    let histogram = crate::metrics::latency_histogram();
    let store = SqliteStore::in_memory()
        .await
        .unwrap()
        .with_query_histogram(histogram.clone());
    store.ping().await.unwrap();
    store.ensure_organization(Uuid::new_v4()).await.unwrap();
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register("db", "durations", histogram);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(text.contains("db_count 2"), "{text}");
}

#[test]
fn busy_and_locked_codes_are_unavailable() {
    assert!(is_busy(Some("5")));
    assert!(is_busy(Some("517"))); // SQLITE_BUSY_SNAPSHOT
    assert!(is_busy(Some("6")));
    assert!(!is_busy(Some("2067"))); // SQLITE_CONSTRAINT_UNIQUE
    assert!(!is_busy(Some("nope")));
    assert!(!is_busy(None));
}

#[tokio::test]
async fn a_version_1_database_gets_the_issuer_and_limit_columns() {
    let dir = TempDir::create();
    let path = database_in(&dir);
    let org_id = Uuid::new_v4();
    let old = new_token(Permissions::CHAT_COMPLETIONS);
    {
        let store = SqliteStore::open(&path).await.unwrap();
        store.ensure_organization(org_id).await.unwrap();
        store.create_token(org_id, old.clone(), None).await.unwrap();
        // Back to what version 1 wrote: no issuer column, no limits.
        sqlx::raw_sql(
            "ALTER TABLE tokens DROP COLUMN issuer_token_id; \
             ALTER TABLE tokens DROP COLUMN rpm_limit; ALTER TABLE tokens DROP COLUMN tpm_limit; \
             PRAGMA user_version = 1",
        )
        .execute(store.pool())
        .await
        .unwrap();
        store.close().await;
    }
    let store = SqliteStore::open(&path).await.unwrap();
    let limits = TokenLimits {
        rpm: Some(7),
        tpm: Some(7_000),
    };
    let child = NewToken {
        issuer_token_id: Some(old.token_id),
        limits,
        ..new_token(Permissions::CHAT_COMPLETIONS)
    };
    let created = store.create_token(org_id, child, None).await.unwrap();
    assert_eq!(created.issuer_token_id, Some(old.token_id));
    assert_eq!(created.limits, limits);
    let listed = store.list_tokens(org_id, None, 10).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].issuer_token_id, None);
}

#[tokio::test]
async fn the_ledger_sums_by_group_within_the_range_and_pages_by_key() {
    use chrono::{Duration, Utc};
    use svc_runtime::usage::UsageRecord;

    use crate::store::{UsageGroup, UsageQuery};

    let store = SqliteStore::in_memory().await.unwrap();
    let org_id = Uuid::new_v4();
    store.ensure_organization(org_id).await.unwrap();
    let now = Utc::now();
    let record = |model: &str, prompt: i64, at| UsageRecord {
        record_id: Uuid::now_v7(),
        org_id,
        token_id: Uuid::new_v4(),
        agent_id: None,
        model: model.to_owned(),
        provider: "p".to_owned(),
        prompt_tokens: prompt,
        completion_tokens: 1,
        status: 200,
        latency_ms: 1,
        at,
        tool: None,
        cost_usd_micros: prompt * 10,
    };
    let old = record("a", 100, now - Duration::days(2));
    let batch = [old.clone(), record("b", 2, now), record("a", 3, now)];
    store.record_usage(&batch).await.unwrap();
    // A retried batch counts nothing twice.
    store.record_usage(&batch).await.unwrap();

    let query = |after: Option<&str>, start| UsageQuery {
        group: UsageGroup::Model,
        start,
        end: None,
        after: after.map(str::to_owned),
        limit: 1,
    };
    let first = store.usage(org_id, &query(None, None)).await.unwrap();
    assert_eq!(
        (
            first[0].key.as_str(),
            first[0].requests,
            first[0].prompt_tokens
        ),
        ("a", 2, 103)
    );
    assert_eq!(first[0].cost_usd_micros, 1030);
    let second = store.usage(org_id, &query(Some("a"), None)).await.unwrap();
    assert_eq!((second[0].key.as_str(), second[0].requests), ("b", 1));
    assert!(
        store
            .usage(org_id, &query(Some("b"), None))
            .await
            .unwrap()
            .is_empty()
    );
    let recent = store
        .usage(org_id, &query(None, Some(now - Duration::days(1))))
        .await
        .unwrap();
    assert_eq!((recent[0].requests, recent[0].prompt_tokens), (1, 3));
    let by_day = UsageQuery {
        group: UsageGroup::Day,
        limit: 10,
        ..query(None, None)
    };
    let days = store.usage(org_id, &by_day).await.unwrap();
    assert_eq!(days.len(), 2);
    assert_eq!(days[1].key, now.format("%Y-%m-%d").to_string());
    // Another org sees nothing.
    assert!(
        store
            .usage(Uuid::new_v4(), &by_day)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn tool_calls_are_totalled_by_tool_with_their_outcomes_apart_from_provider_calls() {
    use chrono::Utc;
    use svc_runtime::usage::{ToolCall, UsageRecord};

    use crate::store::{UsageGroup, UsageQuery};

    let store = SqliteStore::in_memory().await.unwrap();
    let org_id = Uuid::new_v4();
    store.ensure_organization(org_id).await.unwrap();
    let record = |tool: Option<(&str, &'static str)>| UsageRecord {
        record_id: Uuid::now_v7(),
        org_id,
        token_id: Uuid::new_v4(),
        agent_id: None,
        model: String::new(),
        provider: "srv".to_owned(),
        prompt_tokens: 0,
        completion_tokens: 0,
        status: 200,
        latency_ms: 1,
        at: Utc::now(),
        tool: tool.map(|(tool, outcome)| ToolCall {
            tool: tool.to_owned(),
            outcome,
        }),
        cost_usd_micros: 0,
    };
    let batch = [
        record(Some(("srv/echo", "ok"))),
        record(Some(("srv/echo", "denied"))),
        record(Some(("srv/add", "error"))),
        record(None),
    ];
    store.record_usage(&batch).await.unwrap();
    let query = |group| UsageQuery {
        group,
        start: None,
        end: None,
        after: None,
        limit: 10,
    };
    let tools = store.usage(org_id, &query(UsageGroup::Tool)).await.unwrap();
    let seen: Vec<_> = tools
        .iter()
        .map(|t| {
            (
                t.key.as_str(),
                t.requests,
                t.ok_calls,
                t.error_calls,
                t.denied_calls,
            )
        })
        .collect();
    assert_eq!(seen, [("srv/add", 1, 0, 1, 0), ("srv/echo", 2, 1, 0, 1)]);
    // Provider groupings count provider calls only.
    let models = store
        .usage(org_id, &query(UsageGroup::Model))
        .await
        .unwrap();
    assert_eq!(models.iter().map(|m| m.requests).sum::<i64>(), 1);
}

#[tokio::test]
async fn a_budgets_spend_is_the_ledgers_cost_of_its_target_in_its_period() {
    use chrono::{Duration, Utc};
    use svc_runtime::usage::UsageRecord;

    use crate::store::{AuditAction, Budget, BudgetPeriod, BudgetTarget};

    let store = SqliteStore::in_memory().await.unwrap();
    let org_id = Uuid::new_v4();
    store.ensure_organization(org_id).await.unwrap();
    let agent_id = Uuid::new_v4();
    store
        .create_agent(
            org_id,
            crate::store::NewAgent {
                agent_id,
                status: crate::store::AgentStatus::Active,
                name: None,
            },
            None,
        )
        .await
        .unwrap();
    let now = Utc::now();
    let call = |agent: Option<Uuid>, cost: i64, at| UsageRecord {
        record_id: Uuid::now_v7(),
        org_id,
        token_id: Uuid::new_v4(),
        agent_id: agent,
        model: "m".to_owned(),
        provider: "p".to_owned(),
        prompt_tokens: 1,
        completion_tokens: 1,
        status: 200,
        latency_ms: 1,
        at,
        tool: None,
        cost_usd_micros: cost,
    };
    let month_ago = now - Duration::days(40);
    store
        .record_usage(&[
            call(Some(agent_id), 100, now),
            call(Some(agent_id), 1_000, month_ago),
            call(None, 10, now),
        ])
        .await
        .unwrap();
    let audit = || AuditEntry::ok(None, AuditAction::BudgetSet);
    for (target, period) in [
        (BudgetTarget::Org, BudgetPeriod::Day),
        (BudgetTarget::Agent(agent_id), BudgetPeriod::Total),
    ] {
        let budget = Budget {
            target,
            limit_usd_micros: 5_000,
            period,
        };
        store.set_budget(org_id, budget, audit()).await.unwrap();
    }
    let listed = store.list_budgets(org_id, now).await.unwrap();
    let spent: Vec<i64> = listed.iter().map(|b| b.spent_usd_micros).collect();
    // The org today: 100 + 10; the agent ever: 100 + 1000.
    assert_eq!(spent, [110, 1_100]);
}

#[tokio::test]
async fn a_version_5_database_gets_the_ledgers_cost_and_the_budgets_table() {
    use chrono::Utc;
    use svc_runtime::usage::UsageRecord;

    use crate::store::{AuditAction, Budget, BudgetPeriod, BudgetTarget};

    let dir = TempDir::create();
    let path = database_in(&dir);
    let org_id = Uuid::new_v4();
    {
        let store = SqliteStore::open(&path).await.unwrap();
        store.ensure_organization(org_id).await.unwrap();
        // Back to what version 5 wrote: no cost in the ledger, no budgets.
        sqlx::raw_sql(
            "ALTER TABLE usage_ledger DROP COLUMN cost_usd_micros; DROP TABLE budgets; \
             PRAGMA user_version = 5",
        )
        .execute(store.pool())
        .await
        .unwrap();
        store.close().await;
    }
    let store = SqliteStore::open(&path).await.unwrap();
    let version: i64 = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let record = UsageRecord {
        record_id: Uuid::now_v7(),
        org_id,
        token_id: Uuid::new_v4(),
        agent_id: None,
        model: "m".to_owned(),
        provider: "p".to_owned(),
        prompt_tokens: 1,
        completion_tokens: 1,
        status: 200,
        latency_ms: 1,
        at: Utc::now(),
        tool: None,
        cost_usd_micros: 42,
    };
    store.record_usage(&[record]).await.unwrap();
    let budget = Budget {
        target: BudgetTarget::Org,
        limit_usd_micros: 1_000,
        period: BudgetPeriod::Total,
    };
    store
        .set_budget(org_id, budget, AuditEntry::ok(None, AuditAction::BudgetSet))
        .await
        .unwrap();
    let listed = store.list_budgets(org_id, Utc::now()).await.unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|b| b.spent_usd_micros)
            .collect::<Vec<_>>(),
        [42]
    );
}
