//! Typed configuration from environment variables, with one error type naming the variable.
//!
//! Parsing takes a [`Vars`] map, never the process environment directly, so tests build one
//! from a literal and never mutate global state. Every failure is a [`ConfigError`] naming the
//! variable, printed by the binaries as one line.
//!
//! ```
//! use std::time::Duration;
//! use svc_runtime::config::{Vars, parse_duration, parse_port};
//!
//! let vars = Vars::from_pairs([("SVC_PORT", "abc"), ("TIMEOUT", "50ms")]);
//! let error = vars.parse_or("SVC_PORT", 8081, parse_port).unwrap_err();
//! assert_eq!(error.to_string(), r#"SVC_PORT: invalid port "abc""#);
//! assert_eq!(vars.parse_or("TIMEOUT", Duration::ZERO, parse_duration).unwrap(), Duration::from_millis(50));
//! assert_eq!(vars.parse_or("UNSET", 7u16, parse_port).unwrap(), 7);
//! ```

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// A bad or missing variable: `{variable}: {problem}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable}: {problem}")]
pub struct ConfigError {
    /// The variable's name.
    pub variable: &'static str,
    /// What is wrong with it. Never contains a secret value.
    pub problem: String,
}

impl ConfigError {
    /// An error about `variable`.
    pub fn new(variable: &'static str, problem: impl Into<String>) -> ConfigError {
        ConfigError {
            variable,
            problem: problem.into(),
        }
    }
}

/// A variable a binary reads and what it means: a line of the binary's `--help`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variable {
    /// Its name.
    pub name: &'static str,
    /// Its doc comment, one line.
    pub help: &'static str,
}

/// Declares variables: each a `pub const NAME: &str = "NAME"` with its doc comment, and all of
/// them, with their docs, in `pub const VARIABLES: &[Variable]`, the one list `--help` prints.
///
/// ```
/// mod vars {
///     svc_runtime::variables! {
///         /// HTTP port.
///         SVC_PORT;
///     }
/// }
/// assert_eq!(vars::SVC_PORT, "SVC_PORT");
/// assert_eq!(vars::VARIABLES[0].help.trim(), "HTTP port.");
/// ```
#[macro_export]
macro_rules! variables {
    ($( $(#[doc = $doc:literal])+ $name:ident; )+) => {
        $(
            $(#[doc = $doc])+
            pub const $name: &str = stringify!($name);
        )+
        /// Every variable declared in this module, with its doc comment.
        pub const VARIABLES: &[$crate::config::Variable] = &[
            $( $crate::config::Variable { name: stringify!($name), help: concat!($($doc),+) }, )+
        ];
    };
}

/// The exit code of a process refused at start for its configuration.
pub const EXIT_CONFIG: u8 = 2;

/// A snapshot of environment variables.
#[derive(Clone, Default)]
pub struct Vars {
    map: HashMap<String, String>,
    /// Every name looked up, so a test can check a binary's help lists what it reads.
    asked: Arc<Mutex<BTreeSet<String>>>,
}

impl fmt::Debug for Vars {
    /// Names only: values may be secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&String> = self.map.keys().collect();
        names.sort();
        f.debug_struct("Vars").field("names", &names).finish()
    }
}

impl Vars {
    /// The process environment (variables that are not valid UTF-8 are skipped).
    pub fn from_env() -> Vars {
        Vars::from_pairs(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
        )
    }

    /// Variables from name/value pairs.
    pub fn from_pairs<K, V>(pairs: impl IntoIterator<Item = (K, V)>) -> Vars
    where
        K: Into<String>,
        V: Into<String>,
    {
        Vars {
            map: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            asked: Arc::default(),
        }
    }

    /// The value of `name`, trimmed; an empty value counts as unset.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_owned());
        self.map
            .get(name)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// Every name looked up so far, by this map and its clones.
    pub fn asked(&self) -> Vec<String> {
        let asked = self.asked.lock().unwrap_or_else(PoisonError::into_inner);
        asked.iter().cloned().collect()
    }

    /// The names looked up so far that none of `tables` lists: what a binary's `--help`,
    /// printed from those tables, would leave out.
    pub fn unlisted(&self, tables: &[&[Variable]]) -> Vec<String> {
        let listed = |name: &String| {
            tables
                .iter()
                .any(|table| table.iter().any(|variable| variable.name == name))
        };
        self.asked()
            .into_iter()
            .filter(|name| !listed(name))
            .collect()
    }

    /// The value of `name`, or an error saying it is required.
    pub fn required(&self, name: &'static str) -> Result<&str, ConfigError> {
        self.get(name)
            .ok_or_else(|| ConfigError::new(name, "required but not set"))
    }

    /// `parse(value)` when set, `default` otherwise.
    pub fn parse_or<T>(
        &self,
        name: &'static str,
        default: T,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<T, ConfigError> {
        match self.get(name) {
            Some(value) => parse(value).map_err(|problem| ConfigError::new(name, problem)),
            None => Ok(default),
        }
    }
}

/// A TCP port, 1..=65535 (0 asks the OS for a free port).
pub fn parse_port(value: &str) -> Result<u16, String> {
    value
        .parse::<u16>()
        .map_err(|_| format!("invalid port {value:?}"))
}

/// `true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`), any case.
pub fn parse_bool(value: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(format!(
            "invalid boolean {value:?} (expected true or false)"
        )),
    }
}

/// A duration with a unit: `250us`, `50ms`, `2s`, `1m`, `1h`; fractions allowed (`1.5s`).
pub fn parse_duration(value: &str) -> Result<Duration, String> {
    let invalid = || format!("invalid duration {value:?} (expected e.g. 50ms, 2s, 1m)");
    let split = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(invalid)?;
    let (number, unit) = value.split_at(split);
    let number: f64 = number.parse().map_err(|_| invalid())?;
    let nanos_per_unit = match unit {
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" => 60e9,
        "h" => 3600e9,
        _ => return Err(invalid()),
    };
    // Rounded to whole nanoseconds, so `250us` is exactly 250 µs despite binary floats.
    let nanos = (number * nanos_per_unit).round();
    if !nanos.is_finite() || nanos < 0.0 || nanos > u64::MAX as f64 {
        return Err(invalid());
    }
    Ok(Duration::from_nanos(nanos as u64))
}

/// A deadline: a duration with a unit, more than zero and at most a day.
///
/// A bare number is refused: `50` could mean milliseconds or seconds, and a deadline off by a
/// factor of a thousand is worse than a refusal to start.
pub fn parse_timeout(value: &str) -> Result<Duration, String> {
    let parsed = parse_duration(value.trim())?;
    if parsed.is_zero() || parsed > Duration::from_secs(86_400) {
        return Err(format!("{value:?} must be more than 0 and at most 24h"));
    }
    Ok(parsed)
}

/// A positive integer.
pub fn parse_positive<T>(value: &str) -> Result<T, String>
where
    T: FromStr + PartialOrd + Default,
{
    match value.parse::<T>() {
        Ok(n) if n > T::default() => Ok(n),
        _ => Err(format!(
            "invalid value {value:?} (expected a positive integer)"
        )),
    }
}

/// Where the process runs; production turns on the strict checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Environment {
    /// A developer's machine (the default).
    #[default]
    Development,
    /// A shared pre-production environment.
    Staging,
    /// Production: refuses text logs, plaintext gRPC without opt-in, dev-only tools.
    Production,
}

impl Environment {
    /// The word as configured.
    pub fn as_str(self) -> &'static str {
        match self {
            Environment::Development => "development",
            Environment::Staging => "staging",
            Environment::Production => "production",
        }
    }

    /// Parses `development`, `staging` or `production`, any case.
    pub fn parse(value: &str) -> Result<Environment, String> {
        match value.to_ascii_lowercase().as_str() {
            "development" => Ok(Environment::Development),
            "staging" => Ok(Environment::Staging),
            "production" => Ok(Environment::Production),
            _ => Err(format!(
                "invalid environment {value:?} (expected development, staging or production)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_a_unit() {
        assert_eq!(parse_duration("50ms"), Ok(Duration::from_millis(50)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        for bad in ["", "50", "ms", "-1s", "1x", "1..2s", "s1", "2 s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ports_and_booleans() {
        assert_eq!(parse_port("8081"), Ok(8081));
        assert_eq!(parse_port("0"), Ok(0));
        assert_eq!(parse_port("70000"), Err(r#"invalid port "70000""#.into()));
        assert_eq!(parse_bool("TRUE"), Ok(true));
        assert_eq!(parse_bool("0"), Ok(false));
        assert!(parse_bool("maybe").is_err());
        assert_eq!(parse_positive::<u32>("3"), Ok(3));
        assert!(parse_positive::<u32>("0").is_err());
    }

    #[test]
    fn empty_values_are_unset_and_debug_hides_values() {
        let vars = Vars::from_pairs([("A", "  "), ("SECRET", "hunter2")]);
        assert_eq!(vars.get("A"), None);
        assert_eq!(
            vars.required("A").unwrap_err().to_string(),
            "A: required but not set"
        );
        assert!(!format!("{vars:?}").contains("hunter2"));
    }

    #[test]
    fn environments_parse_in_any_case() {
        assert_eq!(
            Environment::parse("Production"),
            Ok(Environment::Production)
        );
        assert!(Environment::parse("prod").is_err());
    }
}
