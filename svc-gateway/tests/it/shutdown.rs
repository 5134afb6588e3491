//! The `svc-gateway` binary on SIGTERM: `/ready` answers 503 at once, an open stream from a
//! slow upstream ends at the grace deadline with the final error event, and the process exits
//! soon after; an idle gateway exits at once.

use crate::support;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use http::Request;
use http_body_util::Full;
use serde_json::json;
use support::{LIVE_MODEL, PROVIDER_KEY, Script, Upstream, World, auth, chunk, client, json_body};

const BIN: &str = env!("CARGO_BIN_EXE_svc-gateway");
const GRACE: Duration = Duration::from_secs(2);
/// A generous bound for what should happen "soon" on a loaded machine.
const SOON: Duration = Duration::from_secs(10);

/// Kills the child when the test ends, however it ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Child {
    /// Sends SIGTERM.
    fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status()
            .expect("kill -TERM");
        assert!(status.success());
    }

    /// Whether it exits within `SOON`, successfully.
    async fn exits(&mut self) -> bool {
        let exited = svc_testkit::eventually(SOON, || {
            let exited = matches!(self.0.try_wait(), Ok(Some(_)));
            async move { exited }
        })
        .await;
        exited && self.0.wait().is_ok_and(|status| status.success())
    }
}

fn get(url: String) -> Request<Full<bytes::Bytes>> {
    Request::get(url).body(Full::default()).unwrap()
}

/// The binary on a free port with `vars`, once it serves `/health`; and its base URL.
async fn spawn(auth_addr: SocketAddr, vars: &[(&str, &str)]) -> (Child, String) {
    let port = svc_testkit::free_port();
    let child = Command::new(BIN)
        .env_clear()
        .env("SVC_PORT", port.to_string())
        .env("SVC_AUTH_GRPC_ADDR", auth_addr.to_string())
        .env("SVC_AUTH_VALIDATE_TIMEOUT", "2s")
        .envs(vars.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the binary");
    let child = Child(child);
    let base = format!("http://127.0.0.1:{port}");
    let http = client();
    let up = svc_testkit::eventually(SOON, || async {
        matches!(http.request(get(format!("{base}/health"))).await, Ok(r) if r.status() == 200)
    })
    .await;
    assert!(up, "the binary serves /health");
    (child, base)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_fails_ready_then_ends_open_streams_at_the_deadline() {
    let world = World::random();
    let auth_addr = auth::start(&world).await;
    let upstream = Upstream::start(Script::Stream {
        before: vec![chunk("Hel")],
        after: vec![chunk("lo"), "data: [DONE]\n\n".to_owned()],
        fail: false,
    })
    .await;
    let grace = format!("{}s", GRACE.as_secs());
    let base_url = upstream.base_url();
    let (mut child, base) = spawn(
        auth_addr,
        &[
            ("SVC_PROVIDER_BASE_URL", &base_url),
            ("SVC_PROVIDER_API_KEY", PROVIDER_KEY),
            ("SVC_PROVIDER_MODELS", LIVE_MODEL),
            ("SVC_SHUTDOWN_GRACE", &grace),
        ],
    )
    .await;

    let http = client();
    let body = json!({"model": LIVE_MODEL, "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let request = Request::post(format!("{base}/v1/chat/completions"))
        .header("authorization", format!("Bearer {}", world.chat_token))
        .header("x-svc-agent-id", world.agent_id.to_string())
        .header("content-type", "application/json")
        .body(json_body(&body))
        .unwrap();
    let response = support::open(&http, request).await;
    assert_eq!(response.status(), 200);
    let mut stream = response.into_body();
    let first = support::next_data(&mut stream)
        .await
        .expect("the first event");
    assert!(String::from_utf8_lossy(&first).contains("Hel"));

    let terminated = Instant::now();
    child.terminate();

    // Readiness fails while the stream still runs (new connections are still accepted, each
    // for one request).
    let fresh = client();
    let unready = svc_testkit::eventually(SOON, || async {
        matches!(fresh.request(get(format!("{base}/ready"))).await, Ok(r) if r.status() == 503)
    })
    .await;
    assert!(unready, "/ready never answered 503 while draining");
    assert!(
        terminated.elapsed() < GRACE,
        "/ready failed only after the grace period"
    );

    // The upstream holds the stream: it ends at the deadline, with the error event.
    let mut rest = Vec::new();
    let ended = tokio::time::timeout(GRACE + SOON, async {
        while let Some(data) = support::next_data(&mut stream).await {
            rest.extend_from_slice(&data);
        }
    })
    .await;
    assert!(ended.is_ok(), "the stream outlived the deadline");
    let rest = String::from_utf8_lossy(&rest);
    assert!(
        rest.starts_with("data: {\"error\"") && rest.contains("PROVIDER_UNAVAILABLE"),
        "{rest}"
    );
    assert!(
        terminated.elapsed() >= GRACE - Duration::from_millis(100),
        "the stream ended before the grace period: {:?}",
        terminated.elapsed()
    );
    assert!(
        child.exits().await,
        "the process did not exit after the deadline"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_gateway_exits_at_once_on_sigterm() {
    let world = World::random();
    let auth_addr = auth::start(&world).await;
    let (mut child, _) = spawn(auth_addr, &[("SVC_SHUTDOWN_GRACE", "30s")]).await;
    child.terminate();
    // SOON is well inside the 30 s grace period.
    assert!(
        child.exits().await,
        "an idle gateway waited for its grace period"
    );
}
