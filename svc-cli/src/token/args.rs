//! `svc token` arguments: `create`, `list` and `revoke`, each with `--json`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use svc_runtime::config::parse_duration;
use svc_tower::context::Permissions;
use uuid::Uuid;

use super::permissions;

/// How to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Lines for a person.
    Human,
    /// One JSON document on stdout, for scripts.
    Json,
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateArgs {
    /// Defaults to the admin token's org.
    pub org_id: Option<Uuid>,
    /// The permissions of the new token (default `chat`).
    pub permissions: Permissions,
    /// Binds the token to an agent.
    pub agent_id: Option<Uuid>,
    /// The user the token belongs to.
    pub user_id: Option<Uuid>,
    /// When it expires.
    pub expiry: Expiry,
    /// A label.
    pub name: Option<String>,
    /// The token's own requests per minute.
    pub rpm: Option<u32>,
    /// The token's own tokens per minute.
    pub tpm: Option<u64>,
}

/// A `svc token` subcommand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenCommand {
    /// Mint a token; its plaintext is printed once.
    Create(CreateArgs),
    /// One page (`page_size`, `page_token`) or, without either, every page.
    List {
        /// Tokens per page.
        page_size: Option<i32>,
        /// The cursor from a previous page.
        page_token: Option<String>,
    },
    /// Revoke a token by id.
    Revoke(Uuid),
    /// Print usage.
    Help,
}

/// Parses the arguments after `token`.
pub fn parse(args: &[String]) -> Result<(TokenCommand, Format), String> {
    let Some((command, rest)) = args.split_first() else {
        return Err("a subcommand is required: create, list or revoke".to_owned());
    };
    let Split {
        format,
        help,
        flags,
        positional,
    } = split(rest);
    if help {
        return Ok((TokenCommand::Help, format));
    }
    let command = match command.as_str() {
        "create" => {
            no_positional(&positional)?;
            TokenCommand::Create(create(flags)?)
        }
        "list" => {
            no_positional(&positional)?;
            let mut page_size = None;
            let mut page_token = None;
            for (name, value) in flags {
                let value = value.ok_or_else(|| format!("--{name} needs a value"))?;
                match name.as_str() {
                    "page-size" => page_size = Some(page_size_value(&value)?),
                    "page-token" => page_token = Some(value),
                    _ => return Err(format!("unknown option --{name} for list")),
                }
            }
            TokenCommand::List {
                page_size,
                page_token,
            }
        }
        "revoke" => {
            if let Some((name, _)) = flags.first() {
                return Err(format!("unknown option --{name} for revoke"));
            }
            match positional.as_slice() {
                [id] => TokenCommand::Revoke(uuid("TOKEN_ID", id)?),
                [] => return Err("revoke needs a TOKEN_ID".to_owned()),
                [_, extra, ..] => return Err(format!("unexpected argument {extra:?}")),
            }
        }
        "help" => TokenCommand::Help,
        other => return Err(format!("unknown token command {other:?}")),
    };
    Ok((command, format))
}

/// Arguments sorted into `--json`, `--help`, `--name value` (or `--name=value`) and the rest.
pub(crate) struct Split {
    pub(crate) format: Format,
    pub(crate) help: bool,
    pub(crate) flags: Vec<(String, Option<String>)>,
    pub(crate) positional: Vec<String>,
}

pub(crate) fn split(args: &[String]) -> Split {
    let mut split = Split {
        format: Format::Human,
        help: false,
        flags: Vec::new(),
        positional: Vec::new(),
    };
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--json" {
            split.format = Format::Json;
        } else if arg == "-h" || arg == "--help" {
            split.help = true;
        } else if let Some(flag) = arg.strip_prefix("--") {
            let (name, value) = match flag.split_once('=') {
                Some((name, value)) => (name.to_owned(), Some(value.to_owned())),
                None => (flag.to_owned(), rest.next().cloned()),
            };
            split.flags.push((name, value));
        } else {
            split.positional.push(arg.clone());
        }
    }
    split
}

fn create(flags: Vec<(String, Option<String>)>) -> Result<CreateArgs, String> {
    let mut args = CreateArgs {
        org_id: None,
        permissions: Permissions::CHAT_COMPLETIONS,
        agent_id: None,
        user_id: None,
        expiry: Expiry::Never,
        name: None,
        rpm: None,
        tpm: None,
    };
    for (name, value) in flags {
        let value = value.ok_or_else(|| format!("--{name} needs a value"))?;
        let expiry_set = args.expiry != Expiry::Never;
        match name.as_str() {
            "org-id" => args.org_id = Some(uuid("--org-id", &value)?),
            "agent-id" => args.agent_id = Some(uuid("--agent-id", &value)?),
            "user-id" => args.user_id = Some(uuid("--user-id", &value)?),
            "permissions" => args.permissions = permissions::parse(&value)?,
            "name" => args.name = Some(value),
            "rpm" => args.rpm = Some(positive("--rpm", &value)?),
            "tpm" => args.tpm = Some(positive("--tpm", &value)?),
            "expires-in" | "expires-at" if expiry_set => {
                return Err("give one of --expires-in and --expires-at".to_owned());
            }
            "expires-in" => {
                let duration = parse_duration(&value).map_err(|e| format!("--expires-in: {e}"))?;
                if duration.is_zero() {
                    return Err("--expires-in: must be more than 0".to_owned());
                }
                args.expiry = Expiry::In(duration);
            }
            "expires-at" => {
                let at = DateTime::parse_from_rfc3339(&value).map_err(|_| {
                    format!(
                        "--expires-at: {value:?} is not an RFC 3339 time (2027-01-31T12:00:00Z)"
                    )
                })?;
                args.expiry = Expiry::At(at.with_timezone(&Utc));
            }
            _ => return Err(format!("unknown option --{name} for create")),
        }
    }
    Ok(args)
}

pub(crate) fn no_positional(positional: &[String]) -> Result<(), String> {
    match positional.first() {
        Some(extra) => Err(format!("unexpected argument {extra:?}")),
        None => Ok(()),
    }
}

pub(crate) fn uuid(what: &str, value: &str) -> Result<Uuid, String> {
    Uuid::try_parse(value).map_err(|_| format!("{what}: {value:?} is not a UUID"))
}

pub(crate) fn page_size_value(value: &str) -> Result<i32, String> {
    positive("--page-size", value)
}

/// A whole number of at least 1 that fits `T`.
fn positive<T: std::str::FromStr + PartialOrd + From<u8>>(
    flag: &str,
    value: &str,
) -> Result<T, String> {
    match value.parse::<T>() {
        Ok(n) if n >= T::from(1) => Ok(n),
        _ => Err(format!("{flag}: {value:?} is not a positive integer")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn create_takes_its_flags_in_either_form() {
        let agent = Uuid::new_v4();
        let (command, format) = parse(&args(&[
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
        ]))
        .unwrap();
        assert_eq!(format, Format::Json);
        let TokenCommand::Create(create) = command else {
            panic!("{command:?}")
        };
        assert_eq!(create.permissions.bits(), 0b1_0001);
        assert_eq!(create.agent_id, Some(agent));
        assert_eq!(create.expiry, Expiry::In(Duration::from_secs(3600)));
        assert_eq!(create.name.as_deref(), Some("ci"));
        assert_eq!(create.org_id, None);
        assert_eq!((create.rpm, create.tpm), (Some(30), Some(40_000)));
    }

    #[test]
    fn list_and_revoke_parse() {
        assert_eq!(
            parse(&args(&["list"])).unwrap().0,
            TokenCommand::List {
                page_size: None,
                page_token: None
            }
        );
        assert_eq!(
            parse(&args(&["list", "--page-size", "2", "--page-token=abc"]))
                .unwrap()
                .0,
            TokenCommand::List {
                page_size: Some(2),
                page_token: Some("abc".into())
            }
        );
        let id = Uuid::new_v4();
        assert_eq!(
            parse(&args(&["revoke", &id.to_string()])).unwrap().0,
            TokenCommand::Revoke(id)
        );
    }

    #[test]
    fn bad_usage_is_one_line() {
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
            let error = parse(&args(bad)).expect_err(&format!("{bad:?}"));
            assert!(!error.contains('\n'), "{error}");
        }
    }
}
