//! Money budgets over gRPC on loopback against PostgreSQL: set, replace, list with the
//! ledger's spend, delete, the permission they need, other orgs' targets, and the audit trail.

use crate::common::*;
use svc_core::permissions::Permissions;
use svc_proto::v1;
use tonic::Code;
use uuid::Uuid;

fn set(scope: &str, target_id: &str, limit: i64, period: &str) -> v1::SetBudgetRequest {
    v1::SetBudgetRequest {
        scope: scope.to_owned(),
        target_id: target_id.to_owned(),
        limit_usd_micros: limit,
        period: period.to_owned(),
    }
}

fn delete(scope: &str, target_id: &str) -> v1::DeleteBudgetRequest {
    v1::DeleteBudgetRequest {
        scope: scope.to_owned(),
        target_id: target_id.to_owned(),
    }
}

async fn list(h: &mut Harness, admin: &str) -> Vec<v1::Budget> {
    h.client
        .list_budgets(bearer(v1::ListBudgetsRequest {}, admin))
        .await
        .expect("budgets listed")
        .into_inner()
        .budgets
}

/// The org's audit events of `action`, newest first.
async fn events(h: &mut Harness, admin: &str, action: &str) -> Vec<v1::AuditEvent> {
    h.client
        .list_audit_events(bearer(
            v1::ListAuditEventsRequest {
                action: Some(action.to_owned()),
                ..Default::default()
            },
            admin,
        ))
        .await
        .unwrap()
        .into_inner()
        .events
}

/// Writes one ledger row of the harness org as the database owner (the gateway's write).
async fn spend(h: &Harness, agent_id: Option<Uuid>, token_id: Uuid, cost: i64, days_ago: i64) {
    let pool = sqlx::PgPool::connect(h.db.url()).await.unwrap();
    sqlx::query(
        "INSERT INTO usage_ledger (record_id, org_id, token_id, agent_id, model, provider, \
             prompt_tokens, completion_tokens, status, latency_ms, created_at, cost_usd_micros) \
         VALUES ($1, $2, $3, $4, 'm', 'p', 1, 1, 200, 1, now() - make_interval(days => $5), $6)",
    )
    .bind(Uuid::now_v7())
    .bind(h.seed.org_id)
    .bind(token_id)
    .bind(agent_id)
    .bind(i32::try_from(days_ago).unwrap())
    .bind(cost)
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
}

#[tokio::test]
async fn budgets_are_set_replaced_listed_with_their_spend_and_deleted() {
    let mut h = start().await;
    let admin = h.seed.admin_token.clone();
    let agent = agent_id(&h.seed, "active");
    let token = create_token(&mut h.client, &admin, create_request(h.seed.org_id, 1))
        .await
        .unwrap()
        .token_id;
    let token_id: Uuid = token.parse().unwrap();

    let org = h
        .client
        .set_budget(bearer(set("org", "", 5_000_000, "month"), &admin))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (
            org.scope.as_str(),
            org.target_id.as_str(),
            org.limit_usd_micros
        ),
        ("org", "", 5_000_000)
    );
    assert_eq!(org.spent_usd_micros, None, "SetBudget reads no ledger");
    for (limit, period) in [(1_000, "day"), (2_000, "week")] {
        h.client
            .set_budget(bearer(
                set("agent", &agent.to_string(), limit, period),
                &admin,
            ))
            .await
            .unwrap();
    }
    h.client
        .set_budget(bearer(set("token", &token, 300, "total"), &admin))
        .await
        .unwrap();

    // This month: 40 by the agent (through the token), 2 by another token; long ago, 1000.
    spend(&h, Some(agent), token_id, 40, 0).await;
    spend(&h, None, Uuid::new_v4(), 2, 0).await;
    spend(&h, Some(agent), token_id, 1_000, 400).await;

    let budgets = list(&mut h, &admin).await;
    let seen: Vec<(&str, i64, &str, Option<i64>)> = budgets
        .iter()
        .map(|b| {
            (
                b.scope.as_str(),
                b.limit_usd_micros,
                b.period.as_str(),
                b.spent_usd_micros,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("org", 5_000_000, "month", Some(42)),
            ("agent", 2_000, "week", Some(40)),
            ("token", 300, "total", Some(1_040)),
        ],
        "replaced, not added; the token's total spend counts every period"
    );

    h.client
        .delete_budget(bearer(delete("agent", &agent.to_string()), &admin))
        .await
        .unwrap();
    let again = h
        .client
        .delete_budget(bearer(delete("agent", &agent.to_string()), &admin))
        .await
        .unwrap_err();
    assert_eq!(again.code(), Code::NotFound);
    assert_eq!(list(&mut h, &admin).await.len(), 2);

    let sets = events(&mut h, &admin, "budget.set").await;
    assert_eq!(sets.len(), 4, "{sets:?}");
    assert_eq!(sets[0].target_id.as_deref(), Some(token.as_str()));
    let deleted = events(&mut h, &admin, "budget.delete").await;
    assert_eq!(deleted.len(), 1, "{deleted:?}");
    assert_eq!(deleted[0].target_id, Some(agent.to_string()));
}

#[tokio::test]
async fn another_orgs_agent_or_token_is_permission_denied_and_recorded() {
    let mut h = start().await;
    let other = seed_org(&h.config, None).await;
    let admin = h.seed.admin_token.clone();
    let their_agent = agent_id(&other, "active").to_string();
    let their_token = create_token(
        &mut h.client,
        &other.admin_token,
        create_request(other.org_id, 1),
    )
    .await
    .unwrap()
    .token_id;
    for (scope, target) in [
        ("agent", their_agent.as_str()),
        ("token", their_token.as_str()),
        ("agent", &Uuid::new_v4().to_string()),
    ] {
        let refused = h
            .client
            .set_budget(bearer(set(scope, target, 1, "day"), &admin))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::PermissionDenied, "{scope} {target}");
    }
    assert!(list(&mut h, &admin).await.is_empty());
    assert!(list(&mut h, &other.admin_token).await.is_empty());
    let denied = events(&mut h, &admin, "budget.set").await;
    assert_eq!(denied.len(), 3);
    assert!(denied.iter().all(|e| e.outcome == "denied"), "{denied:?}");
}

#[tokio::test]
async fn budgets_need_budget_manage_and_well_formed_requests() {
    let mut h = start().await;
    let admin = h.seed.admin_token.clone();
    let without =
        Permissions::from_bits(Permissions::ALL_KNOWN.bits() & !Permissions::BUDGET_MANAGE.bits());
    let narrow = create_token(
        &mut h.client,
        &admin,
        create_request(h.seed.org_id, without.bits()),
    )
    .await
    .unwrap()
    .token;
    let refused = h
        .client
        .set_budget(bearer(set("org", "", 1, "day"), &narrow))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied);
    assert!(refused.message().contains("BUDGET_MANAGE"), "{refused:?}");
    let refused = h
        .client
        .list_budgets(bearer(v1::ListBudgetsRequest {}, &narrow))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied);

    let agent = agent_id(&h.seed, "active").to_string();
    for bad in [
        set("team", "", 1, "day"),
        set("org", &agent, 1, "day"),
        set("agent", "", 1, "day"),
        set("agent", "not-a-uuid", 1, "day"),
        set("agent", &agent, -1, "day"),
        set("agent", &agent, 1, "year"),
    ] {
        let refused = h
            .client
            .set_budget(bearer(bad.clone(), &admin))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{bad:?}");
    }
}

/// The budgets ValidateToken answers for `request`.
async fn validated_budgets(
    client: &mut Client,
    request: v1::ValidateTokenRequest,
) -> Vec<v1::Budget> {
    client
        .validate_token(request)
        .await
        .unwrap()
        .into_inner()
        .budgets
}

#[tokio::test]
async fn validate_token_answers_the_calls_budgets_and_get_budget_spend_their_spend() {
    let mut h = start().await;
    let admin = h.seed.admin_token.clone();
    let agent = agent_id(&h.seed, "active");
    let other_agent = agent_id(&h.seed, "paused");
    let created = create_token(&mut h.client, &admin, create_request(h.seed.org_id, 1))
        .await
        .unwrap();
    let token_id: Uuid = created.token_id.parse().unwrap();
    let validate = |agent: Option<Uuid>| v1::ValidateTokenRequest {
        access_token: created.token.clone(),
        agent_id: agent.map(|a| a.to_string()),
    };
    // An org without budgets: the statement skips the budget read, and answers none.
    let budgets = validated_budgets(&mut h.client, validate(Some(agent))).await;
    assert!(budgets.is_empty(), "{budgets:?}");
    for request in [
        set("org", "", 5_000_000, "total"),
        set("agent", &agent.to_string(), 1_000, "day"),
        set("agent", &other_agent.to_string(), 7, "day"),
        set("token", &created.token_id, 300, "total"),
    ] {
        h.client.set_budget(bearer(request, &admin)).await.unwrap();
    }
    let scopes = |budgets: &[v1::Budget]| {
        let mut scopes: Vec<(String, i64)> = budgets
            .iter()
            .map(|b| (b.scope.clone(), b.limit_usd_micros))
            .collect();
        scopes.sort();
        scopes
    };
    // Acting as the active agent: the org's, that agent's and the token's, never another
    // agent's, and no spend (ValidateToken reads no ledger).
    let budgets = validated_budgets(&mut h.client, validate(Some(agent))).await;
    assert_eq!(
        scopes(&budgets),
        [
            ("agent".to_owned(), 1_000),
            ("org".to_owned(), 5_000_000),
            ("token".to_owned(), 300)
        ]
    );
    assert!(budgets.iter().all(|b| b.spent_usd_micros.is_none()));
    // Without an agent, a token bound to none draws on the org's and its own.
    let budgets = validated_budgets(&mut h.client, validate(None)).await;
    assert_eq!(
        scopes(&budgets),
        [("org".to_owned(), 5_000_000), ("token".to_owned(), 300)]
    );

    spend(&h, Some(agent), token_id, 120, 0).await;
    spend(&h, Some(agent), token_id, 1_000, 2).await;
    let spent = h
        .client
        .get_budget_spend(validate(Some(agent)))
        .await
        .unwrap()
        .into_inner()
        .budgets;
    let mut spent: Vec<(String, Option<i64>)> = spent
        .into_iter()
        .map(|b| (b.scope, b.spent_usd_micros))
        .collect();
    spent.sort();
    assert_eq!(
        spent,
        [
            ("agent".to_owned(), Some(120)),
            ("org".to_owned(), Some(1_120)),
            ("token".to_owned(), Some(1_120))
        ],
        "a day's spend is today's; a total counts the older call too"
    );
    // The token is the credential: a wrong one learns nothing.
    let refused = h
        .client
        .get_budget_spend(v1::ValidateTokenRequest {
            access_token: "svc_pat_not_a_token".into(),
            agent_id: None,
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated);
}
