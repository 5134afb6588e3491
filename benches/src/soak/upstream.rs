//! The soak's fake upstream: the harness's fixed completion, plus a count of every request by
//! the marker its body carries, and a switch that makes it answer later than the gateway waits.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::post;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::load::upstream::{CHAT_PATH, COMPLETION};

/// The body field that carries each request's Idempotency-Key to the upstream (the gateway
/// passes fields it does not read through unchanged).
pub const MARKER_FIELD: &str = "user";

#[derive(Debug, Default)]
struct Shared {
    slow: AtomicBool,
    delay: Duration,
    seen: Mutex<HashMap<String, u32>>,
}

/// A running recording upstream, stopped on drop.
#[derive(Debug)]
pub struct RecordingUpstream {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl RecordingUpstream {
    /// Serves on an ephemeral port of 127.0.0.1; while slow, every answer waits `delay`.
    pub async fn start(delay: Duration) -> std::io::Result<RecordingUpstream> {
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            delay,
            ..Shared::default()
        });
        let app = Router::new()
            .route(CHAT_PATH, post(answer))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(RecordingUpstream { addr, shared, task })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Makes every answer from now on wait past the gateway's provider timeout, or not.
    pub fn set_slow(&self, slow: bool) {
        self.shared.slow.store(slow, Ordering::SeqCst);
    }

    /// Requests received so far, and the markers that arrived more than once.
    pub fn tally(&self) -> (u64, Vec<String>) {
        let seen = self.shared.seen.lock().unwrap_or_else(|p| p.into_inner());
        let total = seen.values().map(|&n| u64::from(n)).sum();
        let twice = seen
            .iter()
            .filter(|&(k, &n)| n > 1 && !k.is_empty())
            .map(|(k, _)| k.clone())
            .collect();
        (total, twice)
    }
}

impl Drop for RecordingUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Counts the request under its marker (an unmarked one under the empty string) on arrival,
/// so a call the gateway gave up on still counts, then answers.
async fn answer(State(shared): State<Arc<Shared>>, body: Bytes) -> impl IntoResponse {
    let marker = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get(MARKER_FIELD)?.as_str().map(str::to_owned))
        .unwrap_or_default();
    *shared
        .seen
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(marker)
        .or_default() += 1;
    if shared.slow.load(Ordering::SeqCst) {
        tokio::time::sleep(shared.delay).await;
    }
    ([(CONTENT_TYPE, "application/json")], COMPLETION)
}
