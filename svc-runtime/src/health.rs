//! Readiness checks run in parallel under a time budget, reported as the `/ready` body both services answer.
//!
//! ```
//! use std::time::Duration;
//! use futures_util::future::BoxFuture;
//! use http::StatusCode;
//! use svc_runtime::health::{Checker, Readiness, ReadinessStatus};
//!
//! struct AlwaysUp;
//!
//! impl Checker for AlwaysUp {
//!     fn name(&self) -> &str {
//!         "always_up"
//!     }
//!     fn check(&self) -> BoxFuture<'_, Result<(), String>> {
//!         Box::pin(async { Ok(()) })
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let readiness = Readiness::new(vec![Box::new(AlwaysUp)]);
//! let report = readiness.run().await;
//! assert_eq!(report.status, ReadinessStatus::Ok);
//! assert_eq!(report.http_status(), StatusCode::OK);
//!
//! let body = serde_json::to_value(&report).unwrap();
//! assert_eq!(body["checks"]["always_up"]["status"], "ok");
//! assert!(body["checks"]["always_up"].get("message").is_none());
//! # });
//! ```
//!
//! # Where it goes
//!
//! A service answers `GET /ready` with [`Readiness::run`] and `GET /health` with
//! [`ReadinessReport::alive`] (liveness never looks at dependencies, so a slow database does not
//! get a healthy process restarted). The module needs neither tonic, Redis nor a database
//! driver: each service writes its own checkers and hands them in.
//!
//! Every checker starts at once. Each one gets the per-check budget, capped by the overall
//! budget, so the whole report is ready within the overall budget even when a dependency hangs
//! (a hung check is reported as failed with the message `timed out`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures_util::future::{BoxFuture, join_all};
use http::StatusCode;
use serde::Serialize;

use crate::shutdown::Drain;

/// Default time one checker may take (SPEC: 500 ms).
pub const DEFAULT_CHECK_TIMEOUT: Duration = Duration::from_millis(500);

/// Default time the whole readiness report may take (SPEC: 750 ms).
pub const DEFAULT_OVERALL_TIMEOUT: Duration = Duration::from_millis(750);

/// One dependency check.
///
/// `check` returns `Err(message)` on failure. The message is shown to anyone who can reach
/// `/ready`, so it must be a short, fixed description (`query failed`, `connection refused`),
/// never an error carrying a DSN, a host's credentials or a token.
pub trait Checker: Send + Sync {
    /// The key of this check in the report (`postgres`, `redis`, ...).
    fn name(&self) -> &str;

    /// Whether a failure makes the service unhealthy (503) or only degraded (200).
    fn critical(&self) -> bool {
        true
    }

    /// Runs the check once.
    fn check(&self) -> BoxFuture<'_, Result<(), String>>;
}

/// Overall readiness, as SPEC words it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReadinessStatus {
    /// Every check passed: HTTP 200.
    Ok,
    /// Every critical check passed, an advisory one failed: HTTP 200.
    Degraded,
    /// A critical check failed: HTTP 503.
    Unhealthy,
}

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    /// The dependency answered.
    Ok,
    /// The dependency failed or did not answer in time.
    Failed,
}

/// One entry of the report's `checks` object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    /// `ok` or `failed`.
    pub status: CheckStatus,
    /// Why the check failed; absent when it passed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Wall time the check took, in milliseconds.
    pub latency_ms: u64,
}

/// The `/ready` (and `/health`) body: `{"status": ..., "checks": {name: result}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadinessReport {
    /// The overall verdict.
    pub status: ReadinessStatus,
    /// Every check by name.
    pub checks: BTreeMap<String, CheckResult>,
}

impl ReadinessReport {
    /// The liveness body: `{"status": "ok", "checks": {}}`.
    pub fn alive() -> ReadinessReport {
        ReadinessReport {
            status: ReadinessStatus::Ok,
            checks: BTreeMap::new(),
        }
    }

    /// `unhealthy`, with the one check `shutdown` failed: what `/ready` answers once a shutdown
    /// has begun, so load balancers stop sending before the connections close.
    pub fn shutting_down() -> ReadinessReport {
        let check = CheckResult {
            status: CheckStatus::Failed,
            message: Some("shutting down".to_owned()),
            latency_ms: 0,
        };
        ReadinessReport {
            status: ReadinessStatus::Unhealthy,
            checks: [("shutdown".to_owned(), check)].into(),
        }
    }

    /// 200 for `ok` and `degraded`, 503 for `unhealthy`.
    pub fn http_status(&self) -> StatusCode {
        match self.status {
            ReadinessStatus::Ok | ReadinessStatus::Degraded => StatusCode::OK,
            ReadinessStatus::Unhealthy => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// A set of checkers and the budgets they run under.
pub struct Readiness {
    checkers: Vec<Box<dyn Checker>>,
    check_timeout: Duration,
    overall_timeout: Duration,
}

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.checkers.iter().map(|c| c.name()).collect();
        f.debug_struct("Readiness")
            .field("checkers", &names)
            .field("check_timeout", &self.check_timeout)
            .field("overall_timeout", &self.overall_timeout)
            .finish()
    }
}

impl Readiness {
    /// Checkers with SPEC's budgets: 500 ms each, 750 ms overall.
    pub fn new(checkers: Vec<Box<dyn Checker>>) -> Readiness {
        Readiness {
            checkers,
            check_timeout: DEFAULT_CHECK_TIMEOUT,
            overall_timeout: DEFAULT_OVERALL_TIMEOUT,
        }
    }

    /// Replaces both budgets.
    pub fn with_timeouts(mut self, check_timeout: Duration, overall_timeout: Duration) -> Self {
        self.check_timeout = check_timeout;
        self.overall_timeout = overall_timeout;
        self
    }

    /// [`Readiness::run`] while `drain` serves; [`ReadinessReport::shutting_down`] without
    /// checking once it drains.
    pub async fn run_while_serving(&self, drain: &Drain) -> ReadinessReport {
        if drain.is_draining() {
            ReadinessReport::shutting_down()
        } else {
            self.run().await
        }
    }

    /// Runs every checker in parallel and builds the report.
    pub async fn run(&self) -> ReadinessReport {
        let budget = self.check_timeout.min(self.overall_timeout);
        let outcomes = join_all(self.checkers.iter().map(|checker| async move {
            let started = Instant::now();
            let outcome = match tokio::time::timeout(budget, checker.check()).await {
                Ok(outcome) => outcome,
                Err(_) => Err("timed out".to_owned()),
            };
            let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            (checker.name(), checker.critical(), outcome, latency_ms)
        }))
        .await;

        let mut status = ReadinessStatus::Ok;
        let mut checks = BTreeMap::new();
        for (name, critical, outcome, latency_ms) in outcomes {
            let result = match outcome {
                Ok(()) => CheckResult {
                    status: CheckStatus::Ok,
                    message: None,
                    latency_ms,
                },
                Err(message) => {
                    status = match (status, critical) {
                        (_, true) | (ReadinessStatus::Unhealthy, false) => {
                            ReadinessStatus::Unhealthy
                        }
                        (_, false) => ReadinessStatus::Degraded,
                    };
                    CheckResult {
                        status: CheckStatus::Failed,
                        message: Some(message),
                        latency_ms,
                    }
                }
            };
            checks.insert(name.to_owned(), result);
        }
        ReadinessReport { status, checks }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed {
        name: &'static str,
        critical: bool,
        outcome: Result<(), &'static str>,
        delay: Duration,
    }

    impl Checker for Fixed {
        fn name(&self) -> &str {
            self.name
        }
        fn critical(&self) -> bool {
            self.critical
        }
        fn check(&self) -> BoxFuture<'_, Result<(), String>> {
            Box::pin(async move {
                tokio::time::sleep(self.delay).await;
                self.outcome.map_err(str::to_owned)
            })
        }
    }

    fn fixed(name: &'static str, outcome: Result<(), &'static str>) -> Box<dyn Checker> {
        Box::new(Fixed {
            name,
            critical: true,
            outcome,
            delay: Duration::ZERO,
        })
    }

    #[tokio::test]
    async fn all_passing_is_ok_with_200() {
        let report = Readiness::new(vec![fixed("a", Ok(())), fixed("b", Ok(()))])
            .run()
            .await;
        assert_eq!(report.status, ReadinessStatus::Ok);
        assert_eq!(report.http_status(), StatusCode::OK);
        assert_eq!(report.checks.len(), 2);
        assert!(report.checks.values().all(|c| c.status == CheckStatus::Ok));
    }

    #[tokio::test]
    async fn a_failing_critical_check_is_unhealthy_with_503() {
        let report = Readiness::new(vec![fixed("a", Ok(())), fixed("db", Err("query failed"))])
            .run()
            .await;
        assert_eq!(report.status, ReadinessStatus::Unhealthy);
        assert_eq!(report.http_status(), StatusCode::SERVICE_UNAVAILABLE);
        let body = serde_json::to_value(&report).unwrap();
        assert_eq!(body["status"], "unhealthy");
        assert_eq!(body["checks"]["db"]["status"], "failed");
        assert_eq!(body["checks"]["db"]["message"], "query failed");
        assert!(body["checks"]["a"].get("message").is_none());
        assert!(body["checks"]["db"]["latency_ms"].is_u64());
    }

    #[tokio::test]
    async fn a_failing_advisory_check_is_degraded_with_200() {
        let advisory = Box::new(Fixed {
            name: "cache",
            critical: false,
            outcome: Err("unreachable"),
            delay: Duration::ZERO,
        });
        let report = Readiness::new(vec![fixed("a", Ok(())), advisory])
            .run()
            .await;
        assert_eq!(report.status, ReadinessStatus::Degraded);
        assert_eq!(report.http_status(), StatusCode::OK);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hung_check_times_out_within_the_budget() {
        let hung = Box::new(Fixed {
            name: "slow",
            critical: true,
            outcome: Ok(()),
            delay: Duration::from_secs(60),
        });
        let started = tokio::time::Instant::now();
        let report = Readiness::new(vec![hung, fixed("fast", Ok(()))])
            .run()
            .await;
        assert!(started.elapsed() <= DEFAULT_CHECK_TIMEOUT + Duration::from_millis(1));
        assert_eq!(report.status, ReadinessStatus::Unhealthy);
        assert_eq!(report.checks["slow"].message.as_deref(), Some("timed out"));
        assert_eq!(report.checks["fast"].status, CheckStatus::Ok);
    }

    #[tokio::test(start_paused = true)]
    async fn checks_run_in_parallel() {
        let slow = |name| -> Box<dyn Checker> {
            Box::new(Fixed {
                name,
                critical: true,
                outcome: Ok(()),
                delay: Duration::from_millis(300),
            })
        };
        let started = tokio::time::Instant::now();
        let report = Readiness::new(vec![slow("a"), slow("b"), slow("c")])
            .run()
            .await;
        assert_eq!(report.status, ReadinessStatus::Ok);
        assert!(started.elapsed() < Duration::from_millis(400));
    }

    #[tokio::test(start_paused = true)]
    async fn the_overall_budget_caps_each_check() {
        let hung = Box::new(Fixed {
            name: "slow",
            critical: true,
            outcome: Ok(()),
            delay: Duration::from_secs(60),
        });
        let started = tokio::time::Instant::now();
        let report = Readiness::new(vec![hung])
            .with_timeouts(Duration::from_secs(5), Duration::from_millis(100))
            .run()
            .await;
        assert!(started.elapsed() <= Duration::from_millis(101));
        assert_eq!(report.status, ReadinessStatus::Unhealthy);
    }

    #[test]
    fn liveness_body_is_ok_with_no_checks() {
        let body = serde_json::to_value(ReadinessReport::alive()).unwrap();
        assert_eq!(body, serde_json::json!({"status": "ok", "checks": {}}));
    }
}
