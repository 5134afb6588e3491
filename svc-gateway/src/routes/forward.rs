//! The provider-backed routes (`/v1/chat/completions`, `/v1/embeddings`, `/v1/responses` and
//! their `/proxy` aliases): parse and validate once, then hand over to the idempotency +
//! provider service.
//!
//! By the time this runs the outer layers have authenticated the token, verified the agent,
//! checked the route's permission and counted the request against the org's rate limit
//! (SPEC's processing order).

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use http_body_util::Full;
use svc_tower::body_limit;
use svc_tower::context::OrgContext;
use svc_tower::idempotency::Fingerprint;
use svc_tower::request_id::RequestId;
use tower::ServiceExt;
use tower::util::BoxCloneSyncService;

use uuid::Uuid;

use crate::access_log::CallFacts;
use crate::budget::{CallUsage, CostMeter};
use crate::ledger::{Ledger, UsageRecord};
use crate::request::{ApiRequest, Endpoint};
use crate::session::{Checkpoint, CheckpointWriter, Entry, SessionId};
use crate::token_limit::{Reservation, TokenLimiter};
use crate::usage::{Report, TokenMetrics, UsageReporter};
use crate::validate;

/// The service after validation: Idempotency over the provider.
pub type ForwardService = BoxCloneSyncService<Request<Full<Bytes>>, Response<Body>, Infallible>;

/// What a provider-backed route needs.
#[derive(Clone)]
pub(crate) struct ForwardState {
    pub(crate) endpoint: Endpoint,
    pub(crate) forward: ForwardService,
    pub(crate) checkpoints: Option<CheckpointWriter>,
    pub(crate) ledger: Option<Ledger>,
    pub(crate) token_limit: TokenLimiter,
    pub(crate) tokens: TokenMetrics,
    pub(crate) cost: CostMeter,
    pub(crate) max_body: usize,
}

pub(crate) async fn forward(State(state): State<ForwardState>, request: Request) -> Response {
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    // BodyLimit refuses a declared length up front; reading through the limit here turns a
    // streamed body that grows past it into the same 413.
    let bytes = match body_limit::collect(body, state.max_body).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response_with(Body::empty()),
    };
    let api = match validate::request(state.endpoint, &parts.headers, bytes.clone()) {
        Ok(api) => Arc::new(api),
        Err(error) => return (*error).into_response_with(Body::empty()),
    };
    let org = parts.extensions.get::<OrgContext>().cloned();
    let request_id = parts.extensions.get::<RequestId>().copied();
    let session = parts.extensions.get::<SessionId>().cloned();
    // The call's line in the access log names the model.
    let facts = CallFacts::of(&api);

    // Tokens per minute: the estimate is taken before the provider sees the call.
    let reservation = match &org {
        Some(org) => state.token_limit.reserve(org, &api).await,
        None => None,
    };
    if let Some(refused) = reservation.as_ref().filter(|r| !r.decision.allowed) {
        let mut response = refused
            .decision
            .rejection()
            .into_response_with(Body::empty());
        response.extensions_mut().insert(facts);
        return response;
    }

    // The report (a JSON answer's before its head is back here, a stream's at its end) and
    // the call's facts meet in `meeting`; whichever comes second records the call. The
    // reservation settles to the report, or to nothing when no provider answered.
    let meeting = Meeting::new();
    let settle = Settle(
        reservation
            .filter(|r| r.budget.is_limited())
            .map(|r| (state.token_limit.clone(), r)),
    );
    let reporter = {
        let meeting = meeting.clone();
        let tokens = state.tokens.clone();
        let (cost, model) = (state.cost.clone(), api.clone());
        UsageReporter::new(move |report| {
            if let Some(usage) = &report.usage {
                tokens.record(usage);
            }
            cost.observe(&model.model, &report);
            settle.to(Some(&report));
            Meeting::report(&meeting, report);
        })
    };
    // Idempotency fingerprints what was parsed here instead of parsing the body again.
    let fingerprint = parts
        .headers
        .contains_key(&validate::IDEMPOTENCY_KEY)
        .then(|| Fingerprint::of_object(&parts.method, state.endpoint.route(), &api.json));
    let mut inner = Request::from_parts(parts, Full::new(bytes));
    if let Some(fingerprint) = fingerprint {
        inner.extensions_mut().insert(fingerprint);
    }
    inner.extensions_mut().insert(api.clone());
    inner.extensions_mut().insert(reporter);
    let mut response = match state.forward.oneshot(inner).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    if let Some(reservation) = &reservation {
        reservation.decision.set_headers(response.headers_mut());
    }
    response.extensions_mut().insert(facts);

    let call = Call {
        api,
        status: response.status().as_u16(),
        latency_ms: i32::try_from(started.elapsed().as_millis()).unwrap_or(i32::MAX),
        at: chrono::Utc::now(),
    };
    if let Some(org) = org {
        let checkpoint = match (state.checkpoints, session, request_id) {
            (Some(writer), Some(session), Some(request_id)) => Some((writer, session, request_id)),
            _ => None,
        };
        if checkpoint.is_some() || state.ledger.is_some() {
            let account = Account {
                org,
                checkpoint,
                ledger: state.ledger.map(|ledger| (ledger, state.cost)),
                call,
            };
            Meeting::account(&meeting, account);
        }
    }
    response
}

/// The facts of one call known when its head went out.
struct Call {
    api: Arc<ApiRequest>,
    status: u16,
    latency_ms: i32,
    at: chrono::DateTime<chrono::Utc>,
}

/// Where the record of one call goes, and what it says.
struct Account {
    org: OrgContext,
    /// The session checkpoint's writer, session and request, when the call has a session.
    checkpoint: Option<(CheckpointWriter, SessionId, RequestId)>,
    /// The ledger, and the meter that prices the call for it.
    ledger: Option<(Ledger, CostMeter)>,
    call: Call,
}

/// A reservation to settle once, to the call's report; dropped unsettled (the provider never
/// answered) it settles to nothing. Settling waits on the store, so it runs on its own task,
/// and only when a token limit applies.
struct Settle(Option<(TokenLimiter, Reservation)>);

impl Settle {
    fn to(mut self, report: Option<&Report>) {
        if let Some((limiter, reservation)) = self.0.take() {
            let report = report.cloned();
            let settle = async move { limiter.settle(&reservation, report.as_ref()).await };
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(settle);
            }
        }
    }
}

impl Drop for Settle {
    fn drop(&mut self) {
        if self.0.is_some() {
            Settle(self.0.take()).to(None);
        }
    }
}

/// A call's report and its [`Account`], whichever arrives first waiting for the other. A
/// request the provider never saw (a replay, an idempotency conflict) reports nothing and
/// records nothing.
#[derive(Default)]
struct Meeting {
    report: Option<Report>,
    account: Option<Account>,
}

impl Meeting {
    fn new() -> Arc<Mutex<Meeting>> {
        Arc::default()
    }

    fn report(meeting: &Mutex<Meeting>, report: Report) {
        Meeting::with(meeting, |m| m.report = Some(report));
    }

    fn account(meeting: &Mutex<Meeting>, account: Account) {
        Meeting::with(meeting, |m| m.account = Some(account));
    }

    fn with(meeting: &Mutex<Meeting>, update: impl FnOnce(&mut Meeting)) {
        let mut m = meeting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        update(&mut m);
        // Both taken only when both are there: the first to arrive waits for the other.
        if m.report.is_some()
            && m.account.is_some()
            && let (Some(report), Some(account)) = (m.report.take(), m.account.take())
        {
            record(account, report);
        }
    }
}

/// Records the call in the ledger and queues its session checkpoint.
fn record(account: Account, report: Report) {
    let Account {
        org,
        checkpoint,
        ledger,
        call,
    } = account;
    if let Some((ledger, meter)) = ledger {
        let api = &call.api;
        let usage = CallUsage::of(&report, || {
            crate::token_estimate::prompt_tokens(&api.json, api.message_count)
        });
        let cost_usd_micros = meter.cost(&api.model, usage);
        ledger.record(UsageRecord {
            record_id: Uuid::now_v7(),
            org_id: org.org_id,
            token_id: org.token_id,
            agent_id: org.agent_id,
            model: call.api.model.clone(),
            provider: report.provider.clone(),
            prompt_tokens: report.usage.map_or(0, |u| u.prompt_tokens),
            completion_tokens: report.usage.map_or(0, |u| u.completion_tokens),
            status: call.status,
            latency_ms: u32::try_from(call.latency_ms).unwrap_or(0),
            at: call.at,
            tool: None,
            cost_usd_micros,
        });
    }
    let Some((writer, session, request_id)) = checkpoint else {
        return;
    };
    let checkpoint = Checkpoint {
        request_id: request_id.uuid(),
        model: call.api.model.clone(),
        message_count: i32::try_from(call.api.message_count).unwrap_or(i32::MAX),
        status: call.status,
        latency_ms: call.latency_ms,
        stream: call.api.stream,
        usage: report.usage,
    };
    writer.submit(Entry {
        org_id: org.org_id,
        agent_id: org.agent_id,
        session_id: session.as_str().to_owned(),
        checkpoint,
    });
}
