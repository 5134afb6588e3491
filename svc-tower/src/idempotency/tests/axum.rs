//! The layer on an axum route: the inner route takes axum's `Body`, so a `map_request`
//! adapter turns the buffered body back into one.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::Body;
use axum::routing::post;
use axum::{Extension, Router};
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use tower::{ServiceBuilder, ServiceExt};

use super::{BODY, org};
use crate::idempotency::{IdempotencyLayer, MemoryIdempotencyStore};

#[tokio::test]
async fn replays_through_an_axum_router() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let handler = move |body: String| {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        async move { format!("call {n} for {} bytes", body.len()) }
    };
    let app = Router::new()
        .route(
            "/v1/chat/completions",
            post(handler).route_layer(
                ServiceBuilder::new()
                    .layer(IdempotencyLayer::new(MemoryIdempotencyStore::new()))
                    .map_request(|request: Request<Full<Bytes>>| request.map(Body::new)),
            ),
        )
        .layer(Extension(org()));
    let request = || {
        Request::post("/v1/chat/completions")
            .header("content-type", "application/json")
            .header("idempotency-key", "axum-1")
            .body(Body::from(BODY))
            .unwrap()
    };
    let first = app.clone().oneshot(request()).await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let first = first.into_body().collect().await.unwrap().to_bytes();
    let replay = app.oneshot(request()).await.unwrap();
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let replay = replay.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(first, replay);
    assert_eq!(first, format!("call 0 for {} bytes", BODY.len()));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}
