//! The Grafana dashboard and the Prometheus alert rules under `ops/`: they parse, and every
//! metric they name is exposed by a running gateway or auth server.

use crate::support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use http::Request;
use http_body_util::Full;
use serde_json::Value;
use support::stack::Stack;
use support::{Script, client, completion, send};

fn ops_file(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ops")
        .join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `svc_*` metric names an expression reads.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = expr;
    while let Some(at) = rest.find("svc_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_owned());
        rest = &tail[end..];
    }
    names
}

/// The sample names an OpenMetrics exposition can carry, from its `# TYPE` lines.
fn exposed(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        if let (Some("#"), Some("TYPE"), Some(name), Some(kind)) =
            (words.next(), words.next(), words.next(), words.next())
        {
            names.insert(name.to_owned());
            match kind {
                "counter" => {
                    names.insert(format!("{name}_total"));
                }
                "histogram" => {
                    for suffix in ["_bucket", "_sum", "_count"] {
                        names.insert(format!("{name}{suffix}"));
                    }
                }
                _ => {}
            }
        }
    }
    names
}

async fn metrics_text(url: String) -> String {
    let reply = send(&client(), Request::get(url).body(Full::default()).unwrap()).await;
    assert_eq!(reply.status, 200);
    String::from_utf8(reply.body.to_vec()).unwrap()
}

#[tokio::test]
async fn dashboards_and_alerts_name_only_real_metrics() {
    let stack = Stack::start(Script::Json(200, completion("ok"), vec![])).await;
    let gateway = stack.gateway(&[]).await;
    let mut available = exposed(&metrics_text(format!("{}/metrics", gateway.url())).await);
    available.extend(exposed(
        &metrics_text(format!("http://{}/metrics", stack.auth.http_addr)).await,
    ));

    let dashboard: Value =
        serde_json::from_str(&ops_file("grafana/svc-gateway.json")).expect("the dashboard is JSON");
    let mut named = BTreeSet::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("an expr");
            named.extend(metric_names(expr));
        }
    }
    let rules = ops_file("prometheus/svc-alerts.yml");
    let mut alerts = 0;
    for line in rules.lines() {
        if let Some(expr) = line.trim().strip_prefix("expr:") {
            named.extend(metric_names(expr));
            alerts += 1;
        }
    }
    assert!(alerts >= 5, "alert rules: {alerts}");
    for wanted in [
        "svc_proxy_overhead_seconds_bucket",
        "svc_proxy_requests_total",
        "svc_proxy_auth_validate_duration_seconds_bucket",
        "svc_proxy_store_failures_total",
    ] {
        assert!(named.contains(wanted), "{wanted} is watched");
    }
    let missing: Vec<_> = named.difference(&available).collect();
    assert!(missing.is_empty(), "not exposed: {missing:?}");

    // The rules file is YAML a Prometheus loads: parsed here by Python's YAML when there is one.
    let parsed = Command::new("python3")
        .args([
            "-c",
            "import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); \
             rules = [r for g in d['groups'] for r in g['rules']]; \
             assert all('alert' in r and 'expr' in r for r in rules); print(len(rules))",
        ])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../ops/prometheus/svc-alerts.yml"))
        .output();
    match parsed {
        Ok(out) if out.status.success() => {
            let count: usize = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
            assert_eq!(count, alerts);
        }
        Ok(out) if String::from_utf8_lossy(&out.stderr).contains("No module named") => {
            println!("skipped the YAML parse: python3 has no yaml module");
        }
        Ok(out) => panic!(
            "the rules file does not parse: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => println!("skipped the YAML parse: no python3 ({e})"),
    }
}

#[tokio::test]
async fn the_overhead_histogram_counts_provider_calls_only() {
    let stack = Stack::start(Script::Json(200, completion("ok"), vec![])).await;
    let gateway = stack.gateway(&[]).await;
    let body = serde_json::json!({"model": support::LIVE_MODEL, "messages": [{"role": "user", "content": "hi"}]});
    for _ in 0..3 {
        let reply = send(
            &client(),
            stack
                .chat(&gateway)
                .body(support::stack::body(&body))
                .unwrap(),
        )
        .await;
        assert_eq!(reply.status, 200);
    }
    // A request refused before the provider is not a provider call.
    let refused = send(
        &client(),
        Request::post(format!("{}/v1/chat/completions", gateway.url()))
            .body(Full::default())
            .unwrap(),
    )
    .await;
    assert_eq!(refused.status, 401);
    let text = metrics_text(format!("{}/metrics", gateway.url())).await;
    assert!(
        text.contains("svc_proxy_overhead_seconds_count 3"),
        "{text}"
    );
}
