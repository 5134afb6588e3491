//! Parsers for single variable values. Each returns a reason; the caller names the variable.

use std::time::Duration;

use svc_runtime::config::{parse_positive, parse_timeout};

/// A deadline (`50ms`, `2s`, `1.5s`, `5m`, `1h`): more than zero and at most a day.
pub(crate) fn duration(value: &str) -> Result<Duration, String> {
    parse_timeout(value)
}

/// A positive integer.
pub(crate) fn positive<T>(value: &str) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + Default,
{
    parse_positive(value.trim())
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
}
