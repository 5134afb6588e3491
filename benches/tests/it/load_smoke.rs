//! The svc-load harness as a library, with a small load: every request succeeds, the report
//! has its figures, and everything the run started is gone afterwards. No timing is asserted:
//! speed is checked by running `svc-load` in release, not by tests.

use crate::common;

use std::time::Duration;

use svc_benches::load::{self, LoadConfig, Mode, Report};
use tokio::net::TcpStream;

fn small(mode: Mode) -> LoadConfig {
    LoadConfig {
        mode,
        requests: 50,
        concurrency: 4,
        warmup: 5,
        max_time: Duration::from_secs(60),
        postgres_url: svc_testkit::postgres_admin_url(),
        redis_url: svc_testkit::redis_url(),
        ..LoadConfig::default()
    }
}

/// Every request of both targets succeeded, and the figures are there and ordered.
fn assert_complete(report: &Report, requests: usize) {
    for phase in [&report.direct, &report.gateway] {
        assert_eq!(
            (phase.sent, phase.ok, phase.failed()),
            (requests, requests, 0),
            "{}: {:?}",
            phase.target,
            phase.failures
        );
        assert!(phase.p50 > Duration::ZERO, "{}", phase.target);
        assert!(phase.p50 <= phase.p90 && phase.p90 <= phase.p99 && phase.p99 <= phase.max);
        assert!(phase.elapsed > Duration::ZERO);
        assert!(phase.throughput > 0.0);
    }
    assert!(report.cleanup.is_empty(), "{:?}", report.cleanup);

    let text = report.to_string();
    for field in [
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "req/s",
        "direct",
        "gateway",
        &format!("{requests}/{requests}"),
        "added latency (gateway - direct): p50 ",
        "budget: added p99 under 20 ms: ",
    ] {
        assert!(text.contains(field), "{field:?} missing from:\n{text}");
    }
    let verdict = if report.passed() { "PASS" } else { "FAIL" };
    assert!(text.trim_end().ends_with(verdict) || text.contains(&format!("{verdict} (")));
}

/// The listeners the run opened refuse connections now.
async fn assert_stopped(report: &Report) {
    let footprint = &report.footprint;
    for addr in [footprint.upstream, footprint.gateway, footprint.auth_grpc] {
        assert!(
            TcpStream::connect(addr).await.is_err(),
            "{addr} still accepts connections"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_run_answers_every_request_and_cleans_up() {
    let report = load::run(&small(Mode::Embedded))
        .await
        .expect("the embedded run completes");
    assert_complete(&report, 50);
    // The checked request, the warm-up and the measured requests of both targets, each
    // answered by the upstream exactly once: the gateway forwarded every one.
    assert_eq!(report.upstream_calls, 2 * (1 + 5 + 50));
    assert_stopped(&report).await;
    let data_dir = report
        .footprint
        .data_dir
        .as_ref()
        .expect("a data directory");
    assert!(!data_dir.exists(), "{} left behind", data_dir.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_run_with_fresh_keys_drops_its_database_and_keys() {
    let config = LoadConfig {
        idempotency: true,
        sessions: true,
        ..small(Mode::Postgres)
    };
    let report = load::run(&config)
        .await
        .expect("the PostgreSQL run completes");
    assert_complete(&report, 50);
    // A fresh key on every request: none is replayed, every one reaches the upstream.
    assert_eq!(report.upstream_calls, 2 * (1 + 5 + 50));
    assert!(report.idempotency && report.sessions);
    assert!(report.to_string().contains("idempotency on"));
    assert_stopped(&report).await;

    let database = report.footprint.database.as_deref().expect("a database");
    let prefix = report
        .footprint
        .redis_prefix
        .as_deref()
        .expect("a key prefix");
    common::assert_removed(database, prefix).await;
}
