//! One suite, run against every backend (`cases`, `store_cases`), plus what is specific to
//! one backend or to a misbehaving store.

mod axum;
mod cases;
mod failures;
#[cfg(feature = "redis")]
mod redis;
mod rules;
mod store_cases;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use tokio::sync::Semaphore;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, Layer, ServiceExt};
use uuid::Uuid;

use super::*;
use crate::body::ResponseBody;
use crate::context::{OrgContext, Permissions};
use crate::error::ApiError;

pub(super) type Inner = BoxCloneSyncService<Request<Full<Bytes>>, Response<Full<Bytes>>, BoxError>;
pub(super) type Stack<S> = Idempotency<S, Inner>;

pub(super) const CHAT: &str = "/v1/chat/completions";
pub(super) const BODY: &str =
    r#"{"model":"svc-mock-1","messages":[{"role":"user","content":"hello"}]}"#;

/// How a fake provider answers its `n`th call (from 0).
pub(super) type Respond =
    Arc<dyn Fn(usize) -> Result<Response<Full<Bytes>>, BoxError> + Send + Sync>;

/// A fake provider: counts calls, remembers whether it saw an `Idempotency-Key`, and can be
/// held at a gate until the test opens it.
#[derive(Clone)]
pub(super) struct Provider {
    pub(super) calls: Arc<AtomicUsize>,
    pub(super) saw_key: Arc<AtomicUsize>,
    pub(super) gate: Option<Arc<Semaphore>>,
    respond: Respond,
}

impl Provider {
    pub(super) fn new() -> Provider {
        Provider::responding(Arc::new(|n| Ok(completion(n))))
    }

    pub(super) fn responding(respond: Respond) -> Provider {
        Provider {
            calls: Arc::new(AtomicUsize::new(0)),
            saw_key: Arc::new(AtomicUsize::new(0)),
            gate: None,
            respond,
        }
    }

    /// Calls wait until [`Provider::open`] adds a permit each.
    pub(super) fn gated(mut self) -> Provider {
        self.gate = Some(Arc::new(Semaphore::new(0)));
        self
    }

    pub(super) fn open(&self, calls: usize) {
        if let Some(gate) = &self.gate {
            gate.add_permits(calls);
        }
    }

    pub(super) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    pub(super) fn service(&self) -> Inner {
        let provider = self.clone();
        BoxCloneSyncService::new(tower::service_fn(move |request: Request<Full<Bytes>>| {
            let provider = provider.clone();
            async move {
                if request.headers().contains_key(&IDEMPOTENCY_KEY) {
                    provider.saw_key.fetch_add(1, Ordering::SeqCst);
                }
                let n = provider.calls.fetch_add(1, Ordering::SeqCst);
                if let Some(gate) = &provider.gate {
                    gate.acquire().await?.forget();
                }
                (provider.respond)(n)
            }
        }))
    }

    pub(super) fn stack<S: IdempotencyStore + Clone>(
        &self,
        layer: IdempotencyLayer<S>,
    ) -> Stack<S> {
        layer.layer(self.service())
    }
}

/// A completion that differs per call, with a header that is not stored.
pub(super) fn completion(n: usize) -> Response<Full<Bytes>> {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json; charset=utf-8")
        .header("x-provider-call", n.to_string())
        .body(Full::from(format!(
            r#"{{"id":"cmpl-{n}","object":"chat.completion","choices":[{{"index":0,"message":{{"role":"assistant","content":"hi {n}"}}}}]}}"#
        )))
        .expect("a valid response")
}

pub(super) fn org() -> OrgContext {
    OrgContext::new(
        Uuid::new_v4(),
        Permissions::CHAT_COMPLETIONS,
        Uuid::new_v4(),
    )
}

pub(super) fn chat(
    org: Option<&OrgContext>,
    key: Option<&str>,
    body: &str,
) -> Request<Full<Bytes>> {
    chat_at(CHAT, org, key, body)
}

pub(super) fn chat_at(
    path: &str,
    org: Option<&OrgContext>,
    key: Option<&str>,
    body: &str,
) -> Request<Full<Bytes>> {
    let mut request = Request::post(path)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::from(body.to_owned()))
        .expect("a valid request");
    if let Some(key) = key {
        request
            .headers_mut()
            .insert(&IDEMPOTENCY_KEY, key.parse().expect("a valid key header"));
    }
    if let Some(org) = org {
        request.extensions_mut().insert(org.clone());
    }
    request
}

/// A response read whole.
#[derive(Debug)]
pub(super) struct Answer {
    pub(super) status: StatusCode,
    pub(super) headers: HeaderMap,
    pub(super) body: Bytes,
    pub(super) error: Option<ApiError>,
    pub(super) outcome: Option<IdempotencyOutcome>,
}

impl Answer {
    pub(super) fn code(&self) -> Option<&str> {
        self.error.as_ref().map(|e| e.code().as_str())
    }

    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub(super) fn replayed(&self) -> bool {
        self.header("idempotent-replayed") == Some("true")
    }
}

pub(super) async fn send<S>(stack: &Stack<S>, request: Request<Full<Bytes>>) -> Answer
where
    S: IdempotencyStore + Clone,
{
    let response: Response<ResponseBody<Full<Bytes>>> = stack
        .clone()
        .oneshot(request)
        .await
        .expect("the stack answers");
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("a readable body").to_bytes();
    Answer {
        status: parts.status,
        error: parts.extensions.get::<ApiError>().cloned(),
        outcome: parts.extensions.get::<IdempotencyOutcome>().copied(),
        headers: parts.headers,
        body,
    }
}

/// Polls until `check` holds, within a bound generous enough for a loaded machine.
pub(super) async fn eventually<F, Fut>(check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    svc_testkit::eventually(Duration::from_secs(10), check).await
}

#[cfg(feature = "redis")]
pub(super) fn redis_store() -> RedisIdempotencyStore {
    let pool = crate::store::RedisPool::new(&svc_testkit::redis_url()).expect("a valid URL");
    RedisIdempotencyStore::new(pool, svc_testkit::redis_prefix())
}

/// Runs each named case of the calling module against every backend, each with a fresh store.
macro_rules! on_every_backend {
    ($($case:ident),* $(,)?) => {
        mod memory_backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(crate::idempotency::MemoryIdempotencyStore::new()).await;
                }
            )*
        }
        #[cfg(feature = "redis")]
        mod redis_backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(crate::idempotency::tests::redis_store()).await;
                }
            )*
        }
    };
}
use on_every_backend;
