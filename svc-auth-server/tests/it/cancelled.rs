//! Argon2 work survives cancellation: when the caller's deadline drops a ValidateToken call
//! mid-hash, the run goes on, its verdict is recorded, and the next call finds it.

use std::time::Duration;

use crate::common::*;
use svc_auth_server::pat::Pat;
use svc_auth_server::verify::Argon2Params;
use svc_proto::v1;
use svc_testkit::eventually;
use tonic::{Code, Request};

/// A hash far slower than the deadline below, so the deadline always falls mid-hash.
const SLOW: Argon2Params = Argon2Params {
    memory_kib: 65_536,
    iterations: 6,
    parallelism: 1,
};
/// The gateway's ValidateToken deadline.
const DEADLINE: Duration = Duration::from_millis(50);
const WITHIN: Duration = Duration::from_secs(20);

async fn slow_server() -> (Harness, String) {
    let mut h = start_with(|config| config.argon2 = SLOW).await;
    let token = fresh_token(&mut h).await;
    (h, token)
}

/// ValidateToken with the gateway's short deadline, until one is cut short after its hash
/// began (a loaded machine may cut one short before: then nothing ran and it is tried again).
async fn cut_short_mid_hash(h: &Harness, token: &str) {
    let before = h.server.argon2_runs();
    for _ in 0..5 {
        let mut request = Request::new(v1::ValidateTokenRequest {
            access_token: token.to_owned(),
            agent_id: None,
        });
        request.set_timeout(DEADLINE);
        let status = h
            .client
            .clone()
            .validate_token(request)
            .await
            .expect_err("the hash outlasts the deadline");
        assert!(
            matches!(status.code(), Code::DeadlineExceeded | Code::Cancelled),
            "{status:?}"
        );
        let started = eventually(Duration::from_millis(500), || async {
            h.server.argon2_runs() > before
        })
        .await;
        if started {
            return;
        }
    }
    panic!("no call reached the hash before its deadline");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_success_cut_short_by_the_deadline_is_still_remembered() {
    let (mut h, token) = slow_server().await;
    let before = h.server.argon2_runs();
    cut_short_mid_hash(&h, &token).await;

    // The next call, without a deadline, joins the run under way or finds its verdict: it
    // never starts a second one.
    let valid = tokio::time::timeout(WITHIN, validate(&mut h.client, &token))
        .await
        .expect("validated in time")
        .expect("the token is valid");
    assert_eq!(
        valid.token_id,
        Pat::parse(&token).unwrap().token_id().to_string()
    );
    assert_eq!(h.server.argon2_runs() - before, 1, "Argon2 runs");

    // And the call after is warm: no hashing at all, well within the deadline.
    let mut request = Request::new(v1::ValidateTokenRequest {
        access_token: token.clone(),
        agent_id: None,
    });
    request.set_timeout(Duration::from_secs(2));
    h.client.validate_token(request).await.unwrap();
    assert_eq!(h.server.argon2_runs() - before, 1, "the warm path hashed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_secret_cut_short_by_the_deadline_is_still_counted() {
    let (mut h, token) = slow_server().await;
    let wrong = Pat::generate(Pat::parse(&token).unwrap().token_id()).expose();
    let before = h.server.argon2_runs();
    cut_short_mid_hash(&h, &wrong).await;

    // The verdict lands in memory although nobody waited for it: the same wrong secret is
    // then refused without another run.
    let remembered = eventually(WITHIN, || {
        let (mut client, wrong) = (h.client.clone(), wrong.clone());
        async move {
            matches!(validate(&mut client, &wrong).await,
                Err(status) if status.code() == Code::Unauthenticated)
        }
    })
    .await;
    assert!(remembered, "the wrong secret was never refused");
    assert_eq!(h.server.argon2_runs() - before, 1, "Argon2 runs");
    assert_unauthenticated(&mut h.client, &wrong).await;
    assert_eq!(h.server.argon2_runs() - before, 1, "Argon2 runs");
}
