//! `svc agent` arguments.

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand};
use svc_auth_server::store::AgentStatus;
use uuid::Uuid;

use crate::admin::ServerArgs;
use crate::args::{OutputArgs, PageArgs, uuid};

/// `svc agent`.
#[derive(Debug, Clone, Args)]
#[command(
    arg_required_else_help = false,
    about = "Create, list and show agents, and move them between states",
    after_help = "An agent that is not active is refused by the gateway (403 AGENT_SUSPENDED) \
                  from its next request on; archived is final. The admin token needs \
                  agent_manage to create and change agents, agent_read to list and show them."
)]
pub struct AgentArgs {
    /// Where the auth server is, and the admin token.
    #[command(flatten)]
    pub server: ServerArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: AgentCommand,
}

/// The four states, listed in `--help`; the auth server's own names and parser.
fn status() -> impl TypedValueParser<Value = AgentStatus> {
    PossibleValuesParser::new(AgentStatus::ALL.map(AgentStatus::as_str))
        .try_map(|word| word.parse::<AgentStatus>())
}

/// A `svc agent` subcommand.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum AgentCommand {
    /// Create an agent in the admin token's org
    Create {
        /// A label (at most 128 characters)
        #[arg(long)]
        name: Option<String>,
        /// Its first state (default: active)
        #[arg(long, value_parser = status())]
        status: Option<AgentStatus>,
        /// `--json`.
        #[command(flatten)]
        output: OutputArgs,
    },
    /// List the org's agents
    List {
        /// Only the agents in this state
        #[arg(long, value_parser = status())]
        status: Option<AgentStatus>,
        /// One page or every page.
        #[command(flatten)]
        page: PageArgs,
        /// `--json`.
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Show one agent
    Get {
        /// The agent's id
        #[arg(value_name = "AGENT_ID", value_parser = uuid)]
        agent_id: Uuid,
        /// `--json`.
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Pause an agent: the gateway refuses its requests until it is resumed
    Pause(StatusChange),
    /// Make an agent active again
    Resume(StatusChange),
    /// Suspend an agent: the gateway refuses its requests until it is resumed
    Suspend(StatusChange),
    /// Archive an agent for good: no state follows
    Archive(StatusChange),
    /// Set the MCP tools an agent may reach, replacing its list (`server/tool` or `server/*`)
    #[command(
        after_help = "An agent with no tools reaches none. The gateway applies the list from \
                      the agent's next request on, sessions already open included."
    )]
    Tools(ToolsChange),
}

/// `svc agent tools ID PATTERN...` or `svc agent tools ID --clear`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct ToolsChange {
    /// The agent's id
    #[arg(value_name = "AGENT_ID", value_parser = uuid)]
    pub agent_id: Uuid,
    /// The whole new list: `server/tool` grants one tool, `server/*` every tool of a server
    #[arg(
        value_name = "PATTERN",
        required_unless_present = "clear",
        conflicts_with = "clear"
    )]
    pub tools: Vec<String>,
    /// Remove every grant
    #[arg(long)]
    pub clear: bool,
    /// `--json`.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `pause`, `resume`, `suspend` and `archive`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct StatusChange {
    /// The agent's id
    #[arg(value_name = "AGENT_ID", value_parser = uuid)]
    pub agent_id: Uuid,
    /// Why, kept with the agent and in the audit trail (at most 256 characters)
    #[arg(long)]
    pub reason: Option<String>,
    /// `--json`.
    #[command(flatten)]
    pub output: OutputArgs,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Command, try_parse};
    use crate::output::Format;

    fn parse(args: &[&str]) -> Result<AgentCommand, clap::Error> {
        match try_parse(&[&["agent"], args].concat())? {
            Command::Agent(agent) => Ok(agent.command),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn create_and_list_take_a_status() {
        assert_eq!(
            parse(&["create", "--name", "bot", "--status=paused", "--json"]).unwrap(),
            AgentCommand::Create {
                name: Some("bot".into()),
                status: Some(AgentStatus::Paused),
                output: OutputArgs { json: true },
            }
        );
        let AgentCommand::List { status, page, .. } =
            parse(&["list", "--status", "archived", "--page-size", "3"]).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (status, page.page_size),
            (Some(AgentStatus::Archived), Some(3))
        );
    }

    #[test]
    fn status_subcommands_take_an_id_and_a_reason() {
        let id = Uuid::new_v4();
        let change = StatusChange {
            agent_id: id,
            reason: Some("runaway loop".into()),
            output: OutputArgs::default(),
        };
        let args = |name| parse(&[name, &id.to_string(), "--reason", "runaway loop"]).unwrap();
        assert_eq!(args("pause"), AgentCommand::Pause(change.clone()));
        assert_eq!(args("resume"), AgentCommand::Resume(change.clone()));
        assert_eq!(args("suspend"), AgentCommand::Suspend(change.clone()));
        assert_eq!(args("archive"), AgentCommand::Archive(change));
        let AgentCommand::Get { output, .. } = parse(&["get", &id.to_string(), "--json"]).unwrap()
        else {
            panic!()
        };
        assert_eq!(output.format(), Format::Json);
    }

    #[test]
    fn bad_usage_is_refused() {
        for bad in [
            &[][..],
            &["get"],
            &["get", "nope"],
            &["pause"],
            &["resume", "nope"],
            &["create", "--status", "asleep"],
            &["create", "--name"],
            &["list", "--page-size", "0"],
            &["archive", &Uuid::new_v4().to_string(), "--reason"],
        ] {
            parse(bad).expect_err(&format!("{bad:?}"));
        }
    }

    #[test]
    fn tools_takes_patterns_or_clear() {
        let agent = Uuid::new_v4().to_string();
        let AgentCommand::Tools(change) = parse(&["tools", &agent, "srv/echo", "gh/*"]).unwrap()
        else {
            panic!("tools")
        };
        assert_eq!(change.tools, ["srv/echo", "gh/*"]);
        assert!(!change.clear);
        let AgentCommand::Tools(change) = parse(&["tools", &agent, "--clear"]).unwrap() else {
            panic!("tools")
        };
        assert!(change.tools.is_empty() && change.clear);
        assert!(parse(&["tools", &agent]).is_err());
        assert!(parse(&["tools", &agent, "srv/echo", "--clear"]).is_err());
    }
}
