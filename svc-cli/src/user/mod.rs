//! `svc user create | list`: the users of the admin token's org (CreateUser, ListUsers), to
//! whom tokens can belong (`svc token create --user-id`). Reached and configured as every
//! admin command is ([`crate::admin`]).

mod output;

use clap::{Args, Subcommand};
use svc_proto::v1::{CreateUserRequest, ListUsersRequest};

use crate::admin::{Admin, Failure, ServerArgs};
use crate::args::{OutputArgs, PageArgs};

/// `svc user`.
#[derive(Debug, Clone, Args)]
#[command(
    arg_required_else_help = false,
    about = "Create and list the org's users",
    after_help = "The admin token needs user_manage."
)]
pub struct UserArgs {
    /// Where the auth server is, and the admin token.
    #[command(flatten)]
    pub server: ServerArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: UserCommand,
}

/// A `svc user` subcommand.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum UserCommand {
    /// Create a user in the admin token's org
    Create {
        /// A label (at most 128 characters)
        #[arg(long)]
        name: Option<String>,
        /// `--json`.
        #[command(flatten)]
        output: OutputArgs,
    },
    /// List the org's users
    List {
        /// One page or every page.
        #[command(flatten)]
        page: PageArgs,
        /// `--json`.
        #[command(flatten)]
        output: OutputArgs,
    },
}

/// Runs one `svc user` subcommand and returns what to print.
pub async fn run(admin: &Admin, command: UserCommand) -> Result<String, Failure> {
    match command {
        UserCommand::Create { name, output } => {
            let request = CreateUserRequest {
                // Empty: the admin token's org.
                org_id: String::new(),
                name,
            };
            let user = admin
                .call("CreateUser", request, async |mut client, request| {
                    client.create_user(request).await
                })
                .await?;
            Ok(output::user(&user, output.format()))
        }
        UserCommand::List { page, output } => {
            let request = ListUsersRequest::default();
            let (users, next) = admin
                .list(
                    "ListUsers",
                    &page,
                    usize::MAX,
                    request,
                    async |mut client, request| client.list_users(request).await,
                )
                .await?;
            Ok(output::listed(&users, next.as_deref(), output.format()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Command, try_parse};

    fn parse(args: &[&str]) -> Result<UserCommand, clap::Error> {
        match try_parse(&[&["user"], args].concat())? {
            Command::User(user) => Ok(user.command),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn create_and_list_parse() {
        assert_eq!(
            parse(&["create", "--name=ada", "--json"]).unwrap(),
            UserCommand::Create {
                name: Some("ada".into()),
                output: OutputArgs { json: true },
            }
        );
        assert_eq!(
            parse(&["list"]).unwrap(),
            UserCommand::List {
                page: PageArgs::default(),
                output: OutputArgs::default(),
            }
        );
        for bad in [
            &[][..],
            &["create", "--name"],
            &["list", "extra"],
            &["delete"],
        ] {
            parse(bad).expect_err(&format!("{bad:?}"));
        }
    }
}
