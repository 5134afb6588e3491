//! What a run measured: latency percentiles and throughput per target, the gateway's added
//! latency, and the verdict against the budget.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::Mode;

/// SPEC's Limits: "Proxy overhead budget target: under 20ms".
pub const OVERHEAD_BUDGET: Duration = Duration::from_millis(20);

/// The measured requests of one target, as the client saw them.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseStats {
    /// `direct` (the upstream alone) or `gateway` (through the whole stack).
    pub target: &'static str,
    /// Requests sent (fewer than asked only when the time limit stopped the phase).
    pub sent: usize,
    /// Requests answered 200 with their whole body read.
    pub ok: usize,
    /// Failed requests by cause (`status 429`, `transport`, `timeout`, ...).
    pub failures: BTreeMap<String, usize>,
    /// Latency of the successful requests, at the nearest rank.
    pub p50: Duration,
    /// 90th percentile.
    pub p90: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// 99.9th percentile.
    pub p999: Duration,
    /// The slowest successful request.
    pub max: Duration,
    /// Wall time of the phase, first request sent to last answer read.
    pub elapsed: Duration,
    /// Successful requests per second over `elapsed`.
    pub throughput: f64,
}

impl PhaseStats {
    /// Summarises `latencies` (successful requests, any order).
    pub fn new(
        target: &'static str,
        sent: usize,
        mut latencies: Vec<Duration>,
        failures: BTreeMap<String, usize>,
        elapsed: Duration,
    ) -> PhaseStats {
        latencies.sort_unstable();
        let ok = latencies.len();
        let throughput = if elapsed.is_zero() {
            0.0
        } else {
            ok as f64 / elapsed.as_secs_f64()
        };
        PhaseStats {
            target,
            sent,
            ok,
            failures,
            p50: percentile(&latencies, 0.50),
            p90: percentile(&latencies, 0.90),
            p99: percentile(&latencies, 0.99),
            p999: percentile(&latencies, 0.999),
            max: latencies.last().copied().unwrap_or_default(),
            elapsed,
            throughput,
        }
    }

    /// Requests that did not succeed.
    pub fn failed(&self) -> usize {
        self.failures.values().sum()
    }
}

/// Nearest-rank percentile `q` (0..=1) of sorted `samples`; zero when there are none.
pub fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// What the run started, so a caller can check it is all gone afterwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Footprint {
    /// The fake upstream.
    pub upstream: SocketAddr,
    /// The gateway's HTTP listener.
    pub gateway: SocketAddr,
    /// The auth server's gRPC listener.
    pub auth_grpc: SocketAddr,
    /// The PostgreSQL database created and dropped (PostgreSQL mode).
    pub database: Option<String>,
    /// The Redis key prefix whose keys were deleted (PostgreSQL mode).
    pub redis_prefix: Option<String>,
    /// The embedded store's directory, removed (embedded mode).
    pub data_dir: Option<PathBuf>,
}

/// A whole run.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Which stack ran.
    pub mode: Mode,
    /// Requests asked per target.
    pub requests: usize,
    /// Connections (and requests in flight) per target.
    pub concurrency: usize,
    /// Whether each request carried a fresh `Idempotency-Key`.
    pub idempotency: bool,
    /// Whether the gateway recorded durable sessions.
    pub sessions: bool,
    /// The upstream alone.
    pub direct: PhaseStats,
    /// The same requests through the gateway.
    pub gateway: PhaseStats,
    /// Calls the fake upstream answered, warm-up included.
    pub upstream_calls: u64,
    /// The p99 budget for the added latency.
    pub budget: Duration,
    /// What the run started and stopped.
    pub footprint: Footprint,
    /// What could not be stopped or removed afterwards, one line each (empty when all went).
    pub cleanup: Vec<String>,
}

impl Report {
    /// Gateway minus direct at the 50th percentile, in milliseconds (may be negative).
    pub fn added_p50_ms(&self) -> f64 {
        millis(self.gateway.p50) - millis(self.direct.p50)
    }

    /// Gateway minus direct at the 99th percentile, in milliseconds (may be negative).
    pub fn added_p99_ms(&self) -> f64 {
        millis(self.gateway.p99) - millis(self.direct.p99)
    }

    /// Why the run fails, if it does: a failed request, or the added p99 at or over budget.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for phase in [&self.direct, &self.gateway] {
            if phase.failed() > 0 {
                problems.push(format!(
                    "{} of {} {} requests failed",
                    phase.failed(),
                    phase.sent,
                    phase.target
                ));
            }
            if phase.ok == 0 {
                problems.push(format!("no {} request succeeded", phase.target));
            }
        }
        if self.added_p99_ms() >= millis(self.budget) {
            problems.push(format!(
                "added p99 {:.2} ms is not under {} ms",
                self.added_p99_ms(),
                millis(self.budget)
            ));
        }
        problems
    }

    /// Every request succeeded and the added p99 is under budget.
    pub fn passed(&self) -> bool {
        self.problems().is_empty()
    }
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "svc-load: {} mode ({}), {} requests per target, concurrency {}, idempotency {}{}",
            self.mode.name(),
            self.mode.describe(),
            self.requests,
            self.concurrency,
            if self.idempotency {
                "on (a fresh key per request)"
            } else {
                "off"
            },
            if self.sessions {
                ", durable sessions on"
            } else {
                ""
            },
        )?;
        writeln!(
            f,
            "{:<8} {:>11} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "target", "ok/sent", "p50 ms", "p90 ms", "p99 ms", "max ms", "req/s"
        )?;
        for phase in [&self.direct, &self.gateway] {
            writeln!(
                f,
                "{:<8} {:>11} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.0}",
                phase.target,
                format!("{}/{}", phase.ok, phase.sent),
                millis(phase.p50),
                millis(phase.p90),
                millis(phase.p99),
                millis(phase.max),
                phase.throughput,
            )?;
            for (cause, count) in &phase.failures {
                writeln!(f, "         {count} failed: {cause}")?;
            }
            if phase.sent < self.requests {
                writeln!(
                    f,
                    "         stopped by the time limit after {} of {} requests",
                    phase.sent, self.requests
                )?;
            }
        }
        writeln!(
            f,
            "added latency (gateway - direct): p50 {:.3} ms, p99 {:.3} ms",
            self.added_p50_ms(),
            self.added_p99_ms()
        )?;
        for problem in &self.cleanup {
            writeln!(f, "cleanup: {problem}")?;
        }
        let problems = self.problems();
        if problems.is_empty() {
            writeln!(
                f,
                "budget: added p99 under {} ms: PASS",
                millis(self.budget)
            )
        } else {
            writeln!(
                f,
                "budget: added p99 under {} ms: FAIL ({})",
                millis(self.budget),
                problems.join("; ")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn phase(target: &'static str, latencies: Vec<Duration>) -> PhaseStats {
        let sent = latencies.len();
        PhaseStats::new(target, sent, latencies, BTreeMap::new(), ms(1000))
    }

    fn report(direct: PhaseStats, gateway: PhaseStats) -> Report {
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        Report {
            mode: Mode::Embedded,
            requests: direct.sent,
            concurrency: 4,
            idempotency: false,
            sessions: false,
            direct,
            gateway,
            upstream_calls: 0,
            budget: OVERHEAD_BUDGET,
            footprint: Footprint {
                upstream: addr,
                gateway: addr,
                auth_grpc: addr,
                database: None,
                redis_prefix: None,
                data_dir: None,
            },
            cleanup: Vec::new(),
        }
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let samples: Vec<Duration> = (1..=100).map(ms).collect();
        assert_eq!(percentile(&samples, 0.50), ms(50));
        assert_eq!(percentile(&samples, 0.90), ms(90));
        assert_eq!(percentile(&samples, 0.99), ms(99));
        assert_eq!(percentile(&samples, 1.0), ms(100));
        assert_eq!(percentile(&samples, 0.0), ms(1));
        assert_eq!(percentile(&[ms(7)], 0.99), ms(7));
        assert_eq!(percentile(&[], 0.5), Duration::ZERO);
    }

    #[test]
    fn stats_sort_and_count() {
        let stats = PhaseStats::new(
            "gateway",
            5,
            vec![ms(4), ms(1), ms(3), ms(2)],
            BTreeMap::from([("status 503".to_owned(), 1)]),
            ms(500),
        );
        assert_eq!((stats.ok, stats.failed()), (4, 1));
        assert_eq!((stats.p50, stats.max), (ms(2), ms(4)));
        assert!((stats.throughput - 8.0).abs() < 1e-9);
    }

    #[test]
    fn passes_under_budget_and_fails_at_it() {
        let direct = phase("direct", vec![ms(1); 100]);
        let under = report(direct.clone(), phase("gateway", vec![ms(20); 100]));
        assert!((under.added_p99_ms() - 19.0).abs() < 1e-9);
        assert!(under.passed(), "{:?}", under.problems());
        assert!(under.to_string().contains("PASS"));

        let over = report(direct, phase("gateway", vec![ms(21); 100]));
        assert!(!over.passed());
        let text = over.to_string();
        assert!(text.contains("FAIL"), "{text}");
        assert!(text.contains("added p99 20.00 ms"), "{text}");
    }

    #[test]
    fn a_failed_request_fails_the_run_whatever_the_latency() {
        let direct = phase("direct", vec![ms(1); 10]);
        let gateway = PhaseStats::new(
            "gateway",
            10,
            vec![ms(2); 9],
            BTreeMap::from([("status 429".to_owned(), 1)]),
            ms(100),
        );
        let run = report(direct, gateway);
        assert!(!run.passed());
        let text = run.to_string();
        assert!(text.contains("1 failed: status 429"), "{text}");
        assert!(text.contains("1 of 10 gateway requests failed"), "{text}");
    }
}
