//! Error reporting to Sentry (`SENTRY_DSN`): every 5xx answer and every panic becomes one event.
//!
//! Without a DSN nothing is initialised: no client, no panic hook, no thread, and the middleware
//! only forwards. With one, [`init`] starts the client (its transport is a thread of its own,
//! blocking `ureq` over rustls on ring, so a slow Sentry never holds a request) and installs
//! the panic hook; [`report`] sits right inside the error envelope and, per request:
//!
//! - runs the rest of the stack with a hub of its own, tagged `request_id`, `trace_id`
//!   (the `X-Request-ID` and `X-Trace-ID` the client gets back; the trace id is also the
//!   event's trace context), `route` (the matched template, never the raw path) and `method`,
//!   so a panic below it is reported with those tags;
//! - reports a 5xx answer, tagged with its `status` and envelope `error_code`. Two are not
//!   reported: a 501 `PROVIDER_NOT_CONFIGURED`, which answers the client's choice of model (a
//!   client must not be able to fill the error tracker), and `/ready`'s 503, which reports a
//!   dependency's state to a prober every few seconds and is not a failed request.
//!
//! What an event carries is built here from ids, the route, the status and the error code:
//! never a header, a token, a body or message content. [`scrub`] (the client's `before_send`)
//! enforces it for every event, panics included: only the tags above survive, a panic's message
//! is withheld (its type and stack trace stay), and the request, user, extra data and
//! breadcrumbs are dropped.

use std::collections::BTreeMap;
use std::sync::{Arc, Once};
use std::time::Duration;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::StatusCode;
use sentry::integrations::panic::PanicIntegration;
use sentry::protocol::{Context, Event, Level, TraceContext};
use sentry::types::Dsn;
use sentry::{
    ClientInitGuard, ClientOptions, Hub, Integration, SentryFutureExt, Transport, TransportFactory,
    TransportOptions,
};
use svc_runtime::config::Environment;
use svc_tower::error::ApiError;
use svc_tower::request_id::{RequestId, TraceId};

use crate::http_metrics::bounded_method;

/// How long a shutdown waits for queued events to leave.
pub const FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// The tags an event may carry; [`scrub`] drops any other.
const TAGS: [&str; 6] = [
    "request_id",
    "trace_id",
    "route",
    "method",
    "status",
    "error_code",
];

/// What a panic's message becomes: it may quote any value the code had at hand.
const WITHHELD: &str = "panic message withheld";

/// Whether [`report`] reports (`false` makes it a pass-through).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reporting {
    /// A DSN is configured.
    pub enabled: bool,
}

/// The running client. [`ErrorReports::shutdown`] it on the way out, or queued events may be
/// lost.
pub struct ErrorReports {
    guard: ClientInitGuard,
}

impl std::fmt::Debug for ErrorReports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ErrorReports").finish_non_exhaustive()
    }
}

/// Starts the client for `dsn` (checked by the configuration), tagged with the release and
/// `environment`; `None` without a DSN. Installs the panic hook, process-wide.
pub fn init(dsn: Option<&str>, environment: Environment) -> Option<ErrorReports> {
    let dsn = dsn?.parse::<Dsn>().ok()?;
    let options = ClientOptions {
        dsn: Some(dsn),
        release: Some(concat!("svc-gateway@", env!("CARGO_PKG_VERSION")).into()),
        environment: Some(environment.as_str().to_owned().into()),
        send_default_pii: false,
        max_breadcrumbs: 0,
        shutdown_timeout: FLUSH_TIMEOUT,
        before_send: Some(Arc::new(|event| Some(scrub(event)))),
        before_breadcrumb: Some(Arc::new(|_| None)),
        transport: Some(Arc::new(VerifiedTls)),
        // The one integration: panics, reported without waiting.
        default_integrations: false,
        integrations: vec![Arc::new(PanicReports)],
        ..ClientOptions::default()
    };
    let guard = sentry::init(options);
    // `init` binds the client to the calling thread's hub; requests and panics start from the
    // process hub, which is that one only when called on the main thread.
    let main = Hub::main();
    if main.client().is_none() {
        main.bind_client(Hub::current().client());
    }
    Some(ErrorReports { guard })
}

impl ErrorReports {
    /// Sends what is queued, waiting at most [`FLUSH_TIMEOUT`], and stops the client.
    pub async fn shutdown(self) {
        let guard = self.guard;
        // Closing removes the transport, so the guard's own close on drop finds nothing left.
        let closed = tokio::task::spawn_blocking(move || guard.close(Some(FLUSH_TIMEOUT))).await;
        if !matches!(closed, Ok(true)) {
            tracing::warn!("error reports did not flush before shutdown");
        }
    }
}

/// The default transport, always verifying certificates: the `sentry` crate would turn
/// verification off when the environment says `SSL_VERIFY=false`.
struct VerifiedTls;

impl TransportFactory for VerifiedTls {
    fn create_transport_with_options(&self, mut options: TransportOptions) -> Arc<dyn Transport> {
        options.accept_invalid_certs = false;
        sentry::transports::DefaultTransportFactory.create_transport_with_options(options)
    }
}

/// Reports panics, from a panic hook installed once, without waiting: the `sentry` crate's own
/// hook flushes the queue from inside the panic, which would hold the panicking worker thread
/// (and every request queued on it) for up to [`FLUSH_TIMEOUT`]. The report leaves with the
/// transport thread, and [`ErrorReports::shutdown`] flushes what is left.
struct PanicReports;

impl Integration for PanicReports {
    fn name(&self) -> &'static str {
        "panic"
    }

    fn setup(&self, _options: &mut ClientOptions) {
        static INSTALLED: Once = Once::new();
        INSTALLED.call_once(|| {
            let next = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                Hub::with_active(|hub| {
                    hub.capture_event(PanicIntegration::new().event_from_panic_info(info));
                });
                next(info);
            }));
        });
    }
}

/// Reports a 5xx answer, and a panic below with the request's tags; sits right inside the
/// error envelope, where an [`ApiError`] is still in the response.
pub async fn report(State(reporting): State<Reporting>, request: Request, next: Next) -> Response {
    if !reporting.enabled {
        return next.run(request).await;
    }
    let mut tags = BTreeMap::new();
    if let Some(id) = request.extensions().get::<RequestId>() {
        tags.insert("request_id".to_owned(), id.to_string());
    }
    let trace = request.extensions().get::<TraceId>().copied();
    if let Some(trace) = trace {
        tags.insert("trace_id".to_owned(), trace.to_string());
    }
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_owned();
    tags.insert("route".to_owned(), route.clone());
    tags.insert(
        "method".to_owned(),
        bounded_method(request.method()).to_owned(),
    );

    let hub = Arc::new(Hub::new_from_top(Hub::main()));
    hub.configure_scope(|scope| {
        for (key, value) in &tags {
            scope.set_tag(key, value);
        }
        // The event's own trace context is the request's trace, not one Sentry makes up.
        if let Some(trace) = trace {
            let context = TraceContext {
                trace_id: trace.as_u128().to_be_bytes().into(),
                ..TraceContext::default()
            };
            scope.set_context("trace", Context::Trace(Box::new(context)));
        }
    });
    let response = next.run(request).bind_hub(hub.clone()).await;

    let status = response.status();
    if reported(&route, status) {
        let code = response
            .extensions()
            .get::<ApiError>()
            .map(|error| error.code().as_str().to_owned());
        hub.capture_event(answer_event(status, code));
    }
    response
}

/// Whether an answer is reported: a 5xx, but 501 and `/ready`'s (see the [module docs](self)).
fn reported(route: &str, status: StatusCode) -> bool {
    status.is_server_error() && status != StatusCode::NOT_IMPLEMENTED && route != "/ready"
}

/// The event of one 5xx answer; the scope adds the request's tags.
fn answer_event(status: StatusCode, code: Option<String>) -> Event<'static> {
    let mut tags = BTreeMap::new();
    tags.insert("status".to_owned(), status.as_u16().to_string());
    let message = match &code {
        Some(code) => format!("answered {} {code}", status.as_u16()),
        None => format!("answered {}", status.as_u16()),
    };
    if let Some(code) = code {
        tags.insert("error_code".to_owned(), code);
    }
    Event {
        level: Level::Error,
        message: Some(message),
        tags,
        ..Event::default()
    }
}

/// Keeps only what an event may carry (see the [module docs](self)). A panic in a request is
/// answered 500 `INTERNAL_ERROR` by the envelope; its event says so.
pub fn scrub(mut event: Event<'static>) -> Event<'static> {
    event.request = None;
    event.user = None;
    event.extra.clear();
    event.breadcrumbs.values.clear();
    event.server_name = None;
    event.logentry = None;
    event.tags.retain(|key, _| TAGS.contains(&key.as_str()));
    let mut panicked = false;
    for exception in &mut event.exception.values {
        if exception
            .mechanism
            .as_ref()
            .is_some_and(|mechanism| mechanism.ty == "panic")
        {
            panicked = true;
            exception.value = Some(WITHHELD.to_owned());
            // The frames keep function names and lines; their variables are never captured,
            // but make sure.
            for frame in exception
                .stacktrace
                .iter_mut()
                .flat_map(|trace| trace.frames.iter_mut())
            {
                frame.vars.clear();
            }
        }
    }
    if panicked {
        event.message = Some(WITHHELD.to_owned());
        if event.tags.contains_key("request_id") {
            event.tags.insert("status".to_owned(), "500".to_owned());
            event
                .tags
                .insert("error_code".to_owned(), "INTERNAL_ERROR".to_owned());
        }
    }
    event
}

#[cfg(test)]
mod tests {
    use sentry::protocol::{Exception, Mechanism, User};

    use super::*;

    #[test]
    fn scrub_keeps_ids_and_drops_everything_else() {
        let mut event = answer_event(
            StatusCode::SERVICE_UNAVAILABLE,
            Some("PROVIDER_UNAVAILABLE".to_owned()),
        );
        event
            .tags
            .insert("request_id".to_owned(), "0192-req".to_owned());
        event
            .tags
            .insert("authorization".to_owned(), "Bearer svc_pat_x_y".to_owned());
        event.user = Some(User {
            ip_address: Some(sentry::protocol::IpAddress::Auto),
            ..User::default()
        });
        event
            .extra
            .insert("body".to_owned(), "secret content".into());
        let event = scrub(event);
        assert_eq!(
            event.message.as_deref(),
            Some("answered 503 PROVIDER_UNAVAILABLE")
        );
        let keys: Vec<_> = event.tags.keys().map(String::as_str).collect();
        assert_eq!(keys, ["error_code", "request_id", "status"]);
        assert!(event.user.is_none() && event.extra.is_empty());
    }

    #[test]
    fn failures_are_reported_but_a_model_choice_and_readiness_are_not() {
        let route = "/v1/chat/completions";
        for status in [500, 502, 503, 504] {
            assert!(reported(route, StatusCode::from_u16(status).unwrap()));
        }
        assert!(reported("unmatched", StatusCode::INTERNAL_SERVER_ERROR));
        assert!(!reported(route, StatusCode::NOT_IMPLEMENTED));
        assert!(!reported("/ready", StatusCode::SERVICE_UNAVAILABLE));
        for status in [200, 400, 401, 404, 429] {
            assert!(!reported(route, StatusCode::from_u16(status).unwrap()));
        }
    }

    #[test]
    fn a_panic_keeps_its_type_but_not_its_message() {
        let mut event = Event {
            message: Some("content: hello".to_owned()),
            ..Event::default()
        };
        event
            .tags
            .insert("request_id".to_owned(), "0192-req".to_owned());
        event.exception.values.push(Exception {
            ty: "panic".to_owned(),
            value: Some("user said: hello".to_owned()),
            mechanism: Some(Mechanism {
                ty: "panic".to_owned(),
                handled: Some(false),
                ..Mechanism::default()
            }),
            ..Exception::default()
        });
        let event = scrub(event);
        assert_eq!(event.exception.values[0].ty, "panic");
        assert_eq!(event.exception.values[0].value.as_deref(), Some(WITHHELD));
        assert_eq!(event.message.as_deref(), Some(WITHHELD));
        assert_eq!(event.tags["status"], "500");
        assert_eq!(event.tags["error_code"], "INTERNAL_ERROR");
    }
}
