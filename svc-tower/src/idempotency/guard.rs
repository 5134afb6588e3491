use std::sync::Arc;
use std::time::Duration;

use tokio::time::timeout;
use uuid::Uuid;

use super::store::{ClaimToken, IdempotencyStore, StoredResponse};
use crate::store::StoreFuture;

/// How long a release spawned for an abandoned request may take; nobody waits for it.
const BACKGROUND_RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// A claim held by a running request. Dropped while armed (the client went away, the inner
/// service failed), it frees the key in the background, best effort.
pub(crate) struct ClaimGuard<S: IdempotencyStore> {
    store: S,
    org_id: Uuid,
    key: Arc<str>,
    token: ClaimToken,
    armed: bool,
}

impl<S: IdempotencyStore> ClaimGuard<S> {
    pub(crate) fn new(store: S, org_id: Uuid, key: Arc<str>, token: ClaimToken) -> ClaimGuard<S> {
        ClaimGuard {
            store,
            org_id,
            key,
            token,
            armed: true,
        }
    }

    pub(crate) fn release(mut self) -> StoreFuture<bool> {
        self.armed = false;
        self.store.release(self.org_id, &self.key, &self.token)
    }

    pub(crate) fn commit(&self, response: StoredResponse, ttl: Duration) -> StoreFuture<bool> {
        self.store
            .commit(self.org_id, &self.key, &self.token, response, ttl)
    }

    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl<S: IdempotencyStore> Drop for ClaimGuard<S> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let release = timeout(
            BACKGROUND_RELEASE_TIMEOUT,
            self.store.release(self.org_id, &self.key, &self.token),
        );
        runtime.spawn(async move {
            let _ = release.await;
        });
    }
}
