//! The idempotency claim state table, as layer behaviour, on any backend.

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;

use super::{BODY, Provider, chat, completion, eventually, org, send};
use crate::idempotency::{IdempotencyLayer, IdempotencyStore};

super::on_every_backend!(
    no_key_calls_the_inner_service_every_time,
    replays_committed_response,
    replay_ignores_key_order_and_whitespace,
    different_body_is_key_reuse,
    in_flight_key_is_in_progress,
    in_flight_key_with_other_body_is_key_reuse,
    transient_responses_release_the_claim,
    committed_key_is_reusable_after_ttl,
    pending_claim_expires_after_pending_ttl,
    concurrent_requests_with_one_key_call_inner_once,
);

pub(super) fn layer<S: IdempotencyStore>(store: S) -> IdempotencyLayer<S> {
    // Loopback Redis on a busy test machine: a store op budget that never fails open by accident.
    IdempotencyLayer::new(store).timeout(Duration::from_secs(2))
}

async fn no_key_calls_the_inner_service_every_time<S: IdempotencyStore + Clone>(store: S) {
    let provider = Provider::new();
    let stack = provider.stack(layer(store));
    let org = org();
    let first = send(&stack, chat(Some(&org), None, BODY)).await;
    let second = send(&stack, chat(Some(&org), None, BODY)).await;
    assert_eq!(provider.calls(), 2);
    assert_ne!(first.body, second.body);
    assert!(!first.replayed() && !second.replayed());
    assert_eq!(second.header("x-provider-call"), Some("1"));
}

async fn replays_committed_response<S: IdempotencyStore + Clone>(store: S) {
    let provider = Provider::responding(Arc::new(|n| {
        let mut response = completion(n);
        *response.status_mut() = StatusCode::CREATED;
        Ok(response)
    }));
    let stack = provider.stack(layer(store));
    let org = org();
    let first = send(&stack, chat(Some(&org), Some("k-1"), BODY)).await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert!(!first.replayed());
    let replay = send(&stack, chat(Some(&org), Some("k-1"), BODY)).await;
    assert_eq!(provider.calls(), 1);
    assert!(replay.replayed());
    assert_eq!(replay.status, StatusCode::CREATED);
    assert_eq!(replay.body, first.body);
    assert_eq!(
        replay.header("content-type"),
        Some("application/json; charset=utf-8")
    );
    // Only the stored subset of headers is replayed.
    assert_eq!(first.header("x-provider-call"), Some("0"));
    assert_eq!(replay.header("x-provider-call"), None);
}

async fn replay_ignores_key_order_and_whitespace<S: IdempotencyStore + Clone>(store: S) {
    let provider = Provider::new();
    let stack = provider.stack(layer(store));
    let org = org();
    let first = send(&stack, chat(Some(&org), Some("k"), BODY)).await;
    let reordered = r#"{ "messages": [ { "content": "hello", "role": "user" } ],
        "model": "svc-mock-1" }"#;
    let replay = send(&stack, chat(Some(&org), Some("k"), reordered)).await;
    assert!(replay.replayed());
    assert_eq!(replay.body, first.body);
    assert_eq!(provider.calls(), 1);
}

async fn different_body_is_key_reuse<S: IdempotencyStore + Clone>(store: S) {
    let provider = Provider::new();
    let stack = provider.stack(layer(store));
    let org = org();
    send(&stack, chat(Some(&org), Some("k"), BODY)).await;
    let other = BODY.replace("hello", "goodbye");
    let reuse = send(&stack, chat(Some(&org), Some("k"), &other)).await;
    assert_eq!(reuse.status, StatusCode::CONFLICT);
    assert_eq!(reuse.code(), Some("IDEMPOTENCY_KEY_REUSE"));
    assert_eq!(reuse.header("x-should-retry"), Some("false"));
    assert_eq!(provider.calls(), 1);
    // The record is unchanged: the original request still replays.
    assert!(
        send(&stack, chat(Some(&org), Some("k"), BODY))
            .await
            .replayed()
    );
}

async fn in_flight_key_is_in_progress<S: IdempotencyStore + Clone>(store: S) {
    let provider = Provider::new().gated();
    let stack = provider.stack(layer(store));
    let org = org();
    let first = tokio::spawn({
        let (stack, org) = (stack.clone(), org.clone());
        async move { send(&stack, chat(Some(&org), Some("k"), BODY)).await }
    });
    assert!(eventually(|| async { provider.calls() == 1 }).await);
    let busy = send(&stack, chat(Some(&org), Some("k"), BODY)).await;
    assert_eq!(busy.status, StatusCode::CONFLICT);
    assert_eq!(busy.code(), Some("IDEMPOTENCY_IN_PROGRESS"));
    assert_eq!(busy.header("retry-after"), Some("1"));
    provider.open(1);
    let first = first.await.expect("the first request completes");
    assert_eq!(first.status, StatusCode::OK);
    let replay = send(&stack, chat(Some(&org), Some("k"), BODY)).await;
    assert!(replay.replayed());
    assert_eq!(replay.body, first.body);
    assert_eq!(provider.calls(), 1);
}

async fn in_flight_key_with_other_body_is_key_reuse<S: IdempotencyStore + Clone>(store: S) {
    let provider = Provider::new().gated();
    let stack = provider.stack(layer(store));
    let org = org();
    let first = tokio::spawn({
        let (stack, org) = (stack.clone(), org.clone());
        async move { send(&stack, chat(Some(&org), Some("k"), BODY)).await }
    });
    assert!(eventually(|| async { provider.calls() == 1 }).await);
    let other = BODY.replace("hello", "other");
    let reuse = send(&stack, chat(Some(&org), Some("k"), &other)).await;
    assert_eq!(reuse.code(), Some("IDEMPOTENCY_KEY_REUSE"));
    provider.open(1);
    assert_eq!(first.await.expect("completes").status, StatusCode::OK);
}

async fn transient_responses_release_the_claim<S: IdempotencyStore + Clone>(store: S) {
    for status in [
        StatusCode::TOO_MANY_REQUESTS,
        StatusCode::INTERNAL_SERVER_ERROR,
        StatusCode::BAD_GATEWAY,
        StatusCode::SERVICE_UNAVAILABLE,
    ] {
        // The first call fails transiently, later ones succeed.
        let provider = Provider::responding(Arc::new(move |n| {
            let mut response = completion(n);
            if n == 0 {
                *response.status_mut() = status;
            }
            Ok(response)
        }));
        let stack = provider.stack(layer(store.clone()));
        let org = org();
        let failed = send(&stack, chat(Some(&org), Some("k"), BODY)).await;
        assert_eq!(failed.status, status);
        assert!(!failed.replayed());
        let retried = send(&stack, chat(Some(&org), Some("k"), BODY)).await;
        assert_eq!(retried.status, StatusCode::OK, "after {status}");
        assert!(!retried.replayed());
        assert_eq!(provider.calls(), 2);
        assert!(
            send(&stack, chat(Some(&org), Some("k"), BODY))
                .await
                .replayed()
        );
    }
}

async fn committed_key_is_reusable_after_ttl<S: IdempotencyStore + Clone>(store: S) {
    let provider = Provider::new();
    let stack = provider.stack(layer(store).ttl(Duration::from_millis(300)));
    let org = org();
    send(&stack, chat(Some(&org), Some("k"), BODY)).await;
    let other = BODY.replace("hello", "other");
    assert_eq!(
        send(&stack, chat(Some(&org), Some("k"), &other))
            .await
            .code(),
        Some("IDEMPOTENCY_KEY_REUSE")
    );
    assert!(
        eventually(|| async {
            send(&stack, chat(Some(&org), Some("k"), &other))
                .await
                .status
                == StatusCode::OK
        })
        .await
    );
    assert_eq!(provider.calls(), 2);
}

async fn pending_claim_expires_after_pending_ttl<S: IdempotencyStore + Clone>(store: S) {
    // Replica one hangs mid-call (a crashed replica looks the same to the store).
    let stuck_provider = Provider::responding(Arc::new(|n| Ok(completion(n + 100)))).gated();
    let stuck_stack =
        stuck_provider.stack(layer(store.clone()).pending_ttl(Duration::from_millis(300)));
    let provider = Provider::new();
    let stack = provider.stack(layer(store));
    let org = org();
    let stuck = tokio::spawn({
        let org = org.clone();
        async move { send(&stuck_stack, chat(Some(&org), Some("k"), BODY)).await }
    });
    assert!(eventually(|| async { stuck_provider.calls() == 1 }).await);
    let retried = eventually(|| async {
        send(&stack, chat(Some(&org), Some("k"), BODY)).await.status == StatusCode::OK
    });
    assert!(retried.await);
    assert_eq!(provider.calls(), 1);
    // The stale claimant finishes late: it still answers, but cannot overwrite the record.
    stuck_provider.open(1);
    let late = stuck.await.expect("completes");
    assert_eq!(late.status, StatusCode::OK);
    assert!(String::from_utf8_lossy(&late.body).contains("hi 100"));
    let replay = send(&stack, chat(Some(&org), Some("k"), BODY)).await;
    assert!(replay.replayed());
    assert_eq!(
        replay.header("content-type"),
        Some("application/json; charset=utf-8")
    );
    assert!(String::from_utf8_lossy(&replay.body).contains("hi 0"));
    assert_eq!(provider.calls(), 1);
}

async fn concurrent_requests_with_one_key_call_inner_once<S: IdempotencyStore + Clone>(store: S) {
    let provider = Provider::new().gated();
    let stack = provider.stack(layer(store));
    let org = org();
    let mut requests = Vec::new();
    for _ in 0..50 {
        let (stack, org) = (stack.clone(), org.clone());
        requests.push(tokio::spawn(async move {
            send(&stack, chat(Some(&org), Some("race"), BODY)).await
        }));
    }
    // Let the claimant finish only once it is in the provider, so the race is real.
    assert!(eventually(|| async { provider.calls() >= 1 }).await);
    provider.open(1);
    let mut answers = Vec::new();
    for request in requests {
        answers.push(request.await.expect("every request completes"));
    }
    assert_eq!(provider.calls(), 1);
    let original: Vec<_> = answers
        .iter()
        .filter(|a| a.status == StatusCode::OK && !a.replayed())
        .collect();
    assert_eq!(original.len(), 1);
    for answer in &answers {
        let in_progress = answer.status == StatusCode::CONFLICT
            && answer.code() == Some("IDEMPOTENCY_IN_PROGRESS");
        let identical = answer.status == StatusCode::OK && answer.body == original[0].body;
        assert!(in_progress || identical, "unexpected answer {answer:?}");
    }
}
