//! The soak's load: one non-streaming chat completion every `1 / rate` seconds, alternating
//! between the gateways, each with a fresh Idempotency-Key that its body also carries, each on
//! a new connection (so a cut never leaves a client holding a dead one). Every answer is kept.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HOST};
use http::{HeaderValue, Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use tokio::time::Instant;

use super::upstream::MARKER_FIELD;
use crate::load::client::{REQUEST_TIMEOUT, connect};
use crate::load::upstream::{CHAT_PATH, MODEL};

/// Who is calling, as the seeded identity store knows them.
#[derive(Debug, Clone)]
pub struct Caller {
    pub token: String,
    pub agent: String,
}

/// What one request got, timed from the start of the load.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub sent: Duration,
    pub done: Duration,
    /// The HTTP status, or none when no answer came.
    pub status: Option<u16>,
    /// The envelope's error code, or why no answer came.
    pub code: String,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.status == Some(200)
    }
}

/// Sends `rate` requests a second for `length` from `start`, round robin over `gateways`.
pub async fn run(
    gateways: &[SocketAddr],
    caller: &Caller,
    rate: u32,
    length: Duration,
    start: Instant,
) -> Vec<Outcome> {
    let interval = Duration::from_secs_f64(1.0 / f64::from(rate.max(1)));
    let count = (length.as_secs_f64() * f64::from(rate)).floor() as usize;
    let mut tasks = Vec::with_capacity(count);
    for i in 0..count {
        let sent = interval.mul_f64(i as f64);
        tokio::time::sleep_until(start + sent).await;
        let addr = gateways[i % gateways.len().max(1)];
        let caller = caller.clone();
        tasks.push(tokio::spawn(async move {
            let (status, code) = call(addr, &caller).await;
            Outcome {
                sent,
                done: start.elapsed(),
                status,
                code,
            }
        }));
    }
    let mut outcomes = Vec::with_capacity(count);
    for task in tasks {
        if let Ok(outcome) = task.await {
            outcomes.push(outcome);
        }
    }
    outcomes
}

async fn call(addr: SocketAddr, caller: &Caller) -> (Option<u16>, String) {
    let request = match request(addr, caller) {
        Ok(request) => request,
        Err(cause) => return (None, cause),
    };
    let answer = tokio::time::timeout(REQUEST_TIMEOUT, async {
        let mut sender = connect(addr).await.map_err(|_| "connect refused")?;
        sender.ready().await.map_err(|_| "transport")?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|_| "transport")?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|_| "transport")?
            .to_bytes();
        Ok::<_, &str>((status, body))
    })
    .await;
    match answer {
        Ok(Ok((status, body))) => (Some(status), error_code(&body)),
        Ok(Err(cause)) => (None, cause.to_owned()),
        Err(_) => (None, "client timeout".to_owned()),
    }
}

/// The envelope's `error.code`, or empty for a success.
fn error_code(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("error")?.get("code")?.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn request(addr: SocketAddr, caller: &Caller) -> Result<Request<Full<Bytes>>, String> {
    let key = format!("svc-soak-{}", uuid::Uuid::new_v4().simple());
    let body = serde_json::json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": "Say hello."}],
        "max_tokens": 16,
        MARKER_FIELD: key,
    })
    .to_string();
    let header = |v: &str| HeaderValue::from_str(v).map_err(|_| "a header value".to_owned());
    Request::builder()
        .method(Method::POST)
        .uri(Uri::from_static(CHAT_PATH))
        .header(HOST, header(&addr.to_string())?)
        .header(AUTHORIZATION, header(&format!("Bearer {}", caller.token))?)
        .header("x-svc-agent-id", header(&caller.agent)?)
        .header("idempotency-key", header(&key)?)
        .header(CONTENT_TYPE, "application/json")
        .header(CONTENT_LENGTH, body.len())
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())
}

/// Writes `outcomes` as CSV: sent and done in milliseconds from the start, status, code.
pub fn write_csv(path: &std::path::Path, outcomes: &[Outcome]) -> std::io::Result<()> {
    let mut csv = String::from("sent_ms,done_ms,status,code\n");
    for o in outcomes {
        csv.push_str(&format!(
            "{},{},{},{}\n",
            o.sent.as_millis(),
            o.done.as_millis(),
            o.status.map_or(String::new(), |s| s.to_string()),
            o.code
        ));
    }
    std::fs::write(path, csv)
}
