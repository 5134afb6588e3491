use bytes::Bytes;
use http::{HeaderMap, StatusCode};

use super::*;

const PENDING: Duration = Duration::from_secs(30);
const TTL: Duration = Duration::from_secs(3600);

fn fingerprint() -> Fingerprint {
    Fingerprint::from_bytes([1; 32])
}

fn response(body_len: usize) -> StoredResponse {
    StoredResponse {
        status: StatusCode::OK,
        headers: HeaderMap::new(),
        body: Bytes::from(vec![b'x'; body_len]),
    }
}

async fn claim(store: &MemoryIdempotencyStore, org: Uuid, key: &str) -> Claim {
    store.claim(org, key, fingerprint(), PENDING).await.unwrap()
}

/// Claims `key` and commits a body of `body_len` bytes; whether the commit was stored.
async fn stored(store: &MemoryIdempotencyStore, org: Uuid, key: &str, body_len: usize) -> bool {
    let Claim::Claimed(token) = claim(store, org, key).await else {
        panic!("{key} was not free");
    };
    store
        .commit(org, key, &token, response(body_len), TTL)
        .await
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn expired_records_are_pruned() {
    let store = MemoryIdempotencyStore::new();
    let org = Uuid::new_v4();
    for i in 0..MIN_PRUNE_AT {
        let claim = store.claim(org, &i.to_string(), fingerprint(), Duration::from_secs(1));
        assert!(matches!(claim.await.unwrap(), Claim::Claimed(_)));
    }
    tokio::time::advance(Duration::from_secs(2)).await;
    store
        .claim(org, "last", fingerprint(), Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(store.len(), 1);
    assert_eq!(store.bytes(), key_bytes(&(org, "last".to_owned())));
}

#[tokio::test(start_paused = true)]
async fn the_entry_cap_evicts_the_oldest_claim() {
    let store = MemoryIdempotencyStore::new().max_entries(3);
    let org = Uuid::new_v4();
    for key in ["a", "b", "c"] {
        assert!(stored(&store, org, key, 10).await);
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    assert!(stored(&store, org, "d", 10).await);
    assert_eq!(store.len(), 3);
    // "a" was the oldest: it is free again; the others still replay.
    assert!(matches!(claim(&store, org, "a").await, Claim::Claimed(_)));
    assert_eq!(store.len(), 3, "claiming a evicted b");
    assert!(matches!(claim(&store, org, "c").await, Claim::Committed(_)));
    assert!(matches!(claim(&store, org, "d").await, Claim::Committed(_)));
    assert!(matches!(claim(&store, org, "b").await, Claim::Claimed(_)));
}

#[tokio::test(start_paused = true)]
async fn the_byte_cap_evicts_the_oldest_until_a_response_fits() {
    let org = Uuid::new_v4();
    let per_record = key_bytes(&(org, "k0".to_owned())) + 1000;
    let store = MemoryIdempotencyStore::new().max_bytes(per_record * 4);
    for i in 0..4 {
        assert!(stored(&store, org, &format!("k{i}"), 1000).await);
    }
    assert_eq!(store.bytes(), per_record * 4);
    // A response twice as large pushes out the two oldest.
    assert!(stored(&store, org, "k4", 2000).await);
    assert!(store.bytes() <= per_record * 4, "{}", store.bytes());
    assert!(matches!(claim(&store, org, "k0").await, Claim::Claimed(_)));
    for kept in ["k3", "k4"] {
        assert!(matches!(
            claim(&store, org, kept).await,
            Claim::Committed(_)
        ));
    }
}

#[tokio::test(start_paused = true)]
async fn a_response_larger_than_the_cap_is_not_stored_and_frees_its_key() {
    let store = MemoryIdempotencyStore::new().max_bytes(4096);
    let org = Uuid::new_v4();
    assert!(stored(&store, org, "small", 100).await);
    assert!(!stored(&store, org, "huge", 8192).await);
    assert!(matches!(
        claim(&store, org, "huge").await,
        Claim::Claimed(_)
    ));
    // What was stored before is still there.
    assert!(matches!(
        claim(&store, org, "small").await,
        Claim::Committed(_)
    ));
}

#[tokio::test(start_paused = true)]
async fn expiry_frees_bytes_and_ttls_still_hold_under_the_caps() {
    let store = MemoryIdempotencyStore::new().max_entries(2);
    let org = Uuid::new_v4();
    assert!(stored(&store, org, "a", 500).await);
    tokio::time::advance(TTL - Duration::from_secs(1)).await;
    assert!(matches!(claim(&store, org, "a").await, Claim::Committed(_)));
    tokio::time::advance(Duration::from_secs(1)).await;
    // Expired: the key is free, and its bytes are no longer counted.
    assert!(matches!(claim(&store, org, "a").await, Claim::Claimed(_)));
    assert_eq!(store.len(), 1);
    assert_eq!(store.bytes(), key_bytes(&(org, "a".to_owned())));
}

#[tokio::test(start_paused = true)]
async fn a_flood_of_keys_stays_within_both_caps() {
    let store = MemoryIdempotencyStore::new()
        .max_entries(100)
        .max_bytes(64 * 1024);
    let org = Uuid::new_v4();
    for i in 0..5_000 {
        stored(&store, org, &format!("key-{i}"), 700).await;
        assert!(store.len() <= 100);
        assert!(store.bytes() <= 64 * 1024);
    }
    // The newest answer is still replayed.
    assert!(matches!(
        claim(&store, org, "key-4999").await,
        Claim::Committed(_)
    ));
}

#[test]
fn defaults_are_bounded() {
    let store = MemoryIdempotencyStore::default();
    let state = store.inner.lock().unwrap();
    assert_eq!(state.max_entries, DEFAULT_MEMORY_MAX_ENTRIES);
    assert_eq!(state.max_bytes, DEFAULT_MEMORY_MAX_BYTES);
}
