//! The live provider through the gateway, against a fake OpenAI upstream on loopback: the
//! provider error table, what travels upstream, and SSE pass-through.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::{
    Env, LIVE_MODEL, PROVIDER_KEY, Script, assert_envelope, chat_body, chunk, completion,
    json_body, next_data, open, send,
};

/// Bounds every wait on the gateway or the upstream; never a synchronisation sleep.
const WITHIN: Duration = Duration::from_secs(5);

#[tokio::test]
async fn success_passes_the_provider_body_and_status() {
    let env = Env::live(
        Script::Json(200, completion("Hello from upstream"), vec![]),
        &[],
    )
    .await;
    let reply = env.send_chat(chat_body(LIVE_MODEL)).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json(), completion("Hello from upstream"));
    assert_eq!(env.upstream().seen()[0].path, "/v1/chat/completions");
}

#[tokio::test]
async fn provider_error_table() {
    let error_body =
        |message: &str| json!({"error": {"message": message, "type": "invalid_request_error"}});
    let cases: Vec<(Script, u16, &str, Option<&str>)> = vec![
        (
            Script::Json(400, error_body("max_tokens is too large"), vec![]),
            400,
            "INVALID_REQUEST",
            None,
        ),
        (
            Script::Json(
                429,
                error_body("slow down"),
                vec![("retry-after", "17".to_owned())],
            ),
            429,
            "RATE_LIMITED",
            Some("17"),
        ),
        (
            Script::Json(429, error_body("slow down"), vec![]),
            429,
            "RATE_LIMITED",
            Some("1"),
        ),
        (
            Script::Json(401, error_body("bad key"), vec![]),
            503,
            "PROVIDER_UNAVAILABLE",
            Some("1"),
        ),
        (
            Script::Json(403, error_body("forbidden"), vec![]),
            503,
            "PROVIDER_UNAVAILABLE",
            Some("1"),
        ),
        (
            Script::Json(404, error_body("no such model"), vec![]),
            503,
            "PROVIDER_UNAVAILABLE",
            Some("1"),
        ),
        (
            Script::Json(500, error_body("boom"), vec![]),
            503,
            "PROVIDER_UNAVAILABLE",
            Some("1"),
        ),
        (
            Script::Json(502, error_body("bad gateway"), vec![]),
            503,
            "PROVIDER_UNAVAILABLE",
            Some("1"),
        ),
        (
            Script::Json(503, error_body("overloaded"), vec![]),
            503,
            "PROVIDER_UNAVAILABLE",
            Some("1"),
        ),
        (
            Script::Json(408, error_body("timeout"), vec![]),
            504,
            "PROVIDER_TIMEOUT",
            None,
        ),
        (
            Script::Json(422, error_body("bad field"), vec![]),
            400,
            "INVALID_REQUEST",
            None,
        ),
        (
            Script::Raw(200, "text/html", "<html>not json</html>"),
            503,
            "PROVIDER_UNAVAILABLE",
            Some("1"),
        ),
    ];
    let env = Env::live(Script::Hang, &[]).await;
    for (script, status, code, retry_after) in cases {
        env.upstream().set(script.clone());
        let reply = env.send_chat(chat_body(LIVE_MODEL)).await;
        assert_envelope(&reply, status, code);
        assert_eq!(reply.header("retry-after"), retry_after, "{script:?}");
    }
}

#[tokio::test]
async fn provider_400_detail_is_sanitized() {
    let message = format!(
        "Invalid key {PROVIDER_KEY} used with\nmax_tokens {}",
        "x".repeat(2000)
    );
    let env = Env::live(
        Script::Json(400, json!({"error": {"message": message}}), vec![]),
        &[],
    )
    .await;
    let reply = env.send_chat(chat_body(LIVE_MODEL)).await;
    assert_envelope(&reply, 400, "INVALID_REQUEST");
    let detail = reply.json()["error"]["detail"].as_str().unwrap().to_owned();
    assert!(
        detail.starts_with("Invalid key [redacted] used with max_tokens"),
        "{detail}"
    );
    assert!(detail.chars().count() <= 512);
    assert!(!String::from_utf8_lossy(&reply.body).contains(PROVIDER_KEY));
}

#[tokio::test]
async fn a_hanging_provider_is_504() {
    let env = Env::live(Script::Hang, &[("SVC_PROVIDER_TIMEOUT", "300ms")]).await;
    let reply = tokio::time::timeout(WITHIN, env.send_chat(chat_body(LIVE_MODEL)))
        .await
        .unwrap();
    assert_envelope(&reply, 504, "PROVIDER_TIMEOUT");
}

#[tokio::test]
async fn an_unreachable_provider_is_503() {
    let closed = svc_testkit::free_port();
    let base = format!("http://127.0.0.1:{closed}/v1");
    let vars = [
        ("SVC_PROVIDER_BASE_URL", base.as_str()),
        ("SVC_PROVIDER_MODELS", LIVE_MODEL),
    ];
    let env = Env::live(Script::Hang, &vars).await;
    let reply = env.send_chat(chat_body(LIVE_MODEL)).await;
    assert_envelope(&reply, 503, "PROVIDER_UNAVAILABLE");
}

#[tokio::test]
async fn client_credentials_never_reach_the_provider() {
    let env = Env::live(Script::Json(200, completion("ok"), vec![]), &[]).await;
    let body = json!({"model": LIVE_MODEL, "messages": [{"role": "user", "content": "hi"}], "top_p": 0.25, "user": "u-7"});
    let request = env
        .chat(&body)
        .header("idempotency-key", "key-123")
        .header("x-svc-session-id", "s-1")
        .header("cookie", "session=abc")
        .body(json_body(&body))
        .unwrap();
    let reply = send(&env.client, request).await;
    assert_eq!(reply.status, 200);
    let seen = env.upstream().seen();
    assert_eq!(seen.len(), 1);
    let headers = &seen[0].headers;
    assert_eq!(headers["authorization"], format!("Bearer {PROVIDER_KEY}"));
    assert_eq!(headers.get_all("authorization").iter().count(), 1);
    for absent in [
        "idempotency-key",
        "x-svc-agent-id",
        "x-svc-session-id",
        "cookie",
    ] {
        assert!(headers.get(absent).is_none(), "{absent} was forwarded");
    }
    let raw = format!("{headers:?}");
    assert!(
        !raw.contains(&env.world.chat_token),
        "the client's PAT was forwarded"
    );
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(
        headers["x-request-id"],
        reply.header("x-request-id").unwrap()
    );
    let forwarded: serde_json::Value = serde_json::from_slice(&seen[0].body).unwrap();
    assert_eq!(
        forwarded, body,
        "the body, unknown keys included, travels as sent"
    );
}

#[tokio::test]
async fn stream_chunks_arrive_before_the_upstream_finishes() {
    let script = Script::Stream {
        before: vec![chunk("Hel")],
        after: vec![chunk("lo"), "data: [DONE]\n\n".to_owned()],
        fail: false,
    };
    let env = Env::live(script, &[]).await;
    let body = json!({"model": LIVE_MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": true});
    let response = open(&env.client, env.chat(&body).body(json_body(&body)).unwrap()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert_eq!(response.headers()["x-accel-buffering"], "no");
    assert_eq!(response.headers()["cache-control"], "no-cache");
    assert!(response.headers().contains_key("x-ratelimit-limit"));
    let mut body = response.into_body();
    // The upstream holds the rest until released: this frame can only be here if the gateway
    // passed it on without waiting for the end.
    let first = tokio::time::timeout(WITHIN, next_data(&mut body))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first, chunk("Hel"));
    env.upstream().release();
    let mut rest = Vec::new();
    while let Some(data) = tokio::time::timeout(WITHIN, next_data(&mut body))
        .await
        .unwrap()
    {
        rest.extend_from_slice(&data);
    }
    assert_eq!(
        String::from_utf8(rest).unwrap(),
        format!("{}data: [DONE]\n\n", chunk("lo"))
    );
}

#[tokio::test]
async fn an_upstream_failure_mid_stream_ends_with_an_error_event() {
    let script = Script::Stream {
        before: vec![chunk("Hel")],
        after: vec![],
        fail: true,
    };
    let env = Env::live(script, &[]).await;
    let body = json!({"model": LIVE_MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": true});
    let response = open(&env.client, env.chat(&body).body(json_body(&body)).unwrap()).await;
    let request_id = response.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut body = response.into_body();
    let first = tokio::time::timeout(WITHIN, next_data(&mut body))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first, chunk("Hel"));
    env.upstream().release();
    let mut rest = Vec::new();
    while let Some(data) = tokio::time::timeout(WITHIN, next_data(&mut body))
        .await
        .unwrap()
    {
        rest.extend_from_slice(&data);
    }
    let text = String::from_utf8(rest).unwrap();
    let event = text
        .trim_end()
        .strip_prefix("data: ")
        .expect("one final data event");
    let json: serde_json::Value = serde_json::from_str(event).unwrap();
    assert_eq!(json["error"]["code"], "PROVIDER_UNAVAILABLE");
    assert_eq!(json["error"]["request_id"], request_id);
}

#[tokio::test]
async fn a_client_disconnect_cancels_the_upstream_request() {
    let script = Script::Stream {
        before: vec![chunk("Hel")],
        after: vec![chunk("never sent")],
        fail: false,
    };
    let env = Env::live(script, &[]).await;
    let body = json!({"model": LIVE_MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": true});
    let response = open(&env.client, env.chat(&body).body(json_body(&body)).unwrap()).await;
    let mut body = response.into_body();
    let first = tokio::time::timeout(WITHIN, next_data(&mut body))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first, chunk("Hel"));
    drop(body);
    tokio::time::timeout(WITHIN, env.upstream().stream_dropped())
        .await
        .expect("the gateway dropped the upstream stream after the client left");
}

#[tokio::test]
async fn a_stalled_stream_ends_with_a_timeout_event() {
    let script = Script::Stream {
        before: vec![chunk("Hel")],
        after: vec![chunk("never sent")],
        fail: false,
    };
    let env = Env::live(script, &[("SVC_PROVIDER_TIMEOUT", "300ms")]).await;
    let body = json!({"model": LIVE_MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": true});
    let response = open(&env.client, env.chat(&body).body(json_body(&body)).unwrap()).await;
    let mut body = response.into_body();
    let first = tokio::time::timeout(WITHIN, next_data(&mut body))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first, chunk("Hel"));
    // The upstream is never released: the gap between chunks runs into the provider timeout.
    let last = tokio::time::timeout(WITHIN, next_data(&mut body))
        .await
        .unwrap()
        .unwrap();
    let text = std::str::from_utf8(&last).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(text.trim_end().strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!(json["error"]["code"], "PROVIDER_TIMEOUT");
    assert!(
        tokio::time::timeout(WITHIN, next_data(&mut body))
            .await
            .unwrap()
            .is_none(),
        "the stream ends"
    );
}

#[tokio::test]
async fn an_upstream_event_over_one_mib_ends_the_stream_with_the_error_event() {
    // One event of 48 MiB, as in the report, in 64 KiB frames after a normal chunk.
    let piece = "x".repeat(64 * 1024);
    let mut before = vec![
        chunk("Hel"),
        "data: {\"choices\": [{\"delta\": {\"content\": \"".to_owned(),
    ];
    before.extend(std::iter::repeat_n(piece, 48 * 16));
    let huge: usize = before.iter().map(String::len).sum();
    let script = Script::Stream {
        before,
        after: vec![],
        fail: false,
    };
    let env = Env::live(script, &[]).await;
    let body = json!({"model": LIVE_MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": true});
    let response = open(&env.client, env.chat(&body).body(json_body(&body)).unwrap()).await;
    let mut body = response.into_body();
    let mut received = Vec::new();
    while let Some(data) = tokio::time::timeout(WITHIN * 2, next_data(&mut body))
        .await
        .expect("the stream ends")
    {
        received.extend_from_slice(&data);
    }
    let text = String::from_utf8(received).unwrap();
    assert!(
        text.starts_with(&chunk("Hel")),
        "{}",
        &text[..80.min(text.len())]
    );
    assert!(
        !text.contains("xxxx"),
        "a fragment of the long event reached the client"
    );
    let event = text[chunk("Hel").len()..]
        .trim_end()
        .strip_prefix("data: ")
        .expect("one final data event");
    let json: serde_json::Value = serde_json::from_str(event).unwrap();
    assert_eq!(json["error"]["code"], "PROVIDER_UNAVAILABLE");
    // The gateway stopped reading about 1 MiB in: the rest stayed with the upstream.
    tokio::time::timeout(WITHIN, env.upstream().stream_dropped())
        .await
        .expect("the gateway dropped the upstream stream");
    let streamed = env.upstream().streamed_bytes();
    assert!(
        streamed < huge / 4,
        "the upstream sent {streamed} of {huge} bytes"
    );
}
