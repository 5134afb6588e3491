//! A [`TokenValidator`] backed by a store of your own, here an in-process key table, handed to
//! `PatAuth` as a plain closure, with `RequirePermission` guarding one route of an axum app.
//!
//! Run: `cargo run -p svc-examples --example custom_validator` (see that file for requests to
//! try).
//!
//! Anything that can answer "which org and permissions does this token carry" fits: a config
//! file, an existing API-key table, another identity service. Two rules make it a good
//! validator: answer [`TokenError::Invalid`] only when the token is definitely not good (unknown,
//! revoked, expired), and any other error when the answer is unknown (your store is down), so
//! PatAuth fails closed with 503 `SERVICE_DEGRADED` instead of telling a client its good token
//! is bad.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, RwLock};

use axum::extract::Extension;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use svc_core::pat::PREFIX;
use svc_tower::auth::{PatAuthLayer, RequirePermissionLayer, TokenError, TokenValidator};
use svc_tower::context::{OrgContext, Permissions};
use svc_tower::envelope::ErrorEnvelopeLayer;
use svc_tower::request_id::RequestIdLayer;
use tokio::net::TcpListener;
use tower::ServiceBuilder;
use uuid::Uuid;

/// What the table knows about one token.
#[derive(Debug, Clone)]
struct Entry {
    context: OrgContext,
    revoked: bool,
}

/// The user's own token store: tokens issued and revoked at run time, shared by every clone.
///
/// It keys on the whole token for brevity; a real store keeps only a hash of the secret, looks
/// the row up by the token id and compares the hash.
#[derive(Debug, Clone, Default)]
pub struct KeyTable {
    entries: Arc<RwLock<HashMap<String, Entry>>>,
}

impl KeyTable {
    /// An empty table.
    pub fn new() -> KeyTable {
        KeyTable::default()
    }

    /// Mints a new PAT for `org_id` holding `permissions`, and returns it.
    pub fn issue(&self, org_id: Uuid, permissions: Permissions) -> String {
        let token_id = Uuid::new_v4();
        // Any ASCII alphanumeric secret passes PatAuth's shape check.
        let token = format!("{PREFIX}{token_id}_{}", Uuid::new_v4().simple());
        self.insert(token.clone(), token_id, org_id, permissions);
        token
    }

    /// Adds a token known in advance (the example binary's public demo tokens).
    pub fn insert(&self, token: String, token_id: Uuid, org_id: Uuid, permissions: Permissions) {
        let context = OrgContext::new(org_id, permissions, token_id);
        let entry = Entry {
            context,
            revoked: false,
        };
        // A poisoned lock means a writer panicked; the table itself is still consistent.
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        entries.insert(token, entry);
    }

    /// Revokes `token`; the next request carrying it gets 401 `INVALID_TOKEN`. False when the
    /// token was never issued.
    pub fn revoke(&self, token: &str) -> bool {
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        match entries.get_mut(token) {
            Some(entry) => {
                entry.revoked = true;
                true
            }
            None => false,
        }
    }

    /// Looks `token` up: the whole of the validation, done at once.
    fn lookup(&self, token: &str) -> Result<OrgContext, TokenError> {
        // An unreadable store is not proof that the token is bad: fail closed, as unknown.
        let entries = self.entries.read().map_err(|_| TokenError::Unavailable)?;
        match entries.get(token) {
            Some(entry) if !entry.revoked => Ok(entry.context.clone()),
            _ => Err(TokenError::Invalid),
        }
    }

    /// The validator PatAuth calls: a closure, which gets [`TokenValidator`] for free.
    ///
    /// The returned future must not borrow the token, so the lookup runs before the `async`
    /// block; a store that does I/O clones what it needs into the block instead.
    pub fn validator(&self) -> impl TokenValidator {
        let table = self.clone();
        move |token: &str| {
            let answer = table.lookup(token);
            async move { answer }
        }
    }
}

/// The app: `POST /v1/chat/completions` needs `CHAT_COMPLETIONS`, `GET /v1/whoami` only a
/// valid token. Every refusal leaves as the JSON error envelope.
pub fn app(keys: &KeyTable) -> Router {
    Router::new()
        .route(
            "/v1/chat/completions",
            post(chat).layer(RequirePermissionLayer::chat_completions()),
        )
        .route("/v1/whoami", get(whoami))
        .layer(
            ServiceBuilder::new()
                .layer(RequestIdLayer::new())
                .layer(ErrorEnvelopeLayer::new())
                .layer(PatAuthLayer::new(keys.validator())),
        )
}

/// Serves [`app`] on `listener` until the process stops.
pub async fn serve(listener: TcpListener, keys: &KeyTable) -> io::Result<()> {
    use axum::serve::ListenerExt;

    // Without TCP_NODELAY a response written as head then body waits on the delayed ACK.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app(keys)).await
}

async fn chat(Extension(context): Extension<OrgContext>) -> Json<Value> {
    Json(json!({
        "object": "chat.completion",
        "org_id": context.org_id,
    }))
}

async fn whoami(Extension(context): Extension<OrgContext>) -> Json<Value> {
    Json(json!({
        "org_id": context.org_id,
        "token_id": context.token_id,
        "permissions": context.permissions.bits(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn revoked_and_unknown_tokens_are_invalid() {
        let keys = KeyTable::new();
        let org = Uuid::new_v4();
        let token = keys.issue(org, Permissions::CHAT_COMPLETIONS);
        let validator = keys.validator();

        let context = validator.validate(&token).await.unwrap();
        assert_eq!(context.org_id, org);
        assert!(keys.revoke(&token));
        assert_eq!(
            validator.validate(&token).await.err(),
            Some(TokenError::Invalid)
        );
        assert!(!keys.revoke("svc_pat_unknown"));
        assert_eq!(
            validator.validate("svc_pat_unknown").await.err(),
            Some(TokenError::Invalid)
        );
    }
}
