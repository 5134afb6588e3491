//! Error reporting to Sentry (`SENTRY_DSN`), shared by both services: the client, the panic
//! hook, the scope of one request and the event of one failed answer, and [`scrub`].
//!
//! Without a DSN nothing is initialised: no client, no panic hook, no thread. With one, [`init`]
//! starts the client (its transport is a thread of its own, blocking `ureq` over rustls on
//! ring, so a slow Sentry never holds a request) and installs the panic hook. Each service
//! decides which answers are failures, and runs a request under [`request_hub`] so a panic
//! below is reported with the request's tags.
//!
//! What an event carries is built from ids, the route, the status and the error code: never a
//! header, a token, a body or message content. [`scrub`] (the client's `before_send`) enforces
//! it for every event, panics included: only [`TAGS`] survive, a panic's message is withheld
//! (its type and stack trace stay), and the request, user, extra data and breadcrumbs are
//! dropped.

use std::collections::BTreeMap;
use std::sync::{Arc, Once};
use std::time::Duration;

use sentry::integrations::panic::PanicIntegration;
use sentry::protocol::{Context, Event, Level, TraceContext};
use sentry::types::Dsn;
use sentry::{
    ClientInitGuard, ClientOptions, Hub, Integration, Transport, TransportFactory, TransportOptions,
};
use svc_core::trace::TraceId;

use crate::config::Environment;
use crate::secret::Secret;

/// How long a shutdown waits for queued events to leave.
pub const FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// The tags an event may carry; [`scrub`] drops any other.
pub const TAGS: [&str; 6] = [
    "request_id",
    "trace_id",
    "route",
    "method",
    "status",
    "error_code",
];

/// What a panic's message becomes: it may quote any value the code had at hand.
const WITHHELD: &str = "panic message withheld";

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

/// Checks a `SENTRY_DSN` value. The error names no part of it: the DSN holds the project's
/// key.
pub fn parse_dsn(value: &str) -> Result<Option<Secret>, String> {
    match value.parse::<Dsn>() {
        Ok(_) => Ok(Some(Secret::new(value))),
        Err(_) => Err("not a Sentry DSN (https://<key>@<host>/<project>)".to_owned()),
    }
}

/// Starts the client for `dsn` (checked by [`parse_dsn`]), tagged with `release`
/// (`name@version`) and `environment`; `None` without a DSN. Installs the panic hook, process-wide.
pub fn init(
    dsn: Option<&str>,
    release: &'static str,
    environment: Environment,
) -> Option<ErrorReports> {
    let dsn = dsn?.parse::<Dsn>().ok()?;
    let options = ClientOptions {
        dsn: Some(dsn),
        release: Some(release.into()),
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

/// The hub one request runs under: a child of the process hub, tagged with `tags` (names from
/// [`TAGS`]) and with the request's trace as the events' trace context, so an event made below,
/// a panic's included, carries them.
pub fn request_hub(tags: &BTreeMap<&'static str, String>, trace: Option<TraceId>) -> Arc<Hub> {
    let hub = Arc::new(Hub::new_from_top(Hub::main()));
    hub.configure_scope(|scope| {
        for (key, value) in tags {
            scope.set_tag(key, value);
        }
        if let Some(trace) = trace {
            scope.set_tag("trace_id", trace);
            // The event's own trace context is the request's trace, not one Sentry makes up.
            let context = TraceContext {
                trace_id: trace.as_u128().to_be_bytes().into(),
                ..TraceContext::default()
            };
            scope.set_context("trace", Context::Trace(Box::new(context)));
        }
    });
    hub
}

/// The event of one failed answer, `status` being its HTTP or gRPC status code; the scope adds
/// the request's tags.
pub fn answer_event(status: u16, code: Option<String>) -> Event<'static> {
    let mut tags = BTreeMap::new();
    tags.insert("status".to_owned(), status.to_string());
    let message = match &code {
        Some(code) => format!("answered {status} {code}"),
        None => format!("answered {status}"),
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
        let mut event = answer_event(503, Some("PROVIDER_UNAVAILABLE".to_owned()));
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
