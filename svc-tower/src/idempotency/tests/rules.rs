//! The request rules around the state table (routes, orgs, key and body checks, failures of
//! the inner service), on any backend.

use std::sync::Arc;

use http::StatusCode;

use super::{BODY, Provider, chat, chat_at, completion, eventually, org, send};
use crate::error::{ApiError, ErrorCode, FieldError, FieldErrorCode};
use crate::idempotency::IdempotencyStore;
use crate::idempotency::{Fingerprint, IdempotencyOutcome};

super::on_every_backend!(
    different_route_is_key_reuse,
    route_fn_maps_an_alias_onto_one_route,
    unrendered_rejections_release_the_claim,
    rendered_rejections_are_committed_and_replayed,
    rendered_transient_rejections_release_the_claim,
    inner_errors_release_the_claim,
    refuse_fn_answers_before_any_claim,
    release_fn_says_what_frees_the_key,
    a_parsed_fingerprint_stands_for_the_body,
    keys_are_scoped_by_org,
    key_over_256_chars_is_rejected,
    abandoned_request_releases_the_claim,
    key_header_is_not_forwarded,
    requests_without_org_pass_through,
);

use super::cases::layer;

async fn different_route_is_key_reuse<S: IdempotencyStore + Clone>(store: S) {
    let provider = Provider::new();
    let stack = provider.stack(layer(store));
    let org = org();
    send(&stack, chat(Some(&org), Some("k"), BODY)).await;
    let elsewhere = send(&stack, chat_at("/v1/other", Some(&org), Some("k"), BODY)).await;
    assert_eq!(elsewhere.code(), Some("IDEMPOTENCY_KEY_REUSE"));
    assert_eq!(provider.calls(), 1);
}

async fn route_fn_maps_an_alias_onto_one_route<S: IdempotencyStore + Clone>(store: S) {
    let provider = Provider::new();
    let stack = provider.stack(layer(store).route_fn(|parts| {
        let path = parts.uri.path();
        path.strip_prefix("/proxy").unwrap_or(path).to_owned()
    }));
    let org = org();
    let first = send(&stack, chat(Some(&org), Some("k"), BODY)).await;
    let alias = send(
        &stack,
        chat_at("/proxy/v1/chat/completions", Some(&org), Some("k"), BODY),
    )
    .await;
    assert!(alias.replayed());
    assert_eq!(alias.body, first.body);
    assert_eq!(provider.calls(), 1);
}

/// Without ErrorEnvelope in front nothing can render the placeholder body, so the key frees.
async fn unrendered_rejections_release_the_claim<S: IdempotencyStore + Clone>(store: S) {
    let provider = Provider::responding(Arc::new(|n| {
        if n == 0 {
            Ok(ApiError::new(ErrorCode::InvalidRequest).into_response())
        } else {
            Ok(completion(n))
        }
    }));
    let stack = provider.stack(layer(store));
    let org = org();
    let rejected = send(&stack, chat(Some(&org), Some("k"), BODY)).await;
    assert_eq!(rejected.code(), Some("INVALID_REQUEST"));
    let retried = send(&stack, chat(Some(&org), Some("k"), BODY)).await;
    assert_eq!(retried.status, StatusCode::OK);
    assert_eq!(provider.calls(), 2);
}

/// RequestId and ErrorEnvelope in front, as in the gateway: the stack answers `n`th-call
/// rejections from `respond` and returns (status, headers, body) of each answer.
async fn through_envelope<S: IdempotencyStore + Clone>(
    provider: &Provider,
    store: S,
    org: &crate::context::OrgContext,
) -> Vec<(StatusCode, http::HeaderMap, bytes::Bytes)> {
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    let stack = tower::ServiceBuilder::new()
        .layer(crate::request_id::RequestIdLayer::new())
        .layer(crate::envelope::ErrorEnvelopeLayer::new())
        .service(provider.stack(layer(store)));
    let mut answers = Vec::new();
    for _ in 0..2 {
        let response = stack
            .clone()
            .oneshot(chat(Some(org), Some("k"), BODY))
            .await
            .expect("the stack answers");
        let (parts, body) = response.into_parts();
        let body = body.collect().await.expect("a readable body").to_bytes();
        answers.push((parts.status, parts.headers, body));
    }
    answers
}

/// A provider's 400 is a final answer: stored, and replayed byte for byte.
async fn rendered_rejections_are_committed_and_replayed<S: IdempotencyStore + Clone>(store: S) {
    let provider = Provider::responding(Arc::new(|_| {
        Ok(ApiError::new(ErrorCode::InvalidRequest)
            .with_detail("unsupported parameter")
            .into_response())
    }));
    let answers = through_envelope(&provider, store, &org()).await;
    let (first, replay) = (&answers[0], &answers[1]);
    assert_eq!(first.0, StatusCode::BAD_REQUEST);
    let json: serde_json::Value = serde_json::from_slice(&first.2).expect("an envelope");
    assert_eq!(json["error"]["code"], "INVALID_REQUEST");
    assert_eq!(
        json["error"]["request_id"],
        first.1["x-request-id"].to_str().unwrap()
    );
    assert_eq!(replay.0, StatusCode::BAD_REQUEST);
    assert_eq!(replay.1["idempotent-replayed"], "true");
    assert_eq!(replay.2, first.2, "the replay is byte-identical");
    assert_eq!(provider.calls(), 1);
}

/// A provider's 503 behind the envelope is still transient: the key frees for a retry.
async fn rendered_transient_rejections_release_the_claim<S: IdempotencyStore + Clone>(store: S) {
    let provider = Provider::responding(Arc::new(|_| {
        Ok(ApiError::new(ErrorCode::ProviderUnavailable).into_response())
    }));
    let answers = through_envelope(&provider, store, &org()).await;
    for (status, headers, body) in &answers {
        assert_eq!(*status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(!headers.contains_key("idempotent-replayed"));
        let json: serde_json::Value = serde_json::from_slice(body).expect("an envelope");
        assert_eq!(json["error"]["code"], "PROVIDER_UNAVAILABLE");
    }
    assert_eq!(provider.calls(), 2);
}

async fn inner_errors_release_the_claim<S: IdempotencyStore + Clone>(store: S) {
    let provider = Provider::responding(Arc::new(|n| {
        if n == 0 {
            Err("connection reset".into())
        } else {
            Ok(completion(n))
        }
    }));
    let stack = provider.stack(layer(store));
    let org = org();
    let failed = tower::ServiceExt::oneshot(stack.clone(), chat(Some(&org), Some("k"), BODY)).await;
    assert!(failed.is_err());
    // The release runs in the background once the failed call's future is gone.
    assert!(
        eventually(|| async {
            send(&stack, chat(Some(&org), Some("k"), BODY)).await.status == StatusCode::OK
        })
        .await
    );
    assert_eq!(provider.calls(), 2);
}

/// A body the caller cannot replay (here, as a gateway would say, a stream) is refused before
/// anything is claimed; without a key the rule does not run.
async fn refuse_fn_answers_before_any_claim<S: IdempotencyStore + Clone>(store: S) {
    let provider = Provider::new();
    let stack = provider.stack(layer(store).refuse_fn(|_parts, body| {
        let json: serde_json::Value = serde_json::from_slice(body).ok()?;
        (json.get("stream") == Some(&true.into())).then(|| {
            ApiError::new(ErrorCode::ValidationError).with_field_error(FieldError::new(
                "stream",
                FieldErrorCode::InvalidEnum,
                "stream must be false or absent when Idempotency-Key is present.",
            ))
        })
    }));
    let org = org();
    let streaming = BODY.replace("{\"model\"", "{\"stream\":true,\"model\"");
    let rejected = send(&stack, chat(Some(&org), Some("k"), &streaming)).await;
    assert_eq!(rejected.status, StatusCode::BAD_REQUEST);
    assert_eq!(rejected.code(), Some("VALIDATION_ERROR"));
    assert_eq!(rejected.outcome, Some(IdempotencyOutcome::Refused));
    let field = &rejected.error.as_ref().expect("an ApiError").field_errors()[0];
    assert_eq!(field.field, "stream");
    assert_eq!(provider.calls(), 0);
    let passed = send(&stack, chat(Some(&org), None, &streaming)).await;
    assert_eq!(passed.status, StatusCode::OK);
    assert_eq!(passed.outcome, Some(IdempotencyOutcome::Called));
    // The key was never claimed: a body the rule accepts uses it.
    let ok = send(&stack, chat(Some(&org), Some("k"), BODY)).await;
    assert_eq!(ok.status, StatusCode::OK);
    let replay = send(&stack, chat(Some(&org), Some("k"), BODY)).await;
    assert_eq!(replay.outcome, Some(IdempotencyOutcome::Replayed));
    assert_eq!(provider.calls(), 2);
}

/// A caller that counts 503 as final stores it; the default frees the key.
async fn release_fn_says_what_frees_the_key<S: IdempotencyStore + Clone>(store: S) {
    let unavailable = || {
        Provider::responding(Arc::new(|_| {
            let mut response =
                http::Response::new(http_body_util::Full::new(bytes::Bytes::from_static(b"{}")));
            *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            Ok(response)
        }))
    };
    let org = org();
    let provider = unavailable();
    let stack = provider
        .stack(layer(store.clone()).release_fn(|status| status == StatusCode::TOO_MANY_REQUESTS));
    send(&stack, chat(Some(&org), Some("final-503"), BODY)).await;
    let again = send(&stack, chat(Some(&org), Some("final-503"), BODY)).await;
    assert!(again.replayed(), "a 503 counted as final is replayed");
    assert_eq!(provider.calls(), 1);
    let provider = unavailable();
    let stack = provider.stack(layer(store));
    send(&stack, chat(Some(&org), Some("transient-503"), BODY)).await;
    let again = send(&stack, chat(Some(&org), Some("transient-503"), BODY)).await;
    assert!(!again.replayed());
    assert_eq!(provider.calls(), 2);
}

/// The layer fingerprints what the caller parsed, not the bytes: the same fingerprint over
/// other bytes replays, a different one is key reuse.
async fn a_parsed_fingerprint_stands_for_the_body<S: IdempotencyStore + Clone>(store: S) {
    let provider = Provider::new();
    let stack = provider.stack(layer(store));
    let org = org();
    let with = |fingerprint: Fingerprint, body: &str| {
        let mut request = chat(Some(&org), Some("parsed"), body);
        request.extensions_mut().insert(fingerprint);
        request
    };
    let one = Fingerprint::from_bytes([1; 32]);
    send(&stack, with(one, BODY)).await;
    let other_bytes = send(&stack, with(one, "{}")).await;
    assert!(other_bytes.replayed());
    let reuse = send(&stack, with(Fingerprint::from_bytes([2; 32]), BODY)).await;
    assert_eq!(reuse.code(), Some("IDEMPOTENCY_KEY_REUSE"));
    assert_eq!(provider.calls(), 1);
}

async fn keys_are_scoped_by_org<S: IdempotencyStore + Clone>(store: S) {
    let provider = Provider::new();
    let stack = provider.stack(layer(store));
    let (a, b) = (org(), org());
    let first_a = send(&stack, chat(Some(&a), Some("shared"), BODY)).await;
    let first_b = send(&stack, chat(Some(&b), Some("shared"), BODY)).await;
    assert!(!first_b.replayed());
    assert_ne!(first_a.body, first_b.body);
    assert_eq!(provider.calls(), 2);
    let replay_a = send(&stack, chat(Some(&a), Some("shared"), BODY)).await;
    let replay_b = send(&stack, chat(Some(&b), Some("shared"), BODY)).await;
    assert_eq!(replay_a.body, first_a.body);
    assert_eq!(replay_b.body, first_b.body);
    // A different body under the same key is only a reuse within the org that used it.
    let other = BODY.replace("hello", "other");
    let c = org();
    assert_eq!(
        send(&stack, chat(Some(&c), Some("shared"), &other))
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(provider.calls(), 3);
}

async fn key_over_256_chars_is_rejected<S: IdempotencyStore + Clone>(store: S) {
    let provider = Provider::new();
    let stack = provider.stack(layer(store));
    let org = org();
    let too_long = "k".repeat(257);
    let rejected = send(&stack, chat(Some(&org), Some(&too_long), BODY)).await;
    assert_eq!(rejected.status, StatusCode::BAD_REQUEST);
    assert_eq!(rejected.code(), Some("VALIDATION_ERROR"));
    let field = &rejected.error.as_ref().expect("an ApiError").field_errors()[0];
    assert_eq!(field.field, "Idempotency-Key");
    assert_eq!(field.code.as_str(), "TOO_LONG");
    assert_eq!(provider.calls(), 0);
    let longest = "k".repeat(256);
    assert_eq!(
        send(&stack, chat(Some(&org), Some(&longest), BODY))
            .await
            .status,
        StatusCode::OK
    );
    assert!(
        send(&stack, chat(Some(&org), Some(&longest), BODY))
            .await
            .replayed()
    );
}

async fn abandoned_request_releases_the_claim<S: IdempotencyStore + Clone>(store: S) {
    let provider = Provider::new().gated();
    let stack = provider.stack(layer(store));
    let org = org();
    let abandoned = tokio::spawn({
        let (stack, org) = (stack.clone(), org.clone());
        async move { send(&stack, chat(Some(&org), Some("k"), BODY)).await }
    });
    assert!(eventually(|| async { provider.calls() == 1 }).await);
    // The client goes away while the provider is still working.
    abandoned.abort();
    let _ = abandoned.await;
    provider.open(100);
    assert!(
        eventually(|| async {
            send(&stack, chat(Some(&org), Some("k"), BODY)).await.status == StatusCode::OK
        })
        .await
    );
    assert_eq!(provider.calls(), 2);
}

async fn key_header_is_not_forwarded<S: IdempotencyStore + Clone>(store: S) {
    let provider = Provider::new();
    let stack = provider.stack(layer(store));
    let org = org();
    send(&stack, chat(Some(&org), Some("k"), BODY)).await;
    send(&stack, chat(Some(&org), Some("other"), "not json")).await;
    assert_eq!(provider.calls(), 2);
    assert_eq!(
        provider.saw_key.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
}

async fn requests_without_org_pass_through<S: IdempotencyStore + Clone>(store: S) {
    let provider = Provider::new();
    let stack = provider.stack(layer(store));
    let first = send(&stack, chat(None, Some("k"), BODY)).await;
    let second = send(&stack, chat(None, Some("k"), BODY)).await;
    assert!(!first.replayed() && !second.replayed());
    assert_eq!(provider.calls(), 2);
}
