//! Argon2id runs once per (token, secret) per process even when the first checks of a token
//! arrive together: concurrent callers share one run, and a wrong secret never shares the run
//! of a right one.

use crate::common::*;
use futures_util::future::join_all;
use svc_auth_server::pat::Pat;
use tonic::Code;

const CALLS: usize = 32;

/// Validates every token in `tokens` at once, over one HTTP/2 connection.
async fn validate_all(
    client: &Client,
    tokens: &[String],
) -> Vec<Result<svc_proto::v1::ValidateTokenResponse, tonic::Status>> {
    join_all(tokens.iter().map(|token| {
        let mut client = client.clone();
        async move { validate(&mut client, token).await }
    }))
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_checks_of_one_token_run_argon2_once() {
    let mut h = start().await;
    let token = fresh_token(&mut h).await;
    let token_id = Pat::parse(&token).unwrap().token_id().to_string();
    let before = h.server.argon2_runs();

    let results = validate_all(&h.client, &vec![token.clone(); CALLS]).await;

    for result in &results {
        let valid = result.as_ref().expect("every concurrent check succeeds");
        assert_eq!(valid.token_id, token_id);
        assert_eq!(valid.org_id, h.seed.org_id.to_string());
    }
    assert_eq!(h.server.argon2_runs() - before, 1, "Argon2 runs");

    // And the warm path still never hashes.
    validate(&mut h.client, &token).await.unwrap();
    assert_eq!(h.server.argon2_runs() - before, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_secret_never_rides_on_the_right_secrets_run() {
    let mut h = start().await;
    let right = fresh_token(&mut h).await;
    let wrong = Pat::generate(Pat::parse(&right).unwrap().token_id()).expose();
    let before = h.server.argon2_runs();

    // Interleaved, so each kind arrives while the other's run is under way.
    let tokens: Vec<String> = (0..CALLS)
        .map(|i| if i % 2 == 0 { &right } else { &wrong }.clone())
        .collect();
    let results = validate_all(&h.client, &tokens).await;

    for (token, result) in tokens.iter().zip(&results) {
        if *token == right {
            assert!(result.is_ok(), "the right secret was refused: {result:?}");
        } else {
            let status = result.as_ref().expect_err("a wrong secret was accepted");
            assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
        }
    }
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), CALLS / 2);
    // One run per distinct secret.
    assert_eq!(h.server.argon2_runs() - before, 2, "Argon2 runs");

    // The wrong secret's failure was remembered; the right one's success too.
    assert_unauthenticated(&mut h.client, &wrong).await;
    validate(&mut h.client, &right).await.unwrap();
    assert_eq!(h.server.argon2_runs() - before, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_checks_of_different_tokens_do_not_share() {
    let mut h = start().await;
    let first = fresh_token(&mut h).await;
    let second = fresh_token(&mut h).await;
    let before = h.server.argon2_runs();

    let tokens: Vec<String> = (0..CALLS)
        .map(|i| if i % 2 == 0 { &first } else { &second }.clone())
        .collect();
    let results = validate_all(&h.client, &tokens).await;

    for (token, result) in tokens.iter().zip(&results) {
        let valid = result.as_ref().expect("every concurrent check succeeds");
        let id = Pat::parse(token).unwrap().token_id().to_string();
        assert_eq!(valid.token_id, id, "a caller got another token's identity");
    }
    assert_eq!(h.server.argon2_runs() - before, 2, "Argon2 runs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_different_wrong_secrets_is_bounded_by_the_hashing_budget() {
    let mut h = start_with(|config| config.failure_limits.max_pending = 8).await;
    let right = fresh_token(&mut h).await;
    let token_id = Pat::parse(&right).unwrap().token_id();
    let before = h.server.argon2_runs();

    // A leaked token id with 40 guessed secrets, all sent at once: one id may hold only half
    // of the pending verifications, and the rest are refused as busy (retryable), never as
    // valid.
    let guesses: Vec<String> = (0..40).map(|_| Pat::generate(token_id).expose()).collect();
    let results = validate_all(&h.client, &guesses).await;

    let mut busy = 0;
    for result in &results {
        let status = result.as_ref().expect_err("a guessed secret was accepted");
        match status.code() {
            Code::Unauthenticated => {}
            Code::Unavailable => busy += 1,
            _ => panic!("{status:?}"),
        }
    }
    let runs = h.server.argon2_runs() - before;
    assert!(busy > 0, "no guess was refused as busy");
    assert_eq!(runs, 40 - busy, "every guess not refused was hashed once");
    // Another token's first use still finds room.
    let other = fresh_token(&mut h).await;
    validate(&mut h.client, &other).await.unwrap();
}
