//! The store contract, on any backend: claims, compare-and-set commits and releases.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use uuid::Uuid;

use crate::idempotency::{Claim, ClaimToken, Fingerprint, IdempotencyStore, StoredResponse};

super::on_every_backend!(
    claim_then_commit_then_replay,
    commit_with_a_stale_token_is_refused,
    release_with_another_token_is_ignored,
    released_key_can_be_claimed_again,
);

const PENDING: Duration = Duration::from_secs(30);
const TTL: Duration = Duration::from_secs(60);

fn fingerprint(n: u8) -> Fingerprint {
    Fingerprint::from_bytes([n; 32])
}

fn stored(body: &'static str) -> StoredResponse {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    StoredResponse {
        status: StatusCode::OK,
        headers,
        body: Bytes::from_static(body.as_bytes()),
    }
}

async fn claimed<S: IdempotencyStore>(store: &S, org: Uuid, key: &str, n: u8) -> ClaimToken {
    match store.claim(org, key, fingerprint(n), PENDING).await {
        Ok(Claim::Claimed(token)) => token,
        other => panic!("expected a claim, got {other:?}"),
    }
}

async fn claim_then_commit_then_replay<S: IdempotencyStore>(store: S) {
    let org = Uuid::new_v4();
    let token = claimed(&store, org, "k", 1).await;
    assert_eq!(token.fingerprint(), fingerprint(1));
    let pending = store
        .claim(org, "k", fingerprint(1), PENDING)
        .await
        .unwrap();
    assert_eq!(pending, Claim::InProgress);
    let mismatch = store
        .claim(org, "k", fingerprint(2), PENDING)
        .await
        .unwrap();
    assert_eq!(mismatch, Claim::Mismatch);
    assert!(
        store
            .commit(org, "k", &token, stored("{}"), TTL)
            .await
            .unwrap()
    );
    let replay = store
        .claim(org, "k", fingerprint(1), PENDING)
        .await
        .unwrap();
    assert_eq!(replay, Claim::Committed(stored("{}")));
    let mismatch = store
        .claim(org, "k", fingerprint(2), PENDING)
        .await
        .unwrap();
    assert_eq!(mismatch, Claim::Mismatch);
    // A committed record is not a claim: it can be neither committed over nor released.
    assert!(
        !store
            .commit(org, "k", &token, stored("[]"), TTL)
            .await
            .unwrap()
    );
    assert!(!store.release(org, "k", &token).await.unwrap());
    let other_org = store
        .claim(Uuid::new_v4(), "k", fingerprint(2), PENDING)
        .await
        .unwrap();
    assert!(matches!(other_org, Claim::Claimed(_)));
}

async fn commit_with_a_stale_token_is_refused<S: IdempotencyStore>(store: S) {
    let org = Uuid::new_v4();
    let stale = claimed(&store, org, "k", 1).await;
    assert!(store.release(org, "k", &stale).await.unwrap());
    let current = claimed(&store, org, "k", 1).await;
    assert!(
        !store
            .commit(org, "k", &stale, stored("stale"), TTL)
            .await
            .unwrap()
    );
    assert!(
        store
            .commit(org, "k", &current, stored("current"), TTL)
            .await
            .unwrap()
    );
    let replay = store
        .claim(org, "k", fingerprint(1), PENDING)
        .await
        .unwrap();
    assert_eq!(replay, Claim::Committed(stored("current")));
}

async fn release_with_another_token_is_ignored<S: IdempotencyStore>(store: S) {
    let org = Uuid::new_v4();
    let _held = claimed(&store, org, "k", 1).await;
    let stranger = ClaimToken::new(fingerprint(1));
    assert!(!store.release(org, "k", &stranger).await.unwrap());
    let still = store
        .claim(org, "k", fingerprint(1), PENDING)
        .await
        .unwrap();
    assert_eq!(still, Claim::InProgress);
}

async fn released_key_can_be_claimed_again<S: IdempotencyStore>(store: S) {
    let org = Uuid::new_v4();
    let first = claimed(&store, org, "k", 1).await;
    assert!(store.release(org, "k", &first).await.unwrap());
    // After a release any request may take the key, even a different one.
    let second = claimed(&store, org, "k", 2).await;
    assert_ne!(first, second);
}
