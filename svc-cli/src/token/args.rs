//! `svc token` arguments: `create`, `list` and `revoke`, each with `--json`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use svc_tower::context::Permissions;
use uuid::Uuid;

use super::permissions;
use crate::admin::ServerArgs;
use crate::args::{OutputArgs, PageArgs, positive, positive_duration, rfc3339, uuid};

/// `svc token`.
#[derive(Debug, Clone, Args)]
#[command(
    arg_required_else_help = false,
    about = "Create, list and revoke tokens on an auth server",
    after_help = "create defaults to --permissions chat, the admin token's org and no expiry; \
                  list without --page-size or --page-token prints every page."
)]
pub struct TokenArgs {
    /// Where the auth server is, and the admin token.
    #[command(flatten)]
    pub server: ServerArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: TokenCommand,
}

/// A `svc token` subcommand.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum TokenCommand {
    /// Mint a token; its plaintext is printed once
    Create(CreateArgs),
    /// List the org's tokens (metadata only: never a secret)
    List {
        /// One page or every page.
        #[command(flatten)]
        page: PageArgs,
        /// `--json`.
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Revoke a token by id, and every token it issued (revoking it again is not an error)
    Revoke {
        /// The token's id
        #[arg(value_name = "TOKEN_ID", value_parser = uuid)]
        token_id: Uuid,
        /// Keep the tokens it issued valid (a deliberate rotation)
        #[arg(long)]
        keep_issued: bool,
        /// `--json`.
        #[command(flatten)]
        output: OutputArgs,
    },
}

/// When a new token expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Never.
    Never,
    /// This long after the command runs.
    In(Duration),
    /// At this instant.
    At(DateTime<Utc>),
}

/// What `create` asks for.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct CreateArgs {
    /// The org (default: the admin token's)
    #[arg(long, value_name = "UUID", value_parser = uuid)]
    pub org_id: Option<Uuid>,
    /// What the token may do: names (chat, embeddings, token_create, token_revoke, token_list,
    /// usage_read, agent_manage, agent_read, user_manage, audit_read), comma-separated, or an
    /// integer bitmap
    #[arg(
        long,
        value_name = "NAMES|BITS",
        default_value = "chat",
        value_parser = permissions::parse
    )]
    pub permissions: Permissions,
    /// Binds the token to an agent of the org
    #[arg(long, value_name = "UUID", value_parser = uuid)]
    pub agent_id: Option<Uuid>,
    /// The user the token belongs to
    #[arg(long, value_name = "UUID", value_parser = uuid)]
    pub user_id: Option<Uuid>,
    /// Expires this long after now (90m, 720h)
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = positive_duration,
        conflicts_with = "expires_at"
    )]
    pub expires_in: Option<Duration>,
    /// Expires at this instant (2027-01-31T12:00:00Z)
    #[arg(long, value_name = "RFC3339", value_parser = rfc3339)]
    pub expires_at: Option<DateTime<Utc>>,
    /// A label
    #[arg(long)]
    pub name: Option<String>,
    /// The token's own requests per minute (at most the admin token's)
    #[arg(long, value_name = "N", value_parser = positive::<u32>)]
    pub rpm: Option<u32>,
    /// The token's own tokens per minute (at most the admin token's)
    #[arg(long, value_name = "N", value_parser = positive::<u64>)]
    pub tpm: Option<u64>,
    /// `--json`.
    #[command(flatten)]
    pub output: OutputArgs,
}

impl CreateArgs {
    /// When the token expires.
    pub fn expiry(&self) -> Expiry {
        match (self.expires_in, self.expires_at) {
            (Some(duration), _) => Expiry::In(duration),
            (None, Some(at)) => Expiry::At(at),
            (None, None) => Expiry::Never,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Command, try_parse};
    use crate::output::Format;

    fn parse(args: &[&str]) -> Result<TokenCommand, clap::Error> {
        match try_parse(&[&["token"], args].concat())? {
            Command::Token(token) => Ok(token.command),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn create_takes_its_flags_in_either_form() {
        let agent = Uuid::new_v4();
        let command = parse(&[
            "create",
            "--permissions=chat,embeddings",
            "--agent-id",
            &agent.to_string(),
            "--expires-in",
            "1h",
            "--name",
            "ci",
            "--rpm",
            "30",
            "--tpm=40000",
            "--json",
        ])
        .unwrap();
        let TokenCommand::Create(create) = command else {
            panic!("{command:?}")
        };
        assert_eq!(create.output.format(), Format::Json);
        assert_eq!(create.permissions.bits(), 0b1_0001);
        assert_eq!(create.agent_id, Some(agent));
        assert_eq!(create.expiry(), Expiry::In(Duration::from_secs(3600)));
        assert_eq!(create.name.as_deref(), Some("ci"));
        assert_eq!(create.org_id, None);
        assert_eq!((create.rpm, create.tpm), (Some(30), Some(40_000)));
    }

    #[test]
    fn create_defaults_to_chat_without_expiry() {
        let TokenCommand::Create(create) = parse(&["create"]).unwrap() else {
            panic!()
        };
        assert_eq!(create.permissions, Permissions::CHAT_COMPLETIONS);
        assert_eq!(create.expiry(), Expiry::Never);
        assert_eq!(create.output.format(), Format::Human);
    }

    #[test]
    fn list_and_revoke_parse() {
        assert_eq!(
            parse(&["list"]).unwrap(),
            TokenCommand::List {
                page: PageArgs::default(),
                output: OutputArgs::default(),
            }
        );
        assert_eq!(
            parse(&["list", "--page-size", "2", "--page-token=abc"]).unwrap(),
            TokenCommand::List {
                page: PageArgs {
                    page_size: Some(2),
                    page_token: Some("abc".into()),
                },
                output: OutputArgs::default(),
            }
        );
        let id = Uuid::new_v4();
        assert_eq!(
            parse(&["revoke", &id.to_string()]).unwrap(),
            TokenCommand::Revoke {
                token_id: id,
                keep_issued: false,
                output: OutputArgs::default(),
            }
        );
        assert_eq!(
            parse(&["revoke", &id.to_string(), "--keep-issued"]).unwrap(),
            TokenCommand::Revoke {
                token_id: id,
                keep_issued: true,
                output: OutputArgs::default(),
            }
        );
    }

    #[test]
    fn a_flag_is_never_taken_as_a_value() {
        // `--name` needs a value and `--json` is a flag: this is bad usage, not a token named
        // "--json".
        let error = parse(&["create", "--name", "--json"]).unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::InvalidValue);
    }

    #[test]
    fn bad_usage_is_refused() {
        for bad in [
            &[][..],
            &["mint"],
            &["create", "--permissions", "root"],
            &["create", "--agent-id", "nope"],
            &[
                "create",
                "--expires-in",
                "1h",
                "--expires-at",
                "2030-01-01T00:00:00Z",
            ],
            &["create", "--expires-in", "60"],
            &["create", "--expires-in", "0s"],
            &["create", "--expires-at", "tomorrow"],
            &["create", "--name"],
            &["create", "extra"],
            &["list", "--page-size", "0"],
            &["create", "--rpm", "0"],
            &["create", "--tpm", "-5"],
            &["create", "--rpm", "5000000000"],
            &["list", "--all"],
            &["revoke"],
            &["revoke", "not-a-uuid"],
        ] {
            parse(bad).expect_err(&format!("{bad:?}"));
        }
    }
}
