//! A fake OpenAI-compatible upstream on loopback: answers what the test scripts, and records
//! what it was sent.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::response::Response;
use axum::routing::post;
use http::{HeaderMap, StatusCode};
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc};
use tokio_stream::wrappers::ReceiverStream;

/// How the upstream answers the next calls.
#[derive(Clone, Debug)]
pub enum Script {
    /// A status, a JSON body and extra headers.
    Json(u16, serde_json::Value, Vec<(&'static str, String)>),
    /// A status and a raw body with a content type.
    Raw(u16, &'static str, &'static str),
    /// Never answers.
    Hang,
    /// Waits for [`Upstream::release`], then answers like [`Script::Json`].
    Gated(u16, serde_json::Value),
    /// A completion whose usage differs from call to call (from a counter), summed in
    /// [`Upstream::reported`]: what the ledger must add up to.
    Counted,
    /// SSE: `before`, then waits for [`Upstream::release`], then `after`; then ends, or with
    /// `fail` aborts the body mid-stream.
    Stream {
        before: Vec<String>,
        after: Vec<String>,
        fail: bool,
    },
}

/// One request as the upstream saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

struct Inner {
    script: Mutex<Script>,
    seen: Mutex<Vec<Seen>>,
    release: Notify,
    /// Signalled when the gateway dropped a streamed body before the upstream finished it.
    stream_dropped: Notify,
    /// What [`Script::Counted`] reported: calls, prompt tokens, completion tokens.
    reported: Mutex<Reported>,
    /// Bytes of [`Script::Stream`] events handed to the connection so far.
    streamed: std::sync::atomic::AtomicUsize,
}

/// The usage a [`Script::Counted`] upstream reported, summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reported {
    pub calls: i64,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
}

/// A running fake upstream.
#[derive(Clone)]
pub struct Upstream {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
}

/// An OpenAI-shaped completion, as a real provider would answer.
pub fn completion(content: &str) -> serde_json::Value {
    serde_json::json!({
        "id": "chatcmpl-upstream-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-test",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
    })
}

/// One SSE chunk event carrying `text`.
pub fn chunk(text: &str) -> String {
    let event = serde_json::json!({
        "id": "chatcmpl-upstream-1",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}],
    });
    format!("data: {event}\n\n")
}

impl Upstream {
    pub async fn start(script: Script) -> Upstream {
        let inner = Arc::new(Inner {
            script: Mutex::new(script),
            seen: Mutex::new(Vec::new()),
            release: Notify::new(),
            stream_dropped: Notify::new(),
            reported: Mutex::new(Reported::default()),
            streamed: Default::default(),
        });
        // Every OpenAI route the gateway forwards gets the scripted answer.
        let app = Router::new()
            .route("/v1/chat/completions", post(answer))
            .route("/v1/embeddings", post(answer))
            .route("/v1/responses", post(answer))
            .with_state(inner.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Upstream { addr, inner }
    }

    /// The base URL the gateway is configured with.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn set(&self, script: Script) {
        *self.inner.script.lock().unwrap() = script;
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.inner.seen.lock().unwrap().clone()
    }

    /// The usage [`Script::Counted`] reported so far.
    pub fn reported(&self) -> Reported {
        *self.inner.reported.lock().unwrap()
    }

    /// Lets a waiting stream send the rest.
    pub fn release(&self) {
        self.inner.release.notify_one();
    }

    /// Bytes of the scripted stream events handed to the connection so far.
    pub fn streamed_bytes(&self) -> usize {
        self.inner
            .streamed
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Resolves once the gateway dropped a stream the upstream was still serving.
    pub async fn stream_dropped(&self) {
        self.inner.stream_dropped.notified().await;
    }
}

async fn answer(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    inner.seen.lock().unwrap().push(Seen {
        path: parts.uri.path().to_owned(),
        headers: parts.headers,
        body,
    });
    let script = inner.script.lock().unwrap().clone();
    match script {
        Script::Json(status, json, headers) => {
            let mut builder = Response::builder()
                .status(status)
                .header("content-type", "application/json");
            for (name, value) in headers {
                builder = builder.header(name, value);
            }
            builder.body(Body::from(json.to_string())).unwrap()
        }
        Script::Raw(status, content_type, body) => Response::builder()
            .status(status)
            .header("content-type", content_type)
            .body(Body::from(body))
            .unwrap(),
        Script::Counted => {
            let (prompt, output) = {
                let mut reported = inner.reported.lock().unwrap();
                reported.calls += 1;
                let (prompt, output) = (3 + reported.calls % 11, 1 + reported.calls % 7);
                reported.prompt_tokens += prompt;
                reported.completion_tokens += output;
                (prompt, output)
            };
            let mut json = completion("counted");
            json["usage"] = serde_json::json!({
                "prompt_tokens": prompt,
                "completion_tokens": output,
                "total_tokens": prompt + output,
            });
            Response::builder()
                .header("content-type", "application/json")
                .body(Body::from(json.to_string()))
                .unwrap()
        }
        Script::Hang => std::future::pending().await,
        Script::Gated(status, json) => {
            inner.release.notified().await;
            Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(Body::from(json.to_string()))
                .unwrap()
        }
        Script::Stream {
            before,
            after,
            fail,
        } => {
            let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(16);
            tokio::spawn(async move {
                for event in before {
                    let len = event.len();
                    if tx.send(Ok(Bytes::from(event))).await.is_err() {
                        inner.stream_dropped.notify_one();
                        return;
                    }
                    inner
                        .streamed
                        .fetch_add(len, std::sync::atomic::Ordering::Relaxed);
                }
                tokio::select! {
                    () = inner.release.notified() => {}
                    () = tx.closed() => {
                        inner.stream_dropped.notify_one();
                        return;
                    }
                }
                for event in after {
                    if tx.send(Ok(Bytes::from(event))).await.is_err() {
                        inner.stream_dropped.notify_one();
                        return;
                    }
                }
                if fail {
                    let _ = tx.send(Err(std::io::Error::other("upstream broke"))).await;
                }
            });
            Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(ReceiverStream::new(rx)))
                .unwrap()
        }
    }
}
