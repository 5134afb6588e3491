//! The caller's W3C trace id in the auth server's log lines: ValidateToken and ValidateAgent
//! log inside a span carrying the `traceparent`'s trace id, and never the token.
//!
//! The server runs in this test's single-threaded runtime, so the thread-local subscriber
//! installed here sees every line the server writes for these calls, in the production JSON
//! format.

use std::sync::{Arc, Mutex};

use crate::common::*;
use serde_json::Value;
use svc_auth_server::pat::Pat;
use svc_auth_server::telemetry::{self, LogFormat, LogLevel, LogSettings};
use svc_core::trace::TraceId;
use svc_core::trace::TraceParent;
use svc_proto::v1;
use tonic::Request;
use tracing_subscriber::fmt::MakeWriter;

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'w> MakeWriter<'w> for Buffer {
    type Writer = Buffer;
    fn make_writer(&'w self) -> Buffer {
        self.clone()
    }
}

impl Buffer {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

fn traced<T>(message: T, traceparent: &str) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("traceparent", traceparent.parse().unwrap());
    request
}

/// The trace ids of the spans a JSON log line was written in.
fn trace_ids(line: &Value) -> Vec<String> {
    line["spans"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|span| span["trace_id"].as_str().map(str::to_owned))
        .collect()
}

/// The one line with `message` whose `field` is `value`.
fn line<'a>(lines: &'a [Value], message: &str, field: &str, value: &str) -> &'a Value {
    let found: Vec<&Value> = lines
        .iter()
        .filter(|line| line["message"] == message && line[field] == value)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{message} lines with {field}={value}: {lines:#?}"
    );
    found[0]
}

#[tokio::test]
async fn validate_calls_log_the_callers_trace_id_and_never_the_token() {
    let logs = Buffer::default();
    let settings = LogSettings {
        level: LogLevel::Debug,
        format: LogFormat::Json,
    };
    let _logging = logs_of_this_thread(telemetry::subscriber(&settings, logs.clone()));

    let mut h = start().await;
    let chat = h.seed.chat_token.clone();
    let admin = h.seed.admin_token.clone();
    let chat_id = Pat::parse(&chat).unwrap().token_id().to_string();
    let admin_id = Pat::parse(&admin).unwrap().token_id().to_string();
    let wrong = Pat::generate(Pat::parse(&chat).unwrap().token_id()).expose();
    let valid_trace = TraceId::random();
    let rejected_trace = TraceId::random();
    let agent_trace = TraceId::random();
    let request = |token: &str| v1::ValidateTokenRequest {
        access_token: token.to_owned(),
        agent_id: None,
    };

    let parent = TraceParent::child_of(valid_trace).to_string();
    h.client
        .validate_token(traced(request(&chat), &parent))
        .await
        .unwrap();
    let parent = TraceParent::child_of(rejected_trace).to_string();
    h.client
        .validate_token(traced(request(&wrong), &parent))
        .await
        .unwrap_err();
    let parent = TraceParent::child_of(agent_trace).to_string();
    let agent = v1::ValidateAgentRequest {
        agent_id: agent_id(&h.seed, "suspended").to_string(),
        org_id: h.seed.org_id.to_string(),
    };
    h.client
        .validate_agent(traced(agent, &parent))
        .await
        .unwrap_err();
    // No traceparent, and one that is not valid W3C: neither gives the call a trace id.
    validate(&mut h.client, &admin).await.unwrap();
    let forged = format!("00-{chat}");
    h.client
        .validate_token(traced(request(&chat), &forged))
        .await
        .unwrap();
    drop(_logging);

    let text = logs.text();
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON log lines"))
        .collect();

    let validated: Vec<&Value> = lines
        .iter()
        .filter(|line| line["message"] == "token validated" && line["token_id"] == chat_id)
        .collect();
    assert_eq!(validated.len(), 2, "{text}");
    assert_eq!(trace_ids(validated[0]), [valid_trace.to_string()], "{text}");
    assert!(
        trace_ids(validated[1]).is_empty(),
        "a forged traceparent was used"
    );
    assert_eq!(validated[0]["spans"][0]["method"], "ValidateToken");

    let rejected = line(&lines, "token rejected", "reason", "wrong_secret");
    assert_eq!(trace_ids(rejected), [rejected_trace.to_string()], "{text}");
    let agent = line(&lines, "agent checked", "result", "denied");
    assert_eq!(trace_ids(agent), [agent_trace.to_string()], "{text}");
    assert_eq!(agent["spans"][0]["method"], "ValidateAgent");
    let untraced = line(&lines, "token validated", "token_id", &admin_id);
    assert!(trace_ids(untraced).is_empty(), "{untraced}");

    for token in [&chat, &admin, &wrong] {
        let secret = Pat::parse(token).unwrap().secret().to_owned();
        assert!(!text.contains(token.as_str()), "a full token was logged");
        assert!(!text.contains(&secret), "a secret was logged");
    }
}
