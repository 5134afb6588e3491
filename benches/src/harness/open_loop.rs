//! Open-loop load: requests start on a fixed schedule whatever the answers do, and each
//! latency counts from the request's scheduled start, not from when a connection was free.
//! That is the correction for coordinated omission: a stall shows as the queue it causes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::load::PhaseStats;
use crate::load::client::{REQUEST_TIMEOUT, Target, connect, request};

/// Most connections an open-loop phase opens; past them requests wait for one (and that wait
/// is in their latency).
pub const MAX_CONNECTIONS: usize = 256;

/// Sends `rate` requests a second for `duration` to `target`.
pub async fn run(target: &Target, rate: u32, duration: Duration) -> PhaseStats {
    let idle: Arc<Mutex<Vec<SendRequest<Full<Bytes>>>>> = Arc::new(Mutex::new(Vec::new()));
    let open = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let interval = Duration::from_secs_f64(1.0 / f64::from(rate.max(1)));
    let count = (duration.as_secs_f64() * f64::from(rate)).ceil() as usize;
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(count);
    for i in 0..count {
        let scheduled = started + interval.mul_f64(i as f64);
        tokio::time::sleep_until(scheduled).await;
        let (target, idle, open) = (target.clone(), idle.clone(), open.clone());
        tasks.push(tokio::spawn(async move {
            let permit = open.acquire_owned().await.ok();
            let reused = idle.lock().await.pop();
            let outcome = tokio::time::timeout(REQUEST_TIMEOUT, async {
                let mut sender = match reused {
                    Some(sender) if !sender.is_closed() => sender,
                    _ => connect(target.addr).await.map_err(|_| "connect")?,
                };
                sender.ready().await.map_err(|_| "transport")?;
                let response = sender
                    .send_request(request(&target, false))
                    .await
                    .map_err(|_| "transport")?;
                let status = response.status();
                response
                    .into_body()
                    .collect()
                    .await
                    .map_err(|_| "transport")?;
                Ok::<_, &str>((status, sender))
            })
            .await;
            drop(permit);
            match outcome {
                Ok(Ok((StatusCode::OK, sender))) => {
                    idle.lock().await.push(sender);
                    Ok(scheduled.elapsed())
                }
                Ok(Ok((status, sender))) => {
                    idle.lock().await.push(sender);
                    Err(format!("status {}", status.as_u16()))
                }
                Ok(Err(cause)) => Err(cause.to_owned()),
                Err(_) => Err("timeout".to_owned()),
            }
        }));
    }
    let mut latencies = Vec::with_capacity(count);
    let mut failures = BTreeMap::new();
    for task in tasks {
        match task.await {
            Ok(Ok(latency)) => latencies.push(latency),
            Ok(Err(cause)) => *failures.entry(cause).or_default() += 1,
            Err(_) => *failures.entry("client task".to_owned()).or_default() += 1,
        }
    }
    PhaseStats::new(target.name, count, latencies, failures, started.elapsed())
}
