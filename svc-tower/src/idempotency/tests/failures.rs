//! Misbehaving stores and bodies: the layer fails open, or answers the right rejection.

use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use tower::{Layer, ServiceExt};
use uuid::Uuid;

use super::{BODY, Provider, chat, org, send};
use crate::error::{ApiError, ErrorCode};
use crate::idempotency::{
    Claim, ClaimToken, Fingerprint, IdempotencyLayer, IdempotencyStore, MemoryIdempotencyStore,
    StoredResponse,
};
use crate::metrics::{ProxyMetrics, StoreFailureLabels};
use crate::store::{StoreError, StoreFuture};

/// A store whose every operation fails, or never answers.
#[derive(Debug, Clone, Copy)]
enum Broken {
    Failing,
    Hanging,
}

impl Broken {
    fn answer<T: Send + 'static>(self) -> StoreFuture<T> {
        match self {
            Broken::Failing => Box::pin(std::future::ready(Err(StoreError::new("down")))),
            Broken::Hanging => Box::pin(std::future::pending()),
        }
    }
}

impl IdempotencyStore for Broken {
    fn claim(&self, _: Uuid, _: &str, _: Fingerprint, _: Duration) -> StoreFuture<Claim> {
        self.answer()
    }
    fn commit(
        &self,
        _: Uuid,
        _: &str,
        _: &ClaimToken,
        _: StoredResponse,
        _: Duration,
    ) -> StoreFuture<bool> {
        self.answer()
    }
    fn release(&self, _: Uuid, _: &str, _: &ClaimToken) -> StoreFuture<bool> {
        self.answer()
    }
}

pub(super) fn failures(metrics: &ProxyMetrics, kind: &'static str) -> u64 {
    metrics
        .store_failures_total
        .get_or_create(&StoreFailureLabels {
            store: "idempotency",
            kind,
        })
        .get()
}

#[tokio::test]
async fn a_failing_store_fails_open_and_is_counted() {
    let metrics = ProxyMetrics::new();
    let provider = Provider::new();
    let stack = provider.stack(IdempotencyLayer::new(Broken::Failing).metrics(metrics.clone()));
    let org = org();
    for _ in 0..2 {
        let answer = send(&stack, chat(Some(&org), Some("k"), BODY)).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert!(!answer.replayed());
    }
    assert_eq!(provider.calls(), 2);
    assert_eq!(failures(&metrics, "error"), 2);
}

#[tokio::test(start_paused = true)]
async fn a_slow_store_fails_open_after_the_timeout() {
    let metrics = ProxyMetrics::new();
    let provider = Provider::new();
    let stack = provider.stack(
        IdempotencyLayer::new(Broken::Hanging)
            .timeout(Duration::from_millis(50))
            .metrics(metrics.clone()),
    );
    let started = tokio::time::Instant::now();
    let answer = send(&stack, chat(Some(&org()), Some("k"), BODY)).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(started.elapsed(), Duration::from_millis(50));
    assert_eq!(provider.calls(), 1);
    assert_eq!(failures(&metrics, "timeout"), 1);
}

#[tokio::test(start_paused = true)]
async fn committed_records_last_24_hours_by_default() {
    let provider = Provider::new();
    let stack = provider.stack(IdempotencyLayer::new(MemoryIdempotencyStore::new()));
    let org = org();
    send(&stack, chat(Some(&org), Some("k"), BODY)).await;
    tokio::time::advance(Duration::from_secs(24 * 60 * 60 - 1)).await;
    assert!(
        send(&stack, chat(Some(&org), Some("k"), BODY))
            .await
            .replayed()
    );
    tokio::time::advance(Duration::from_secs(1)).await;
    let after = send(&stack, chat(Some(&org), Some("k"), BODY)).await;
    assert!(!after.replayed());
    assert_eq!(provider.calls(), 2);
}

#[tokio::test]
async fn an_oversized_body_is_413_and_claims_nothing() {
    let provider = Provider::new();
    let store = MemoryIdempotencyStore::new();
    let service = IdempotencyLayer::new(store.clone()).layer(provider.service());
    let org = org();
    let request = chat(Some(&org), Some("k"), BODY).map(|body| Limited::new(body, 8));
    let response = service.clone().oneshot(request).await.unwrap();
    let error = response.extensions().get::<ApiError>().unwrap();
    assert_eq!(error.code(), &ErrorCode::PayloadTooLarge);
    assert_eq!(provider.calls(), 0);
    assert_eq!(store.len(), 0);
}

#[tokio::test]
async fn an_invalid_key_is_a_validation_error() {
    let provider = Provider::new();
    let stack = provider.stack(IdempotencyLayer::new(MemoryIdempotencyStore::new()));
    let mut request: Request<Full<Bytes>> = chat(Some(&org()), None, BODY);
    request.headers_mut().insert(
        "idempotency-key",
        http::HeaderValue::from_bytes(b"caf\xe9").unwrap(),
    );
    let answer = send(&stack, request).await;
    assert_eq!(answer.code(), Some("VALIDATION_ERROR"));
    let field = &answer.error.as_ref().unwrap().field_errors()[0];
    assert_eq!(
        (field.field.as_str(), field.code.as_str()),
        ("Idempotency-Key", "INVALID_FORMAT")
    );
    let empty = send(&stack, chat(Some(&org()), Some(""), BODY)).await;
    assert_eq!(empty.code(), Some("VALIDATION_ERROR"));
    assert_eq!(provider.calls(), 0);
}

#[tokio::test]
async fn a_body_that_breaks_off_is_not_stored() {
    let provider = Provider::responding(std::sync::Arc::new(|n| Ok(super::completion(n))));
    let store = MemoryIdempotencyStore::new();
    // The inner body errors mid-stream.
    let inner = tower::service_fn(|_req: Request<Full<Bytes>>| async {
        let body = Full::new(Bytes::from_static(b"partial"))
            .map_err(|never| match never {})
            .with_trailers(async {
                Some(Err::<http::HeaderMap, _>(std::io::Error::other("reset")))
            });
        Ok::<_, std::io::Error>(http::Response::new(body))
    });
    let service = IdempotencyLayer::new(store.clone())
        .broken_body_error(ErrorCode::ProviderUnavailable)
        .layer(inner);
    let org = org();
    let response = service
        .clone()
        .oneshot(chat(Some(&org), Some("k"), BODY))
        .await
        .unwrap();
    let error = response.extensions().get::<ApiError>().unwrap();
    assert_eq!(error.code(), &ErrorCode::ProviderUnavailable);
    // The claim is freed: the same key runs again.
    let again = provider.stack(IdempotencyLayer::new(store));
    assert!(
        super::eventually(|| async {
            send(&again, chat(Some(&org), Some("k"), BODY)).await.status == StatusCode::OK
        })
        .await
    );
}
