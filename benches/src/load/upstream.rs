//! A fake OpenAI-compatible upstream on loopback that answers at once with a fixed small
//! completion, so whatever latency the gateway shows beyond it is the gateway's own.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::post;
use axum::serve::ListenerExt;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The one model the gateway registers and the requests name.
pub const MODEL: &str = "svc-load-1";
/// The path both the gateway's live provider and the direct client call.
pub const CHAT_PATH: &str = "/v1/chat/completions";
/// The key the gateway sends upstream; it means nothing to the fake.
pub const PROVIDER_KEY: &str = "sk-svc-load-placeholder";

/// The fixed answer: OpenAI's shape, a few hundred bytes, as a real short completion.
pub const COMPLETION: &str = r#"{"id":"chatcmpl-svc-load","object":"chat.completion","created":1700000000,"model":"svc-load-1","choices":[{"index":0,"message":{"role":"assistant","content":"Hello."},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}"#;

/// How long [`Upstream::shutdown`] lets connections drain.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// A running fake upstream; [`Upstream::shutdown`] stops it.
#[derive(Debug)]
pub struct Upstream {
    addr: SocketAddr,
    calls: Arc<AtomicU64>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Upstream {
    /// Serves on an ephemeral port of 127.0.0.1.
    pub async fn start() -> std::io::Result<Upstream> {
        Upstream::start_on(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await
    }

    /// Serves on `addr`.
    pub async fn start_on(addr: SocketAddr) -> std::io::Result<Upstream> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let calls = Arc::new(AtomicU64::new(0));
        let app = Router::new()
            .route(CHAT_PATH, post(answer))
            .with_state(calls.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            // A response written as head then body must not wait for the client's delayed ACK.
            let listener = listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(Upstream {
            addr,
            calls,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL the gateway's live provider is configured with.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Requests answered so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Stops accepting and waits (up to [`STOP_GRACE`]) for open connections to finish.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(STOP_GRACE, &mut task).await.is_err()
        {
            task.abort();
        }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Reads the whole request body, as a provider must before answering, then answers.
async fn answer(State(calls): State<Arc<AtomicU64>>, body: Bytes) -> impl IntoResponse {
    calls.fetch_add(1, Ordering::Relaxed);
    drop(body);
    ([(CONTENT_TYPE, "application/json")], COMPLETION)
}
