//! The handler of `/mcp/{server}`: one client request to one registered server, grants and
//! sessions applied on the way.

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::response::Response;
use bytes::Bytes;
use http::header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::Value;
use svc_tower::body_limit;
use svc_tower::context::{AgentVerdict, OrgContext};
use svc_tower::error::{ApiError, ErrorCode};
use tokio::time::Instant;
use uuid::Uuid;

use super::grants::Grants;
use super::messages::{self, Ask, Outcome};
use super::sessions::McpSession;
use super::sse::{Events, OnEvent};
use super::{MCP_SESSION_ID, McpMetrics, McpState, Upstream};
use crate::ledger::{Ledger, UsageRecord};
use svc_runtime::usage::ToolCall;

/// The transport's protocol version header, passed on.
static MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// Resuming a stream, passed on.
static LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
/// The largest JSON answer the gateway reads to filter or to learn a call's outcome.
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// `POST`, `GET` or `DELETE /mcp/{server}`.
pub(crate) async fn handle(
    State(state): State<McpState>,
    Path(server): Path<String>,
    request: Request,
) -> Response {
    match proxy(&state, &server, request).await {
        Ok(response) => response,
        Err(error) => error.into_response_with(Body::empty()),
    }
}

/// Who is asking, as the stack before the handler established it.
struct Caller {
    org: Uuid,
    token: Uuid,
    agent: Option<Uuid>,
    grants: Grants,
}

// An ApiError is the handler's one error type; these run once per request, off any hot loop.
#[allow(clippy::result_large_err)]
fn caller(request: &Request) -> Result<Caller, ApiError> {
    let context = request
        .extensions()
        .get::<OrgContext>()
        .ok_or_else(|| ApiError::new(ErrorCode::MissingToken))?;
    // The grants ValidateToken answered for the agent AgentCheck verified; none otherwise.
    let grants = request
        .extensions()
        .get::<AgentVerdict>()
        .filter(|verdict| Some(verdict.agent_id) == context.agent_id)
        .map(|verdict| Grants::new(verdict.tools.clone()))
        .unwrap_or_default();
    Ok(Caller {
        org: context.org_id,
        token: context.token_id,
        agent: context.agent_id,
        grants,
    })
}

fn store_error(error: svc_tower::store::StoreError) -> ApiError {
    tracing::warn!(error = %error, "MCP session store failed");
    ApiError::new(ErrorCode::ServiceDegraded)
}

async fn proxy(state: &McpState, server: &str, request: Request) -> Result<Response, ApiError> {
    let started = Instant::now();
    let upstream = state
        .servers
        .servers
        .get(server)
        .ok_or_else(|| ApiError::new(ErrorCode::NotFound))?;
    let caller = caller(&request)?;
    // The client's session id names a session of its org on this server, or nothing at all.
    let session = match request.headers().get(&MCP_SESSION_ID) {
        None => None,
        Some(value) => {
            let id = value
                .to_str()
                .map_err(|_| ApiError::new(ErrorCode::NotFound))?;
            match state.sessions.find(caller.org, id).await {
                Ok(Some(found)) if found.server == server => Some((id.to_owned(), found)),
                Ok(_) => return Err(ApiError::new(ErrorCode::NotFound)),
                Err(error) => return Err(store_error(error)),
            }
        }
    };
    let (parts, body) = request.into_parts();
    let body = match parts.method {
        Method::POST => body_limit::collect(body, usize::MAX).await?,
        _ => Bytes::new(),
    };
    let ask = if parts.method == Method::POST {
        messages::ask(&body)
    } else {
        Ask::Other
    };
    let mut recorder = None;
    match &ask {
        Ask::ToolBatch => return Ok(json_answer(&messages::batch_refused())),
        Ask::CallTool { id, tool } => {
            let call = Recorder {
                metrics: state.metrics.clone(),
                ledger: state.ledger.clone(),
                server: server.to_owned(),
                tool: format!("{server}/{tool}"),
                org: caller.org,
                token: caller.token,
                agent: caller.agent,
                at: chrono::Utc::now(),
                started,
            };
            if !caller.grants.allows(server, tool) {
                call.record(Outcome::Denied);
                return Ok(json_answer(&messages::unknown_tool(id, tool)));
            }
            recorder = Some(call);
        }
        Ask::ListTools { .. } | Ask::Other => {}
    }

    let outbound = outbound(
        upstream,
        &parts.method,
        &parts.headers,
        session.as_ref(),
        body,
    )?;
    let answer = send(state, upstream, outbound).await?;
    let (mut head, incoming) = answer.into_parts();

    // The server's session id is swapped for the gateway's.
    let mut client_session = session.as_ref().map(|(id, _)| id.clone());
    if let Some(upstream_id) = head.headers.get(&MCP_SESSION_ID)
        && client_session.is_none()
        && let Ok(upstream_id) = upstream_id.to_str()
    {
        let opened = McpSession {
            server: server.to_owned(),
            upstream: upstream_id.to_owned(),
        };
        client_session = Some(
            state
                .sessions
                .open(caller.org, &opened)
                .await
                .map_err(store_error)?,
        );
    }
    // A session the server ended (DELETE) or no longer knows (404) ends here too.
    if let Some((id, _)) = &session
        && (parts.method == Method::DELETE || head.status == StatusCode::NOT_FOUND)
        && let Err(error) = state.sessions.close(caller.org, id).await
    {
        tracing::warn!(error = %error, "MCP session not forgotten");
    }

    let mut response = Response::builder().status(head.status);
    for name in [&CONTENT_TYPE, &CACHE_CONTROL] {
        if let Some(value) = head.headers.remove(name) {
            response = response.header(name, value);
        }
    }
    if let Some(id) = client_session.as_deref()
        && let Ok(value) = HeaderValue::from_str(id)
        && parts.method != Method::DELETE
    {
        response = response.header(&MCP_SESSION_ID, value);
    }
    let streamed = response
        .headers_ref()
        .and_then(|headers| headers.get(CONTENT_TYPE))
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"));
    let on_event: Option<Box<dyn OnEvent>> = match ask {
        _ if !head.status.is_success() => None,
        Ask::ListTools { id } => Some(Box::new(ListFilter {
            id,
            server: server.to_owned(),
            grants: caller.grants,
        })),
        Ask::CallTool { id, .. } => recorder.take().map(|recorder| {
            Box::new(CallWatch {
                id,
                recorder: Some(recorder),
            }) as Box<dyn OnEvent>
        }),
        Ask::ToolBatch | Ask::Other => None,
    };
    // A call the server refused at the HTTP level has its outcome now.
    if let Some(recorder) = recorder.take() {
        recorder.record(Outcome::Error);
    }
    let body = match on_event {
        None => Body::new(incoming),
        Some(on_event) if streamed => {
            Body::from_stream(Events::new(incoming.into_data_stream(), on_event))
        }
        Some(mut on_event) => {
            let read = tokio::time::timeout(
                upstream.timeout,
                http_body_util::Limited::new(incoming, MAX_ANSWER_BYTES).collect(),
            )
            .await;
            let bytes = match read {
                Ok(Ok(collected)) => collected.to_bytes(),
                Ok(Err(_)) => return Err(ApiError::new(ErrorCode::ProviderUnavailable)),
                Err(_) => return Err(ApiError::new(ErrorCode::ProviderTimeout)),
            };
            match std::str::from_utf8(&bytes)
                .ok()
                .and_then(|text| on_event.on_data(text))
            {
                Some(replaced) => Body::from(replaced),
                None => Body::from(bytes),
            }
        }
    };
    response
        .body(body)
        .map_err(|_| ApiError::new(ErrorCode::InternalError))
}

/// The request to the server: the transport's headers from the client, the server's session
/// id, and the headers the registry entry names. Nothing else of the client's goes.
#[allow(clippy::result_large_err)]
fn outbound(
    upstream: &Upstream,
    method: &Method,
    client: &HeaderMap,
    session: Option<&(String, McpSession)>,
    body: Bytes,
) -> Result<http::Request<Full<Bytes>>, ApiError> {
    let mut builder = http::Request::builder()
        .method(method.clone())
        .uri(upstream.uri.clone());
    for name in [
        &CONTENT_TYPE,
        &ACCEPT,
        &MCP_PROTOCOL_VERSION,
        &LAST_EVENT_ID,
    ] {
        for value in client.get_all(name) {
            builder = builder.header(name, value);
        }
    }
    if let Some((_, session)) = session {
        let value = HeaderValue::from_str(&session.upstream)
            .map_err(|_| ApiError::new(ErrorCode::NotFound))?;
        builder = builder.header(&MCP_SESSION_ID, value);
    }
    for (name, value) in &upstream.headers {
        builder = builder.header(name, value.clone());
    }
    builder
        .body(Full::new(body))
        .map_err(|_| ApiError::new(ErrorCode::InternalError))
}

/// Sends `outbound`, bounded by the server's timeout until the answer's head.
async fn send(
    state: &McpState,
    upstream: &Upstream,
    outbound: http::Request<Full<Bytes>>,
) -> Result<http::Response<hyper::body::Incoming>, ApiError> {
    match tokio::time::timeout(upstream.timeout, state.servers.client.request(outbound)).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(error)) => {
            tracing::warn!(server = %upstream.name, error = %error, "MCP server unreachable");
            Err(ApiError::new(ErrorCode::ProviderUnavailable))
        }
        Err(_) => Err(ApiError::new(ErrorCode::ProviderTimeout)),
    }
}

/// A JSON-RPC answer of the gateway's own.
fn json_answer(message: &Value) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header(CONTENT_TYPE, "application/json")
        .body(Body::from(message.to_string()))
        .unwrap_or_default()
}

/// Records one tool call once its outcome is known: the ledger and the metric.
struct Recorder {
    metrics: McpMetrics,
    ledger: Option<Ledger>,
    server: String,
    /// `server/tool`.
    tool: String,
    org: Uuid,
    token: Uuid,
    agent: Option<Uuid>,
    at: chrono::DateTime<chrono::Utc>,
    started: Instant,
}

impl Recorder {
    fn record(self, outcome: Outcome) {
        self.metrics.count(&self.server, outcome);
        let latency_ms = u32::try_from(self.started.elapsed().as_millis()).unwrap_or(u32::MAX);
        tracing::debug!(
            server = %self.server,
            outcome = outcome.as_str(),
            latency_ms,
            "MCP tool call"
        );
        let Some(ledger) = self.ledger else {
            return;
        };
        ledger.record(UsageRecord {
            record_id: svc_core::id::uuid_v7(),
            org_id: self.org,
            token_id: self.token,
            agent_id: self.agent,
            model: String::new(),
            provider: self.server,
            prompt_tokens: 0,
            completion_tokens: 0,
            status: if outcome == Outcome::Denied { 403 } else { 200 },
            latency_ms,
            at: self.at,
            tool: Some(ToolCall {
                tool: self.tool,
                outcome: outcome.as_str(),
            }),
            // A tool call has no price.
            cost_usd_micros: 0,
        });
    }
}

/// Keeps the granted tools of a `tools/list` answer.
struct ListFilter {
    id: Value,
    server: String,
    grants: Grants,
}

impl OnEvent for ListFilter {
    fn on_data(&mut self, data: &str) -> Option<String> {
        messages::filter_tools(data, &self.id, &self.server, &self.grants)
    }
}

/// Watches a `tools/call` answer for its outcome; an answer that ends without one is an error.
struct CallWatch {
    id: Value,
    recorder: Option<Recorder>,
}

impl OnEvent for CallWatch {
    fn on_data(&mut self, data: &str) -> Option<String> {
        if let Some(outcome) = messages::call_outcome(data, &self.id)
            && let Some(recorder) = self.recorder.take()
        {
            recorder.record(outcome);
        }
        None
    }
}

impl Drop for CallWatch {
    fn drop(&mut self) {
        if let Some(recorder) = self.recorder.take() {
            recorder.record(Outcome::Error);
        }
    }
}

impl OnEvent for Box<dyn OnEvent> {
    fn on_data(&mut self, data: &str) -> Option<String> {
        (**self).on_data(data)
    }
}
