//! `svc usage` arguments.

use std::time::SystemTime;

use chrono::DateTime;
use svc_proto::v1::UsageGroupBy;
use svc_runtime::config::parse_duration;
use uuid::Uuid;

use crate::token::Format;
use crate::token::args::{no_positional, page_size_value, split, uuid};

/// What `svc usage` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageArgs {
    /// The grouping.
    pub by: UsageGroupBy,
    /// Inclusive start.
    pub since: Option<SystemTime>,
    /// Exclusive end.
    pub until: Option<SystemTime>,
    /// The org; the server refuses any but the admin token's.
    pub org_id: Option<Uuid>,
    /// Groups per page.
    pub page_size: Option<i32>,
    /// The cursor from a previous page.
    pub page_token: Option<String>,
    /// How to print.
    pub format: Format,
}

/// Parses the arguments after `usage`; `None` asks for help. `now` anchors `--since 24h`.
pub fn parse(args: &[String], now: SystemTime) -> Result<Option<UsageArgs>, String> {
    let split = split(args);
    if split.help || split.positional.first().is_some_and(|p| p == "help") {
        return Ok(None);
    }
    no_positional(&split.positional)?;
    let mut parsed = UsageArgs {
        by: UsageGroupBy::Token,
        since: None,
        until: None,
        org_id: None,
        page_size: None,
        page_token: None,
        format: split.format,
    };
    for (name, value) in split.flags {
        let value = value.ok_or_else(|| format!("--{name} needs a value"))?;
        match name.as_str() {
            "by" => parsed.by = group(&value)?,
            "since" => parsed.since = Some(time("--since", &value, now)?),
            "until" => parsed.until = Some(time("--until", &value, now)?),
            "org-id" => parsed.org_id = Some(uuid("--org-id", &value)?),
            "page-size" => parsed.page_size = Some(page_size_value(&value)?),
            "page-token" => parsed.page_token = Some(value),
            _ => return Err(format!("unknown option --{name} for usage")),
        }
    }
    Ok(Some(parsed))
}

fn group(value: &str) -> Result<UsageGroupBy, String> {
    match value {
        "token" => Ok(UsageGroupBy::Token),
        "agent" => Ok(UsageGroupBy::Agent),
        "model" => Ok(UsageGroupBy::Model),
        "day" => Ok(UsageGroupBy::Day),
        other => Err(format!("--by: {other:?} is not token, agent, model or day")),
    }
}

/// An RFC 3339 time, or a duration before `now` (`90m`, `24h`).
fn time(flag: &str, value: &str, now: SystemTime) -> Result<SystemTime, String> {
    if let Ok(at) = DateTime::parse_from_rfc3339(value) {
        return Ok(SystemTime::from(at));
    }
    let ago = parse_duration(value).map_err(|_| {
        format!("{flag}: {value:?} is neither a duration (24h) nor an RFC 3339 time")
    })?;
    now.checked_sub(ago)
        .ok_or_else(|| format!("{flag}: {value:?} reaches before the epoch"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn defaults_and_every_flag() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let plain = parse(&args(&[]), now).unwrap().unwrap();
        assert_eq!(
            (plain.by, plain.since, plain.format),
            (UsageGroupBy::Token, None, Format::Human)
        );
        let full = parse(
            &args(&[
                "--by=model",
                "--since",
                "24h",
                "--until",
                "1970-01-12T13:46:40Z",
                "--page-size",
                "5",
                "--json",
            ]),
            now,
        )
        .unwrap()
        .unwrap();
        assert_eq!(full.by, UsageGroupBy::Model);
        assert_eq!(full.since, Some(now - Duration::from_secs(86_400)));
        assert_eq!(full.until, Some(now));
        assert_eq!(full.page_size, Some(5));
        assert_eq!(full.format, Format::Json);
        assert_eq!(parse(&args(&["--help"]), now).unwrap(), None);
    }

    #[test]
    fn bad_usage_is_one_line() {
        for bad in [
            &["--by", "week"][..],
            &["--since", "yesterday"],
            &["--page-size", "0"],
            &["--org-id", "nope"],
            &["extra"],
            &["--frobnicate", "1"],
        ] {
            let error = parse(&args(bad), SystemTime::now()).expect_err(&format!("{bad:?}"));
            assert!(!error.contains('\n'), "{error}");
        }
    }
}
