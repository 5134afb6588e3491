//! What `svc agent` prints: one aligned line per agent, or the agent (or `{"agents": [...]}`)
//! as JSON with the proto's field names.

use serde_json::{Value, json};
use svc_proto::v1::Agent;

use crate::output::{Format, Table, json_line, time, time_or};

fn json(agent: &Agent) -> Value {
    json!({
        "agent_id": agent.agent_id,
        "org_id": agent.org_id,
        "name": agent.name,
        "status": agent.status,
        "created_at": time(agent.created_at.as_ref()),
        "updated_at": time(agent.updated_at.as_ref()),
        "status_reason": agent.status_reason,
        "tools": agent.tools,
    })
}

fn table<'a>(agents: impl IntoIterator<Item = &'a Agent>, next: Option<&str>) -> String {
    let mut table = Table::new(&[
        ("AGENT ID", 36),
        ("NAME", 20),
        ("STATUS", 9),
        ("CREATED", 20),
        ("UPDATED", 20),
        ("REASON", 24),
        ("TOOLS", 0),
    ]);
    for agent in agents {
        table.row(&[
            agent.agent_id.as_str(),
            agent.name.as_deref().unwrap_or("-"),
            &agent.status,
            &time_or(agent.created_at.as_ref(), "-"),
            &time_or(agent.updated_at.as_ref(), "-"),
            agent.status_reason.as_deref().unwrap_or("-"),
            &tools(agent),
        ]);
    }
    table.finish(next)
}

/// The grants, comma-separated, or `-`.
fn tools(agent: &Agent) -> String {
    if agent.tools.is_empty() {
        "-".to_owned()
    } else {
        agent.tools.join(",")
    }
}

/// One agent: created, shown or moved.
pub(crate) fn agent(agent: &Agent, format: Format) -> String {
    match format {
        Format::Json => json_line(&json(agent)),
        Format::Human => table([agent], None),
    }
}

/// `list`.
pub(crate) fn listed(agents: &[Agent], next: Option<&str>, format: Format) -> String {
    match format {
        Format::Json => json_line(&json!({
            "agents": agents.iter().map(json).collect::<Vec<_>>(),
            "next_page_token": next,
        })),
        Format::Human => table(agents, next),
    }
}
