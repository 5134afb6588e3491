//! Error reports of gRPC answers (`SENTRY_DSN`, see [`svc_runtime::error_report`]).
//!
//! An answer with status Internal, Unknown or DataLoss becomes one event, tagged with the
//! `route` (the method's path, `unmatched` for any other), the caller's `trace_id` (from a valid
//! `traceparent`), the numeric `status` and its name as `error_code`; a panic in a call is
//! reported with the same tags. Unavailable is not reported: it answers a spent hashing
//! budget, which a flood of wrong secrets causes, and a caller must not be able to fill the
//! error tracker. Neither is Unimplemented, the caller's choice of method. The status of a
//! streamed answer (health watches, reflection) travels in its trailers and is not looked at.

use std::collections::BTreeMap;
use std::task::{Context, Poll};

use futures_util::future::{BoxFuture, Either};
use sentry::SentryFutureExt;
use svc_runtime::error_report::{answer_event, request_hub};
use tonic::Code;
use tower::{Layer, Service};

/// The prefix of every path [`route`] keeps.
const SERVICE_PREFIX: &str = "/svc.auth.v1.AuthService/";
/// The longest method path kept; the service's longest is well under it.
const MAX_ROUTE_LEN: usize = 64;

/// Wraps the gRPC routes; a pass-through unless `enabled`.
#[derive(Debug, Clone, Copy)]
pub struct ReportLayer {
    enabled: bool,
}

impl ReportLayer {
    /// Reports when `enabled` (a DSN is configured).
    pub fn new(enabled: bool) -> ReportLayer {
        ReportLayer { enabled }
    }
}

impl<S> Layer<S> for ReportLayer {
    type Service = Report<S>;

    fn layer(&self, inner: S) -> Report<S> {
        Report {
            inner,
            enabled: self.enabled,
        }
    }
}

/// The service [`ReportLayer`] makes.
#[derive(Debug, Clone)]
pub struct Report<S> {
    inner: S,
    enabled: bool,
}

impl<S, B, R> Service<http::Request<B>> for Report<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Either<S::Future, BoxFuture<'static, Result<S::Response, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if !self.enabled {
            return Either::Left(self.inner.call(request));
        }
        let trace = super::trace::trace_id(request.headers());
        let tags = BTreeMap::from([("route", route(request.uri().path()).to_owned())]);
        let hub = request_hub(&tags, trace);
        let answer = self.inner.call(request).bind_hub(hub.clone());
        Either::Right(Box::pin(async move {
            let response = answer.await?;
            if let Some(code) = reported(response.headers()) {
                hub.capture_event(answer_event(code as u16, Some(code_name(code).to_owned())));
            }
            Ok(response)
        }))
    }
}

/// The method path when it is one of the service's, else `unmatched`: the tag's values stay
/// few whatever a caller sends.
fn route(path: &str) -> &str {
    let method = path.strip_prefix(SERVICE_PREFIX).unwrap_or_default();
    if !method.is_empty()
        && path.len() <= MAX_ROUTE_LEN
        && method.bytes().all(|b| b.is_ascii_alphabetic())
    {
        path
    } else {
        "unmatched"
    }
}

/// The status of an answer that is reported (see the [module docs](self)); a unary call's
/// error answer carries it in its headers.
fn reported(headers: &http::HeaderMap) -> Option<Code> {
    let value = headers.get("grpc-status")?.to_str().ok()?;
    let code = Code::from_i32(value.parse().ok()?);
    matches!(code, Code::Internal | Code::Unknown | Code::DataLoss).then_some(code)
}

fn code_name(code: Code) -> &'static str {
    match code {
        Code::Internal => "INTERNAL",
        Code::Unknown => "UNKNOWN",
        Code::DataLoss => "DATA_LOSS",
        _ => "OTHER",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(value: &'static str) -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        headers.insert("grpc-status", http::HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn faults_are_reported_but_refusals_and_shedding_are_not() {
        assert_eq!(reported(&status("13")), Some(Code::Internal));
        assert_eq!(reported(&status("2")), Some(Code::Unknown));
        assert_eq!(reported(&status("15")), Some(Code::DataLoss));
        for other in ["0", "3", "5", "7", "12", "14", "16", "x"] {
            assert_eq!(reported(&status(other)), None, "{other}");
        }
        assert_eq!(reported(&http::HeaderMap::new()), None);
    }

    #[test]
    fn routes_are_the_service_methods_only() {
        let method = "/svc.auth.v1.AuthService/ValidateToken";
        assert_eq!(route(method), method);
        for other in [
            "/",
            "/svc.auth.v1.AuthService/",
            "/grpc.health.v1.Health/Check",
            "/svc.auth.v1.AuthService/Validate%20Token",
            "/svc.auth.v1.AuthService/AVeryLongMethodNameThatNobodyWouldEverDeclareInAProtoFile",
        ] {
            assert_eq!(route(other), "unmatched", "{other}");
        }
    }
}
