//! `svc agent`: agents of the admin token's org, the kill switch and tool grants
//! (CreateAgent, GetAgent, ListAgents, SetAgentStatus, SetAgentTools). Reached and configured as every admin command is
//! ([`crate::admin`]).

mod args;
mod output;

use svc_auth_server::store::AgentStatus;
use svc_proto::v1::{
    CreateAgentRequest, GetAgentRequest, ListAgentsRequest, SetAgentStatusRequest,
    SetAgentToolsRequest,
};

pub use args::{AgentArgs, AgentCommand, StatusChange, ToolsChange};

use crate::admin::{Admin, Failure};

/// Runs one `svc agent` subcommand and returns what to print.
pub async fn run(admin: &Admin, command: AgentCommand) -> Result<String, Failure> {
    match command {
        AgentCommand::Create {
            name,
            status,
            output,
        } => {
            let request = CreateAgentRequest {
                // Empty: the admin token's org.
                org_id: String::new(),
                name,
                status: status.map(|status| status.as_str().to_owned()),
            };
            let agent = admin
                .call("CreateAgent", request, async |mut client, request| {
                    client.create_agent(request).await
                })
                .await?;
            Ok(output::agent(&agent, output.format()))
        }
        AgentCommand::Get { agent_id, output } => {
            let request = GetAgentRequest {
                agent_id: agent_id.to_string(),
            };
            let agent = admin
                .call("GetAgent", request, async |mut client, request| {
                    client.get_agent(request).await
                })
                .await?;
            Ok(output::agent(&agent, output.format()))
        }
        AgentCommand::List {
            status,
            page,
            output,
        } => {
            let request = ListAgentsRequest {
                status: status.map(|status| status.as_str().to_owned()),
                ..ListAgentsRequest::default()
            };
            let (agents, next) = admin
                .list(
                    "ListAgents",
                    &page,
                    usize::MAX,
                    request,
                    async |mut client, request| client.list_agents(request).await,
                )
                .await?;
            Ok(output::listed(&agents, next.as_deref(), output.format()))
        }
        AgentCommand::Pause(change) => set_status(admin, AgentStatus::Paused, change).await,
        AgentCommand::Resume(change) => set_status(admin, AgentStatus::Active, change).await,
        AgentCommand::Suspend(change) => set_status(admin, AgentStatus::Suspended, change).await,
        AgentCommand::Archive(change) => set_status(admin, AgentStatus::Archived, change).await,
        AgentCommand::Tools(change) => {
            let request = SetAgentToolsRequest {
                agent_id: change.agent_id.to_string(),
                // `--clear` comes with no pattern: an empty list.
                tools: change.tools,
            };
            let agent = admin
                .call("SetAgentTools", request, async |mut client, request| {
                    client.set_agent_tools(request).await
                })
                .await?;
            Ok(output::agent(&agent, change.output.format()))
        }
    }
}

/// Moves an agent to `to`; the gateway sees it on the agent's next request.
async fn set_status(
    admin: &Admin,
    to: AgentStatus,
    change: StatusChange,
) -> Result<String, Failure> {
    let request = SetAgentStatusRequest {
        agent_id: change.agent_id.to_string(),
        status: to.as_str().to_owned(),
        reason: change.reason,
    };
    let agent = admin
        .call("SetAgentStatus", request, async |mut client, request| {
            client.set_agent_status(request).await
        })
        .await?;
    Ok(output::agent(&agent, change.output.format()))
}
