//! Parsers for single variable values. Each returns a reason; the caller names the variable.

use std::time::Duration;

use svc_runtime::config::{parse_bool, parse_duration, parse_positive};

/// A duration written as a number and a unit (`50ms`, `2s`, `1.5s`, `5m`, `1h`; the parser
/// every svc binary uses), more than zero and at most a day.
///
/// A bare number is refused: `50` could mean milliseconds or seconds, and a deadline off by a
/// factor of a thousand is worse than a refusal to start.
pub(crate) fn duration(value: &str) -> Result<Duration, String> {
    let parsed = parse_duration(value.trim())?;
    if parsed.is_zero() || parsed > Duration::from_secs(86_400) {
        return Err(format!("{value:?} must be more than 0 and at most 24h"));
    }
    Ok(parsed)
}

/// A positive integer.
pub(crate) fn positive<T>(value: &str) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + Default,
{
    parse_positive(value.trim())
}

/// `true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`), case-insensitive.
pub(crate) fn boolean(value: &str) -> Result<bool, String> {
    parse_bool(value.trim())
}

/// A `host:port` pair; the host may be a name, an IPv4 address or a bracketed IPv6 address.
pub(crate) fn host_port(value: &str) -> Result<(), String> {
    let (host, port) = value
        .rsplit_once(':')
        .ok_or_else(|| format!("{value:?} is not host:port"))?;
    if host.is_empty() || host.contains('/') || host.contains(char::is_whitespace) {
        return Err(format!("{value:?} has no valid host"));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err(format!("{value:?} has no valid port")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_a_unit() {
        assert_eq!(duration("50ms"), Ok(Duration::from_millis(50)));
        assert_eq!(duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(duration("1h"), Ok(Duration::from_secs(3600)));
        for bad in ["50", "", "ms", "2 s", "0s", "-1s", "1d", "1e3ms", "25h"] {
            assert!(duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn positives_refuse_zero_and_garbage() {
        assert_eq!(positive::<u32>("600"), Ok(600));
        assert!(positive::<u32>("0").is_err());
        assert!(positive::<u32>("-5").is_err());
        assert!(positive::<u32>("ten").is_err());
    }

    #[test]
    fn booleans() {
        assert_eq!(boolean("TRUE"), Ok(true));
        assert_eq!(boolean("0"), Ok(false));
        assert!(boolean("maybe").is_err());
    }

    #[test]
    fn host_ports() {
        assert!(host_port("auth:9091").is_ok());
        assert!(host_port("127.0.0.1:9091").is_ok());
        assert!(host_port("[::1]:9091").is_ok());
        for bad in ["auth", ":9091", "auth:", "auth:0", "auth:99999", "a/b:1"] {
            assert!(host_port(bad).is_err(), "{bad}");
        }
    }
}
