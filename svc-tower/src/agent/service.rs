//! The AgentCheck layer: [`AsyncCheck`] with the agent-header check.

use std::fmt;

use http::{HeaderName, Request};
use tower::Layer;
use uuid::Uuid;

use super::validator::{AgentError, AgentValidator};
use crate::check::{AsyncCheck, BoxCheck, CheckRequest};
use crate::context::{AgentStanding, AgentVerdict, OrgContext};
use crate::error::{ApiError, ErrorCode, FieldError, FieldErrorCode};
use crate::trace_context;

/// `X-SVC-Agent-ID`, the header naming the calling agent.
pub static X_SVC_AGENT_ID: HeaderName = HeaderName::from_static("x-svc-agent-id");

/// The header's name as the envelope reports it in `field_errors`.
const FIELD: &str = "X-SVC-Agent-ID";

/// `Retry-After` on 503 `AUTH_UNAVAILABLE`.
const UNAVAILABLE_RETRY_AFTER_SECS: u64 = 1;

/// Verifies `X-SVC-Agent-ID` against the token's org; see the [module docs](super).
pub type AgentCheck<S, V> = AsyncCheck<S, AgentIdCheck<V>>;

/// Applies [`AgentCheck`]; see the [module docs](super).
#[derive(Clone)]
pub struct AgentCheckLayer<V> {
    check: AgentIdCheck<V>,
}

impl<V: AgentValidator> AgentCheckLayer<V> {
    /// Verifies agents with `validator`.
    pub fn new(validator: V) -> AgentCheckLayer<V> {
        AgentCheckLayer {
            check: AgentIdCheck { validator },
        }
    }
}

impl<V> fmt::Debug for AgentCheckLayer<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentCheckLayer").finish_non_exhaustive()
    }
}

impl<S, V: Clone> Layer<S> for AgentCheckLayer<V> {
    type Service = AgentCheck<S, V>;

    fn layer(&self, inner: S) -> AgentCheck<S, V> {
        AsyncCheck::new(inner, self.check.clone())
    }
}

/// The [`CheckRequest`] of [`AgentCheck`]: the agent header through an [`AgentValidator`].
#[derive(Clone)]
pub struct AgentIdCheck<V> {
    validator: V,
}

impl<V> fmt::Debug for AgentIdCheck<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentIdCheck").finish_non_exhaustive()
    }
}

impl<V: AgentValidator, B> CheckRequest<B> for AgentIdCheck<V> {
    type Output = Uuid;
    type Future = BoxCheck<Uuid>;

    fn check(&mut self, req: &Request<B>) -> Result<Self::Future, ApiError> {
        // The org comes from the validated token only, never from the request.
        let Some(context) = req.extensions().get::<OrgContext>() else {
            return Err(ApiError::new(ErrorCode::MissingToken));
        };
        let agent_id = match agent_header(req) {
            Ok(agent_id) => agent_id,
            Err(ErrorCode::ValidationError) => return Err(invalid_format()),
            Err(code) => return Err(ApiError::new(code)),
        };
        if context.agent_id.is_some_and(|bound| bound != agent_id) {
            // A token bound to one agent cannot speak for another, even of its own org.
            return Err(ApiError::new(ErrorCode::AgentNotAuthorized));
        }
        // PatAuth may have asked about this agent with the token, in the token's org.
        let known = req
            .extensions()
            .get::<AgentVerdict>()
            .filter(|verdict| verdict.agent_id == agent_id);
        if let Some(verdict) = known {
            let decided = match verdict.standing {
                AgentStanding::Active => Ok(agent_id),
                AgentStanding::Inactive => Err(rejection(AgentError::Suspended)),
                AgentStanding::NotInOrg => Err(rejection(AgentError::NotAuthorized)),
            };
            return Ok(Box::pin(std::future::ready(decided)));
        }
        let org_id = context.org_id;
        let validator = self.validator.clone();
        // A tracer's TraceParent extension, else the TraceId: GrpcAuthClient sends it.
        let trace = trace_context::of_request(req.extensions());
        Ok(Box::pin(async move {
            let agent = agent_id.hyphenated().to_string();
            // Called, not only polled, inside the scope: a closure's synchronous part sees the
            // trace too. GrpcAuthClient sends it with ValidateAgent.
            let validate = async { validator.validate(org_id, &agent).await };
            match trace_context::scope_request(trace, validate).await {
                Ok(()) => Ok(agent_id),
                Err(err) => Err(rejection(err)),
            }
        }))
    }

    fn apply(req: &mut Request<B>, agent_id: Uuid) {
        if let Some(context) = req.extensions_mut().get_mut::<OrgContext>() {
            context.agent_id = Some(agent_id);
        }
    }
}

/// The agent id of the one `X-SVC-Agent-ID` header; the error is the code to answer with.
fn agent_header<B>(req: &Request<B>) -> Result<Uuid, ErrorCode> {
    let mut values = req.headers().get_all(&X_SVC_AGENT_ID).iter();
    let value = match (values.next(), values.next()) {
        (None, _) => return Err(ErrorCode::MissingAgentId),
        (Some(value), None) => value,
        (Some(_), Some(_)) => return Err(ErrorCode::ValidationError),
    };
    let text = value
        .to_str()
        .map_err(|_| ErrorCode::ValidationError)?
        .trim();
    if text.is_empty() {
        return Err(ErrorCode::MissingAgentId);
    }
    Uuid::try_parse(text).map_err(|_| ErrorCode::ValidationError)
}

fn invalid_format() -> ApiError {
    ApiError::new(ErrorCode::ValidationError).with_field_error(FieldError::new(
        FIELD,
        FieldErrorCode::InvalidFormat,
        "X-SVC-Agent-ID must be a single UUID.",
    ))
}

fn rejection(err: AgentError) -> ApiError {
    match err {
        AgentError::NotAuthorized => ApiError::new(ErrorCode::AgentNotAuthorized),
        AgentError::Suspended => ApiError::new(ErrorCode::AgentSuspended),
        AgentError::InvalidArgument => invalid_format(),
        AgentError::Unavailable => {
            tracing::warn!("agent validation unavailable; answered 503");
            ApiError::new(ErrorCode::AuthUnavailable).with_retry_after(UNAVAILABLE_RETRY_AFTER_SECS)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::{Arc, Mutex};

    use http::{HeaderValue, Response, StatusCode, header};
    use http_body_util::BodyExt;
    use tower::{ServiceExt, service_fn};

    use super::*;
    use crate::context::Permissions;
    use crate::request_id::TraceId;

    fn context(bound: Option<Uuid>) -> OrgContext {
        OrgContext::new(
            Uuid::new_v4(),
            Permissions::CHAT_COMPLETIONS,
            Uuid::new_v4(),
        )
        .with_agent(bound)
    }

    /// Answers with the verified agent id.
    async fn echo_agent(req: Request<()>) -> Result<Response<String>, Infallible> {
        let agent = req
            .extensions()
            .get::<OrgContext>()
            .and_then(|c| c.agent_id);
        Ok(Response::new(format!("{agent:?}")))
    }

    /// What a validator was asked: (org, agent) pairs.
    type Asked = Arc<Mutex<Vec<(Uuid, String)>>>;

    /// A validator answering `outcome`, remembering what it was asked.
    fn fixed(outcome: Result<(), AgentError>) -> (impl AgentValidator + use<>, Asked) {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&asked);
        let validator = move |org: Uuid, agent: &str| {
            log.lock().unwrap().push((org, agent.to_owned()));
            async move { outcome }
        };
        (validator, asked)
    }

    fn request(context: Option<&OrgContext>, agent: Option<&str>) -> Request<()> {
        let mut req = Request::new(());
        if let Some(context) = context {
            req.extensions_mut().insert(context.clone());
        }
        if let Some(agent) = agent {
            req.headers_mut()
                .insert(&X_SVC_AGENT_ID, HeaderValue::from_str(agent).unwrap());
        }
        req
    }

    fn error<B>(response: &Response<B>) -> &ApiError {
        response.extensions().get::<ApiError>().unwrap()
    }

    #[tokio::test]
    async fn an_active_agent_of_the_token_org_is_recorded() {
        let (validator, asked) = fixed(Ok(()));
        let svc = AgentCheckLayer::new(validator).layer(service_fn(echo_agent));
        let context = context(None);
        let agent = Uuid::new_v4();
        let upper = agent.to_string().to_ascii_uppercase();
        let response = svc
            .oneshot(request(Some(&context), Some(&upper)))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, format!("{:?}", Some(agent)));
        // Asked with the token's org and the canonical id.
        assert_eq!(
            *asked.lock().unwrap(),
            vec![(context.org_id, agent.to_string())]
        );
    }

    #[tokio::test]
    async fn a_verdict_prefetched_with_the_token_decides_without_the_validator() {
        let (validator, asked) = fixed(Ok(()));
        let svc = AgentCheckLayer::new(validator).layer(service_fn(echo_agent));
        let context = context(None);
        let agent = Uuid::new_v4();
        let with = |standing| {
            let mut req = request(Some(&context), Some(&agent.to_string()));
            req.extensions_mut().insert(AgentVerdict {
                agent_id: agent,
                standing,
                tools: Default::default(),
            });
            req
        };
        let ok = svc
            .clone()
            .oneshot(with(AgentStanding::Active))
            .await
            .unwrap();
        assert_eq!(ok.status(), StatusCode::OK);
        let inactive = svc
            .clone()
            .oneshot(with(AgentStanding::Inactive))
            .await
            .unwrap();
        assert_eq!(*error(&inactive).code(), ErrorCode::AgentSuspended);
        let stranger = svc
            .clone()
            .oneshot(with(AgentStanding::NotInOrg))
            .await
            .unwrap();
        assert_eq!(*error(&stranger).code(), ErrorCode::AgentNotAuthorized);
        assert!(asked.lock().unwrap().is_empty(), "the validator was asked");

        // A verdict about another agent is no answer: the validator is asked.
        let mut other = request(Some(&context), Some(&agent.to_string()));
        other.extensions_mut().insert(AgentVerdict {
            agent_id: Uuid::new_v4(),
            standing: AgentStanding::Active,
            tools: Default::default(),
        });
        let response = svc.oneshot(other).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(asked.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn the_validator_runs_in_the_request_trace() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let validator = move |_: Uuid, _: &str| {
            let sync = crate::trace_context::current();
            let log = Arc::clone(&log);
            async move {
                log.lock()
                    .unwrap()
                    .push((sync, crate::trace_context::current()));
                Ok(())
            }
        };
        let svc = AgentCheckLayer::new(validator).layer(service_fn(echo_agent));
        let trace = TraceId::random();
        let agent = Uuid::new_v4().to_string();
        let mut traced = request(Some(&context(None)), Some(&agent));
        traced.extensions_mut().insert(trace);
        let response = svc.clone().oneshot(traced).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        svc.oneshot(request(Some(&context(None)), Some(&agent)))
            .await
            .unwrap();
        assert_eq!(
            *seen.lock().unwrap(),
            vec![(Some(trace), Some(trace)), (None, None)]
        );
    }

    #[tokio::test]
    async fn a_trace_parent_extension_is_what_the_validator_sends() {
        use crate::trace_context::TraceParent;

        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let validator = move |_: Uuid, _: &str| {
            log.lock()
                .unwrap()
                .push(crate::trace_context::current_parent());
            async { Ok(()) }
        };
        let svc = AgentCheckLayer::new(validator).layer(service_fn(echo_agent));
        let trace = TraceId::random();
        let span = TraceParent::new(trace, 0xfeed, true).unwrap();
        let mut req = request(Some(&context(None)), Some(&Uuid::new_v4().to_string()));
        req.extensions_mut().insert(trace);
        req.extensions_mut().insert(span);
        let response = svc.oneshot(req).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(*seen.lock().unwrap(), vec![Some(span)]);
    }

    #[tokio::test]
    async fn no_org_context_is_missing_token() {
        let (validator, asked) = fixed(Ok(()));
        let svc = AgentCheckLayer::new(validator).layer(service_fn(echo_agent));
        let agent = Uuid::new_v4().to_string();
        let response = svc.oneshot(request(None, Some(&agent))).await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(error(&response).code(), &ErrorCode::MissingToken);
        assert!(asked.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_missing_header_is_missing_agent_id() {
        let (validator, asked) = fixed(Ok(()));
        let svc = AgentCheckLayer::new(validator).layer(service_fn(echo_agent));
        for agent in [None, Some(""), Some("  ")] {
            let response = svc
                .clone()
                .oneshot(request(Some(&context(None)), agent))
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::BAD_REQUEST);
            assert_eq!(
                error(&response).code(),
                &ErrorCode::MissingAgentId,
                "{agent:?}"
            );
        }
        assert!(asked.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_malformed_id_is_a_validation_error_on_the_header() {
        let (validator, asked) = fixed(Ok(()));
        let svc = AgentCheckLayer::new(validator).layer(service_fn(echo_agent));
        let response = svc
            .oneshot(request(Some(&context(None)), Some("agent-7")))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let error = error(&response);
        assert_eq!(error.code(), &ErrorCode::ValidationError);
        assert_eq!(error.field_errors()[0].field, "X-SVC-Agent-ID");
        assert_eq!(error.field_errors()[0].code, FieldErrorCode::InvalidFormat);
        assert!(asked.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn validator_outcomes_map_to_the_spec_codes() {
        let table = [
            (
                AgentError::NotAuthorized,
                403,
                ErrorCode::AgentNotAuthorized,
            ),
            (AgentError::Suspended, 403, ErrorCode::AgentSuspended),
            (AgentError::InvalidArgument, 400, ErrorCode::ValidationError),
            (AgentError::Unavailable, 503, ErrorCode::AuthUnavailable),
        ];
        for (outcome, status, code) in table {
            let (validator, _) = fixed(Err(outcome));
            let svc = AgentCheckLayer::new(validator).layer(service_fn(echo_agent));
            let agent = Uuid::new_v4().to_string();
            let response = svc
                .oneshot(request(Some(&context(None)), Some(&agent)))
                .await
                .unwrap();
            assert_eq!(response.status().as_u16(), status, "{outcome:?}");
            assert_eq!(error(&response).code(), &code);
            let retry_after = response.headers().get(header::RETRY_AFTER);
            assert_eq!(retry_after.is_some(), status == 503, "{outcome:?}");
        }
    }

    #[tokio::test]
    async fn a_token_bound_to_another_agent_is_not_authorized() {
        let (validator, asked) = fixed(Ok(()));
        let svc = AgentCheckLayer::new(validator).layer(service_fn(echo_agent));
        let bound = context(Some(Uuid::new_v4()));
        let other = Uuid::new_v4().to_string();
        let response = svc
            .clone()
            .oneshot(request(Some(&bound), Some(&other)))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
        assert_eq!(error(&response).code(), &ErrorCode::AgentNotAuthorized);
        assert!(asked.lock().unwrap().is_empty());

        let own = bound.agent_id.unwrap().to_string();
        let response = svc
            .oneshot(request(Some(&bound), Some(&own)))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
}
