//! CreateAgent, GetAgent, ListAgents, SetAgentStatus and SetAgentTools: the org's agents,
//! their kill switch and the MCP tools they may reach.
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
/// Most tool grants one agent holds.
pub(super) const MAX_TOOL_GRANTS: usize = 256;
/// Longest MCP server name in a grant (the gateway's registry allows no longer).
pub(super) const MAX_GRANT_SERVER_CHARS: usize = 64;
/// Longest tool name in a grant (the MCP specification's limit).
pub(super) const MAX_GRANT_TOOL_CHARS: usize = 128;

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

pub(super) const SET_TOOLS: Op = Op::act(
    "SetAgentTools",
    Permissions::AGENT_MANAGE,
    "AGENT_MANAGE",
    AuditAction::AgentTools,
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

pub(super) async fn set_tools<S: Store>(
    store: &S,
    caller: &ValidToken,
    req: v1::SetAgentToolsRequest,
) -> Result<v1::Agent, Status> {
    let agent_id = parse_id("agent_id", &req.agent_id)?;
    if req.tools.len() > MAX_TOOL_GRANTS {
        return Err(Status::invalid_argument(format!(
            "tools: at most {MAX_TOOL_GRANTS} grants"
        )));
    }
    let mut tools: Vec<String> = Vec::with_capacity(req.tools.len());
    for (i, pattern) in req.tools.into_iter().enumerate() {
        check_grant(&pattern)
            .map_err(|reason| Status::invalid_argument(format!("tools[{i}]: {reason}")))?;
        if !tools.contains(&pattern) {
            tools.push(pattern);
        }
    }
    let audit = AuditEntry::ok(Some(caller.token_id), AuditAction::AgentTools).target(agent_id);
    let count = tools.len();
    let changed = store
        .set_agent_tools(caller.org_id, agent_id, tools, audit)
        .await
        .map_err(|e| status::store_error(SET_TOOLS.name, e))?
        .ok_or_else(not_in_org)?;
    tracing::info!(
        %agent_id,
        org_id = %caller.org_id,
        grants = count,
        changed_by = %caller.token_id,
        "agent tools set"
    );
    Ok(agent(changed))
}

/// `server/tool` or `server/*`: a server name of letters, digits, `-` and `_`, and a tool name
/// of letters, digits, `-`, `_` and `.` (the MCP specification's tool name characters).
fn check_grant(pattern: &str) -> Result<(), String> {
    let Some((server, tool)) = pattern.split_once('/') else {
        return Err(format!("{pattern:?} is not server/tool or server/*"));
    };
    let server_ok = (1..=MAX_GRANT_SERVER_CHARS).contains(&server.len())
        && server
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'));
    if !server_ok {
        return Err(format!(
            "{pattern:?}: the server must be 1 to {MAX_GRANT_SERVER_CHARS} letters, digits, '-' or '_'"
        ));
    }
    let tool_ok = tool == "*"
        || ((1..=MAX_GRANT_TOOL_CHARS).contains(&tool.len())
            && tool
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')));
    if !tool_ok {
        return Err(format!(
            "{pattern:?}: the tool must be * or 1 to {MAX_GRANT_TOOL_CHARS} letters, digits, '-', '_' or '.'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_grant;

    #[test]
    fn grants_are_server_slash_tool_or_star() {
        for ok in ["srv/echo", "github/*", "a_b-c/get.issue-1"] {
            assert_eq!(check_grant(ok), Ok(()), "{ok}");
        }
        for bad in [
            "srv", "/echo", "srv/", "srv/a b", "s.v/echo", "srv/ec*", "srv/a/b", "*/echo",
        ] {
            assert!(check_grant(bad).is_err(), "{bad}");
        }
    }
}
