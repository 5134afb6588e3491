//! One validated call, as the handler hands it down: everything the accounting and the
//! provider call need, typed, in one value.

use std::sync::Arc;
use std::time::Instant;

use axum::http::request::Parts;
use svc_tower::context::OrgContext;
use svc_tower::rate_limit::CountLater;
use svc_tower::request_id::{RequestId, TraceId};
use svc_tower::trace_context::TraceParent;

use crate::access_log::StreamOutcome;
use crate::provider::CallInfo;
use crate::request::ApiRequest;
use crate::session::SessionId;

/// A call the handler parsed and validated, on its way to a provider.
#[derive(Clone, Debug)]
pub struct Call {
    /// The validated request.
    pub api: Arc<ApiRequest>,
    /// The validated token's org, agent, limits and budgets (`None` only where no
    /// authentication runs, as in unit tests of the provider call).
    pub org: Option<OrgContext>,
    /// The gateway's request id.
    pub request_id: RequestId,
    /// What the provider is told beside the request.
    pub info: CallInfo,
    /// Where a broken stream's code goes for the access log.
    pub outcome: Option<StreamOutcome>,
    /// The client's session, when its route keeps checkpoints.
    pub session: Option<SessionId>,
    /// The bearer token, for GetBudgetSpend when a budget's counter must be rebuilt.
    pub credential: Option<Credential>,
    /// When the handler started on it.
    pub started: Instant,
    /// The request's rate-limit count, when `OrgRateLimit` left it to the call's reservation.
    pub count_later: Option<CountLater>,
}

impl Call {
    /// The call of `api`, with what the layers in front put on the request head.
    pub fn from_parts(parts: &Parts, api: Arc<ApiRequest>, started: Instant) -> Call {
        let extensions = &parts.extensions;
        let org = extensions.get::<OrgContext>().cloned();
        let request_id = extensions
            .get::<RequestId>()
            .copied()
            .unwrap_or_else(RequestId::new_v7);
        let info = CallInfo {
            request_id: Some(request_id.to_string()),
            trace_id: extensions.get::<TraceId>().copied(),
            // The request span's id and sampling decision, when trace export put them there.
            trace_parent: extensions.get::<TraceParent>().copied(),
            anthropic_beta: parts.headers.get("anthropic-beta").cloned(),
            org_id: org.as_ref().map(|org| org.org_id),
        };
        // Kept as the header value (a reference count, no copy); read only when a budget's
        // counter must be rebuilt.
        let credential = svc_core::bearer::token(&parts.headers)
            .ok()
            .and(parts.headers.get(http::header::AUTHORIZATION))
            .map(|value| Credential(value.clone()));
        Call {
            api,
            org,
            request_id,
            info,
            outcome: extensions.get::<StreamOutcome>().cloned(),
            session: extensions.get::<SessionId>().cloned(),
            credential,
            started,
            count_later: extensions.get::<CountLater>().cloned(),
        }
    }
}

/// A bearer token: never printed.
#[derive(Clone)]
pub struct Credential(http::HeaderValue);

impl Credential {
    /// The token itself, to send to the auth service and nowhere else.
    pub fn expose(&self) -> Option<&str> {
        svc_core::bearer::token_of(&self.0).ok()
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credential(<redacted>)")
    }
}
