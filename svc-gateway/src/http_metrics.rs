//! `svc_proxy_requests_total{route, method, code}`, `svc_proxy_request_duration_seconds` and
//! `svc_proxy_overhead_seconds`.
//!
//! The overhead of a call is the time it spent in the gateway minus the time it waited on the
//! provider (to the response head): what the gateway itself costs, the figure the load harness
//! measures from outside. Calls that never reached a provider are not in it.
//!
//! Labels stay bounded: the route is the matched template (`/v1/orgs/{org_id}/auth-probe`),
//! never the raw path, and `unmatched` for the 404 fallback; methods outside the standard
//! set count as `OTHER`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use axum::extract::MatchedPath;
use http::{Method, Request, Response};
use pin_project_lite::pin_project;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use svc_tower::metrics::latency_histogram;
use tower::{Layer, Service};

/// How long a call waited on its provider, to the response head: in the response extensions
/// of every call that reached one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderWait(pub Duration);

/// Labels of `svc_proxy_requests_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    /// The route template (`/v1/orgs/{org_id}/auth-probe`), never the raw path.
    route: String,
    method: &'static str,
    code: u16,
}

/// The handles this middleware records into, and the layer that records; clones share the
/// series.
#[derive(Clone, Debug)]
pub struct HttpMetrics {
    requests: Family<RequestLabels, Counter>,
    duration: Histogram,
    overhead: Histogram,
}

impl Default for HttpMetrics {
    fn default() -> HttpMetrics {
        HttpMetrics::new()
    }
}

impl HttpMetrics {
    /// Fresh handles, not yet registered.
    pub fn new() -> HttpMetrics {
        HttpMetrics {
            requests: Family::default(),
            duration: latency_histogram(),
            overhead: latency_histogram(),
        }
    }

    /// Registers `svc_proxy_requests_total`, `svc_proxy_request_duration_seconds` and
    /// `svc_proxy_overhead_seconds`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "svc_proxy_requests",
            "Proxy requests by route template, method and status code",
            self.requests.clone(),
        );
        registry.register(
            "svc_proxy_request_duration_seconds",
            "Proxy request duration",
            self.duration.clone(),
        );
        registry.register(
            "svc_proxy_overhead_seconds",
            "Time a provider call spent in the gateway, less its wait on the provider",
            self.overhead.clone(),
        );
    }
}

/// Records one request; runs inside the router so the matched route is known.
impl<S> Layer<S> for HttpMetrics {
    type Service = Recorded<S>;

    fn layer(&self, inner: S) -> Recorded<S> {
        Recorded {
            inner,
            http: self.clone(),
        }
    }
}

/// The service [`HttpMetrics`] makes as a layer.
#[derive(Clone, Debug)]
pub struct Recorded<S> {
    inner: S,
    http: HttpMetrics,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Recorded<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = RecordFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let route = request
            .extensions()
            .get::<MatchedPath>()
            .map(|path| path.as_str().to_owned())
            .unwrap_or_else(|| "unmatched".to_owned());
        let pending = Pending {
            requests: self.http.requests.clone(),
            duration: self.http.duration.clone(),
            labels: Some(RequestLabels {
                route,
                method: bounded_method(request.method()),
                code: 0,
            }),
            started: Instant::now(),
        };
        RecordFuture {
            inner: self.inner.call(request),
            overhead: self.http.overhead.clone(),
            pending,
        }
    }
}

pin_project! {
    /// The response of [`Recorded`], counted when it is ready.
    pub struct RecordFuture<F> {
        #[pin]
        inner: F,
        overhead: Histogram,
        pending: Pending,
    }
}

impl<F, ResBody, E> Future for RecordFuture<F>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let pending = Unwinding(this.pending);
        let response = ready!(this.inner.poll(cx));
        if let Ok(response) = &response {
            if let Some(ProviderWait(wait)) = response.extensions().get::<ProviderWait>() {
                let spent = pending.0.started.elapsed().saturating_sub(*wait);
                this.overhead.observe(spent.as_secs_f64());
            }
            pending.0.finish(response.status().as_u16());
        }
        Poll::Ready(response)
    }
}

/// One request being measured. A handler that panics never returns a response here (the
/// error envelope outside answers 500), so a panic out of the inner future records that 500.
struct Pending {
    requests: Family<RequestLabels, Counter>,
    duration: Histogram,
    labels: Option<RequestLabels>,
    started: Instant,
}

impl Pending {
    fn finish(&mut self, code: u16) {
        let Some(mut labels) = self.labels.take() else {
            return;
        };
        labels.code = code;
        self.duration.observe(self.started.elapsed().as_secs_f64());
        self.requests.get_or_create(&labels).inc();
    }
}

/// Records a 500 when dropped while a panic unwinds through [`RecordFuture::poll`]: the
/// envelope outside catches the panic before the future itself is dropped.
struct Unwinding<'a>(&'a mut Pending);

impl Drop for Unwinding<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.finish(500);
        }
    }
}

/// The method as a bounded label: the standard ones, else `OTHER`.
pub(crate) fn bounded_method(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "OTHER",
    }
}
