//! Argument pieces every command shares: `--json`, the paging flags, and the parsers of ids,
//! counts and times. Each parser's error is the tail of clap's one line
//! (`invalid value 'x' for '--flag <V>': <error>`), so it does not repeat the flag.

use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use clap::Args;
use prost_types::Timestamp;
use svc_runtime::config::parse_duration;
use uuid::Uuid;

use crate::admin::Failure;
use crate::output::Format;

/// `--json`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Args)]
pub struct OutputArgs {
    /// Print one JSON document on stdout instead of lines for a person
    #[arg(long)]
    pub json: bool,
}

impl OutputArgs {
    /// How to print.
    pub fn format(self) -> Format {
        if self.json {
            Format::Json
        } else {
            Format::Human
        }
    }
}

/// `--page-size` and `--page-token`: with either, one page; without, every page.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct PageArgs {
    /// Print one page of this many items (the server caps it)
    #[arg(long, value_name = "N", value_parser = positive::<i32>)]
    pub page_size: Option<i32>,
    /// Print the page after this cursor (from a previous page)
    #[arg(long, value_name = "CURSOR")]
    pub page_token: Option<String>,
}

/// An instant given as an RFC 3339 time or as a duration before now (`90m`, `24h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeArg {
    /// This instant.
    At(SystemTime),
    /// This long before the command runs.
    Ago(Duration),
}

impl TimeArg {
    /// `2027-01-31T12:00:00Z`, or `24h`.
    pub fn parse(value: &str) -> Result<TimeArg, String> {
        if let Ok(at) = DateTime::parse_from_rfc3339(value) {
            return Ok(TimeArg::At(SystemTime::from(at)));
        }
        parse_duration(value)
            .map(TimeArg::Ago)
            .map_err(|_| "neither a duration (24h) nor an RFC 3339 time".to_owned())
    }

    /// The instant, with `now` anchoring a duration.
    pub fn at(self, now: SystemTime) -> Result<SystemTime, String> {
        match self {
            TimeArg::At(at) => Ok(at),
            TimeArg::Ago(ago) => now
                .checked_sub(ago)
                .ok_or_else(|| format!("{ago:?} ago is out of range")),
        }
    }
}

/// `flag`'s instant as a protobuf time, `now` anchoring a duration.
pub(crate) fn timestamp(
    flag: &str,
    time: Option<TimeArg>,
    now: SystemTime,
) -> Result<Option<Timestamp>, Failure> {
    time.map(|time| {
        time.at(now)
            .map(Timestamp::from)
            .map_err(|problem| Failure::Config(format!("{flag}: {problem}")))
    })
    .transpose()
}

pub(crate) fn uuid(value: &str) -> Result<Uuid, String> {
    Uuid::try_parse(value).map_err(|_| "not a UUID".to_owned())
}

pub(crate) fn rfc3339(value: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(value)
        .map(|at| at.with_timezone(&Utc))
        .map_err(|_| "not an RFC 3339 time (2027-01-31T12:00:00Z)".to_owned())
}

/// A duration of more than zero (`90m`, `720h`).
pub(crate) fn positive_duration(value: &str) -> Result<Duration, String> {
    match parse_duration(value)? {
        zero if zero.is_zero() => Err("must be more than 0".to_owned()),
        duration => Ok(duration),
    }
}

/// A whole number of at least 1 that fits `T`.
pub(crate) fn positive<T: std::str::FromStr + PartialOrd + From<u8>>(
    value: &str,
) -> Result<T, String> {
    match value.parse::<T>() {
        Ok(n) if n >= T::from(1) => Ok(n),
        _ => Err("not a positive integer that fits".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_instants_or_durations_before_now() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let ago = TimeArg::parse("24h").unwrap();
        assert_eq!(ago.at(now), Ok(now - Duration::from_secs(86_400)));
        let at = TimeArg::parse("1970-01-12T13:46:40Z").unwrap();
        assert_eq!(at.at(now), Ok(now));
        assert!(TimeArg::parse("yesterday").is_err());
    }

    #[test]
    fn counts_are_positive_and_fit() {
        assert_eq!(positive::<u32>("30"), Ok(30));
        for bad in ["0", "-5", "5000000000", "x"] {
            assert!(positive::<u32>(bad).is_err(), "{bad}");
        }
        assert!(positive_duration("0s").is_err());
        assert!(positive_duration("60").is_err());
    }
}
