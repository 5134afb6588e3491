//! CreateAgent, GetAgent, ListAgents and SetAgentStatus: the org's agents and their kill
//! switch.
//!
//! A status change is one row update; ValidateToken reads the agent's row on every request
//! and nothing caches it, so a paused agent's next request on any gateway is refused, and a
//! resumed agent's next request passes.

use svc_core::permissions::Permissions;
use svc_proto::v1;
use tonic::Status;
use uuid::Uuid;

use super::access::{Op, own_org};
use super::convert::{agent, encode_cursor, optional_text, page_cursor, parse_id};
use super::{MAX_DISPLAY_NAME_CHARS, next_page, page_size, status};
use crate::store::{AgentStatus, AuditAction, AuditEntry, NewAgent, Store};
use crate::verify::ValidToken;

/// Longest reason given with a status change, in characters.
pub const MAX_REASON_CHARS: usize = 256;

pub(super) const CREATE: Op = Op::act(
    "CreateAgent",
    Permissions::AGENT_MANAGE,
    "AGENT_MANAGE",
    AuditAction::AgentCreate,
);
pub(super) const GET: Op = Op::read("GetAgent", Permissions::AGENT_READ, "AGENT_READ");
pub(super) const LIST: Op = Op::read("ListAgents", Permissions::AGENT_READ, "AGENT_READ");
pub(super) const SET_STATUS: Op = Op::act(
    "SetAgentStatus",
    Permissions::AGENT_MANAGE,
    "AGENT_MANAGE",
    AuditAction::AgentStatus,
);

/// An agent unknown in the caller's org: the same answer whether it exists elsewhere or not.
fn not_in_org() -> Status {
    Status::permission_denied("no such agent in the caller's org")
}

/// A status word, or InvalidArgument naming the field.
fn parse_status(field: &'static str, word: &str) -> Result<AgentStatus, Status> {
    word.parse()
        .map_err(|e| Status::invalid_argument(format!("{field}: {e}")))
}

pub(super) async fn create<S: Store>(
    store: &S,
    caller: &ValidToken,
    req: v1::CreateAgentRequest,
) -> Result<v1::Agent, Status> {
    let org_id = own_org(caller, &req.org_id)?;
    let name = optional_text("name", req.name, MAX_DISPLAY_NAME_CHARS)?;
    let status = match req.status.as_deref() {
        None | Some("") => AgentStatus::Active,
        Some(word) => parse_status("status", word)?,
    };
    let agent_id = Uuid::new_v4();
    let audit = AuditEntry::ok(Some(caller.token_id), AuditAction::AgentCreate)
        .target(agent_id)
        .detail("status", status.as_str());
    let created = store
        .create_agent(
            org_id,
            NewAgent {
                agent_id,
                status,
                name,
            },
            Some(audit),
        )
        .await
        .map_err(|e| status::store_error(CREATE.name, e))?;
    tracing::info!(%agent_id, %org_id, created_by = %caller.token_id, "agent created");
    Ok(agent(created))
}

pub(super) async fn get<S: Store>(
    store: &S,
    caller: &ValidToken,
    req: &v1::GetAgentRequest,
) -> Result<v1::Agent, Status> {
    let agent_id = parse_id("agent_id", &req.agent_id)?;
    store
        .agent_detail(caller.org_id, agent_id)
        .await
        .map_err(|e| status::store_error(GET.name, e))?
        .map(agent)
        .ok_or_else(not_in_org)
}

pub(super) async fn list<S: Store>(
    store: &S,
    caller: &ValidToken,
    req: &v1::ListAgentsRequest,
) -> Result<v1::ListAgentsResponse, Status> {
    let status = match req.status.as_deref() {
        None | Some("") => None,
        Some(word) => Some(parse_status("status", word)?),
    };
    let size = page_size(req.page_size);
    let after = page_cursor(&req.page_token)?;
    let agents = store
        .list_agents(caller.org_id, status, after, size + 1)
        .await
        .map_err(|e| status::store_error(LIST.name, e))?;
    let (agents, next_page_token) = next_page(agents, size, |last| encode_cursor(last.cursor()));
    Ok(v1::ListAgentsResponse {
        agents: agents.into_iter().map(agent).collect(),
        next_page_token,
    })
}

pub(super) async fn set_status<S: Store>(
    store: &S,
    caller: &ValidToken,
    req: v1::SetAgentStatusRequest,
) -> Result<v1::Agent, Status> {
    let agent_id = parse_id("agent_id", &req.agent_id)?;
    let to = parse_status("status", &req.status)?;
    let reason = optional_text("reason", req.reason, MAX_REASON_CHARS)?;
    let mut audit =
        AuditEntry::ok(Some(caller.token_id), AuditAction::AgentStatus).target(agent_id);
    if let Some(reason) = &reason {
        audit = audit.detail("reason", reason.clone());
    }
    let moved = store
        .set_agent_status(caller.org_id, agent_id, to, reason, audit)
        .await
        .map_err(|e| status::store_error(SET_STATUS.name, e))?
        .ok_or_else(not_in_org)?;
    tracing::info!(
        %agent_id,
        org_id = %caller.org_id,
        status = to.as_str(),
        changed_by = %caller.token_id,
        "agent status set"
    );
    Ok(agent(moved))
}
