//! Redis commands per request: `INFO commandstats` read before and after a phase.
//!
//! The counters are the whole server's: another client of the same Redis during the phase
//! counts too, and the harness's own `INFO` is left out.

use std::collections::BTreeMap;

/// Calls and microseconds inside Redis, per command.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CommandStats(BTreeMap<String, (u64, u64)>);

impl CommandStats {
    /// Reads the server's counters now; `None` when Redis does not answer.
    pub async fn read(url: &str) -> Option<CommandStats> {
        let client = redis::Client::open(url).ok()?;
        let mut connection = client.get_multiplexed_async_connection().await.ok()?;
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut connection)
            .await
            .ok()?;
        Some(CommandStats::parse(&info))
    }

    /// Parses `cmdstat_<name>:calls=N,usec=N,...` lines.
    pub fn parse(info: &str) -> CommandStats {
        let field = |fields: &str, key: &str| {
            fields
                .split(',')
                .find_map(|f| f.strip_prefix(key)?.strip_prefix('='))
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        CommandStats(
            info.lines()
                .filter_map(|line| {
                    let (name, fields) = line.strip_prefix("cmdstat_")?.split_once(':')?;
                    let calls = field(fields, "calls")?;
                    let usec = field(fields, "usec").unwrap_or(0);
                    Some((name.to_owned(), (calls, usec)))
                })
                .collect(),
        )
    }

    /// What ran between `self` and `later`, the harness's `INFO` left out.
    pub fn until(&self, later: &CommandStats) -> CommandStats {
        CommandStats(
            later
                .0
                .iter()
                .filter(|(name, _)| name.as_str() != "info")
                .filter_map(|(name, &(calls, usec))| {
                    let (c0, u0) = self.0.get(name).copied().unwrap_or((0, 0));
                    let calls = calls.saturating_sub(c0);
                    (calls > 0).then(|| (name.clone(), (calls, usec.saturating_sub(u0))))
                })
                .collect(),
        )
    }

    /// `total (name n, x µs each; ...), y µs in scripts` per request. A script's own commands
    /// count on their own rows too, and its µs hold theirs: the scripts' µs are what Redis
    /// spent on the request's scripts.
    pub fn per_request(&self, requests: usize) -> String {
        let per = |n: u64| n as f64 / requests.max(1) as f64;
        let total: u64 = self.0.values().map(|(calls, _)| calls).sum();
        let usec: u64 = (self.0.iter())
            .filter(|(name, _)| name.starts_with("eval") || name.starts_with("fcall"))
            .map(|(_, (_, usec))| usec)
            .sum();
        let mut rows: Vec<_> = self.0.iter().collect();
        rows.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(b.0)));
        let parts: Vec<String> = rows
            .iter()
            .map(|(name, (calls, usec))| {
                format!(
                    "{name} {:.2}, {:.1} µs each",
                    per(*calls),
                    *usec as f64 / (*calls).max(1) as f64
                )
            })
            .collect();
        format!(
            "{:.2} ({}), {:.1} µs in scripts",
            per(total),
            parts.join("; "),
            per(usec)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_what_ran_between_two_reads() {
        let before = CommandStats::parse(
            "# Commandstats\r\ncmdstat_evalsha:calls=10,usec=340,usec_per_call=34.00,rejected_calls=0\r\ncmdstat_info:calls=1,usec=5\r\n",
        );
        let after = CommandStats::parse(
            "# Commandstats\r\ncmdstat_evalsha:calls=2010,usec=68340,usec_per_call=34.00\r\ncmdstat_info:calls=2,usec=9\r\ncmdstat_get:calls=3,usec=3\r\n",
        );
        let phase = before.until(&after);
        assert_eq!(
            phase.per_request(2000),
            "1.00 (evalsha 1.00, 34.0 µs each; get 0.00, 1.0 µs each), 34.0 µs in scripts"
        );
    }
}
