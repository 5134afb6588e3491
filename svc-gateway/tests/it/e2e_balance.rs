//! Auth replicas: two real auth servers on one database behind one `SVC_AUTH_GRPC_ADDR` list
//! share a gateway's calls; cutting one off (its proxy drops every connection and refuses new
//! ones, as a killed host would) costs only the calls in flight on it; a DNS name works.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http::Request;
use serde_json::json;
use support::stack::{Stack, body};
use support::{HttpClient, LIVE_MODEL, Script, client, completion, send};
use svc_auth_server::{RunningServer, Server};
use svc_testkit::FaultProxy;

/// Requests sent at once while a replica is cut off.
const CONCURRENCY: usize = 4;
const WITHIN: Duration = Duration::from_secs(10);

/// ValidateToken calls `server` answered, from its `/metrics`.
async fn validate_token_calls(http: &HttpClient, server: &RunningServer) -> u64 {
    let reply = send(
        http,
        Request::get(format!("http://{}/metrics", server.http_addr))
            .body(Default::default())
            .unwrap(),
    )
    .await;
    String::from_utf8_lossy(&reply.body)
        .lines()
        .find(|line| line.starts_with("svc_auth_validate_token_duration_seconds_count"))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

async fn chat_status(stack: &Stack, http: &HttpClient, gateway: &svc_gateway::Running) -> u16 {
    let request = stack
        .chat(gateway)
        .body(body(&json!({
            "model": LIVE_MODEL,
            "messages": [{"role": "user", "content": "hi"}],
        })))
        .unwrap();
    send(http, request).await.status.as_u16()
}

/// A second auth server on the stack's database, behind its own proxy, and a gateway whose
/// `SVC_AUTH_GRPC_ADDR` lists both replicas' proxies.
async fn two_replicas(stack: &Stack) -> (RunningServer, FaultProxy, svc_gateway::Running) {
    let server = Server::start(stack.auth_config.clone())
        .await
        .expect("second auth server starts");
    let proxy = FaultProxy::start(server.grpc_addr).await;
    let list = format!("{},{}", stack.auth_proxy.addr(), proxy.addr());
    let gateway = stack
        .gateway(&[
            ("SVC_AUTH_GRPC_ADDR", &list),
            ("SVC_AUTH_VALIDATE_TIMEOUT", "2s"),
        ])
        .await;
    (server, proxy, gateway)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_the_calls_and_losing_one_costs_only_its_calls_in_flight() {
    let stack = Stack::start(Script::Json(200, completion("ok"), vec![])).await;
    let (second, second_proxy, gateway) = two_replicas(&stack).await;
    let http = client();

    for _ in 0..40 {
        assert_eq!(chat_status(&stack, &http, &gateway).await, 200);
    }
    let first_calls = validate_token_calls(&http, &stack.auth).await;
    let second_calls = validate_token_calls(&http, &second).await;
    assert_eq!(first_calls + second_calls, 40);
    assert!(
        first_calls > 0 && second_calls > 0,
        "one replica took every call: {first_calls} and {second_calls}"
    );

    // Load from CONCURRENCY clients; the second replica is cut off while it runs.
    let stack = Arc::new(stack);
    let gateway = Arc::new(gateway);
    let failed = Arc::new(AtomicUsize::new(0));
    let ok = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(tokio::sync::Notify::new());
    let mut clients = Vec::new();
    for _ in 0..CONCURRENCY {
        let (stack, gateway, failed, ok, stop) = (
            stack.clone(),
            gateway.clone(),
            failed.clone(),
            ok.clone(),
            stop.clone(),
        );
        clients.push(tokio::spawn(async move {
            let http = client();
            let stopped = stop.notified();
            tokio::pin!(stopped);
            loop {
                tokio::select! {
                    () = &mut stopped => return,
                    status = chat_status(&stack, &http, &gateway) => {
                        let counter = if status == 200 { &ok } else { &failed };
                        counter.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        }));
    }
    let served = |n| {
        let ok = ok.clone();
        async move { ok.load(Ordering::SeqCst) >= n }
    };
    assert!(svc_testkit::eventually(WITHIN, || served(20)).await);
    second_proxy.cut();
    let at_cut = ok.load(Ordering::SeqCst);
    assert!(svc_testkit::eventually(WITHIN, || served(at_cut + 100)).await);
    stop.notify_waiters();
    for handle in clients {
        handle.await.unwrap();
    }
    let failed = failed.load(Ordering::SeqCst);
    assert!(
        failed <= CONCURRENCY,
        "{failed} requests failed; only the {CONCURRENCY} in flight may"
    );

    // Afterwards every request is answered, by the replica left (at least these 20 calls:
    // a call the stopped clients abandoned may still be counted after `before`).
    let before = validate_token_calls(&http, &stack.auth).await;
    for _ in 0..20 {
        assert_eq!(chat_status(&stack, &http, &gateway).await, 200);
    }
    assert!(validate_token_calls(&http, &stack.auth).await >= before + 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dns_name_is_resolved_and_balanced() {
    let stack = Stack::start(Script::Json(200, completion("ok"), vec![])).await;
    // `localhost` may resolve to ::1 as well, where nothing listens: that address is dropped
    // by its health watch, and the calls go to 127.0.0.1.
    let name = format!("localhost:{}", stack.auth_proxy.addr().port());
    let gateway = stack
        .gateway(&[
            ("SVC_AUTH_GRPC_ADDR", &name),
            ("SVC_AUTH_VALIDATE_TIMEOUT", "2s"),
        ])
        .await;
    let http = client();
    let answered = svc_testkit::eventually(WITHIN, || async {
        chat_status(&stack, &http, &gateway).await == 200
    })
    .await;
    assert!(
        answered,
        "the gateway never reached the auth server by name"
    );
    for _ in 0..20 {
        assert_eq!(chat_status(&stack, &http, &gateway).await, 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_shuts_down_leaves_the_set_before_its_connections_close() {
    let stack = Stack::start(Script::Json(200, completion("ok"), vec![])).await;
    let (second, _second_proxy, gateway) = two_replicas(&stack).await;
    let http = client();
    for _ in 0..20 {
        assert_eq!(chat_status(&stack, &http, &gateway).await, 200);
    }
    // NOT_SERVING reaches the health watch first: no call is sent to it afterwards, so none
    // fails.
    let stopping = std::time::Instant::now();
    second.shutdown().await.expect("graceful shutdown");
    // The watch lets go at NOT_SERVING, so the shutdown need not wait out its grace period.
    assert!(
        stopping.elapsed() < Duration::from_secs(5),
        "{:?}",
        stopping.elapsed()
    );
    let before = validate_token_calls(&http, &stack.auth).await;
    for _ in 0..40 {
        assert_eq!(chat_status(&stack, &http, &gateway).await, 200);
    }
    assert_eq!(validate_token_calls(&http, &stack.auth).await, before + 40);
}
