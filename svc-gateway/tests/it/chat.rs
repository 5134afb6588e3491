//! The chat route through the whole gateway stack, with the mock provider.

use crate::support;

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use serde_json::json;
use support::{Env, assert_envelope, chat_body, json_body, send};

#[tokio::test]
async fn mock_completion_is_openai_shaped() {
    let env = Env::mock(&[]).await;
    let reply = env.send_chat(chat_body("svc-mock-1")).await;
    assert_eq!(reply.status, 200);
    let json = reply.json();
    assert_eq!(json["object"], "chat.completion");
    assert_eq!(json["model"], "svc-mock-1");
    assert_eq!(json["choices"][0]["message"]["role"], "assistant");
    assert_eq!(json["choices"][0]["finish_reason"], "stop");
    assert!(json["usage"]["total_tokens"].as_u64().unwrap() > 0);
    for header in [
        "x-request-id",
        "x-trace-id",
        "x-response-time",
        "x-svc-session-id",
        "x-ratelimit-limit",
    ] {
        assert!(reply.header(header).is_some(), "{header} missing");
    }
    assert_eq!(reply.header("x-ratelimit-limit"), Some("600"));
}

#[tokio::test]
async fn alias_path_is_the_same_handler() {
    let env = Env::mock(&[]).await;
    let body = chat_body("svc-mock-1");
    let request = env
        .chat(&body)
        .uri(env.url("/proxy/v1/chat/completions"))
        .body(json_body(&body))
        .unwrap();
    let reply = send(&env.client, request).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json()["object"], "chat.completion");
}

#[tokio::test]
async fn unsupported_media_type_is_415() {
    let env = Env::mock(&[]).await;
    let body = chat_body("svc-mock-1");
    let mut request = env.chat(&body).body(json_body(&body)).unwrap();
    request
        .headers_mut()
        .insert("content-type", "text/plain".parse().unwrap());
    assert_envelope(
        &send(&env.client, request).await,
        415,
        "UNSUPPORTED_MEDIA_TYPE",
    );
}

#[tokio::test]
async fn malformed_json_is_400_invalid_json() {
    let env = Env::mock(&[]).await;
    let mut request = env
        .chat(&json!(null))
        .body(Full::new(Bytes::from_static(b"{\"model\":")))
        .unwrap();
    request
        .headers_mut()
        .insert("content-length", "9".parse().unwrap());
    assert_envelope(&send(&env.client, request).await, 400, "INVALID_JSON");
}

#[tokio::test]
async fn validation_errors_name_each_field() {
    let env = Env::mock(&[]).await;
    let reply = env
        .send_chat(json!({"model": 7, "messages": [{"role": "user"}], "stream": "yes"}))
        .await;
    assert_envelope(&reply, 400, "VALIDATION_ERROR");
    let json = reply.json();
    let fields: Vec<(&str, &str)> = json["error"]["field_errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["field"].as_str().unwrap(), f["code"].as_str().unwrap()))
        .collect();
    assert_eq!(
        fields,
        [
            ("model", "INVALID_FORMAT"),
            ("messages[0].content", "REQUIRED"),
            ("stream", "INVALID_FORMAT")
        ]
    );
}

#[tokio::test]
async fn unregistered_model_is_501() {
    let env = Env::mock(&[]).await;
    let reply = env.send_chat(chat_body("gpt-unknown")).await;
    assert_envelope(&reply, 501, "PROVIDER_NOT_CONFIGURED");
}

#[tokio::test]
async fn oversize_body_is_413() {
    let env = Env::mock(&[("SVC_MAX_REQUEST_BODY_BYTES", "512")]).await;
    let body =
        json!({"model": "svc-mock-1", "messages": [{"role": "user", "content": "x".repeat(600)}]});
    assert_envelope(&env.send_chat(body).await, 413, "PAYLOAD_TOO_LARGE");
}

#[tokio::test]
async fn idempotency_key_with_stream_is_a_validation_error() {
    let env = Env::mock(&[]).await;
    let body = json!({"model": "svc-mock-1", "messages": [{"role": "user", "content": "hi"}], "stream": true});
    let request = env
        .chat(&body)
        .header("idempotency-key", "k-1")
        .body(json_body(&body))
        .unwrap();
    let reply = send(&env.client, request).await;
    assert_envelope(&reply, 400, "VALIDATION_ERROR");
    assert_eq!(reply.json()["error"]["field_errors"][0]["field"], "stream");
}

#[tokio::test]
async fn mock_streams_server_sent_events() {
    let env = Env::mock(&[]).await;
    let body = json!({"model": "svc-mock-1", "messages": [{"role": "user", "content": "hi"}], "stream": true});
    let reply = env.send_chat(body).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    assert_eq!(reply.header("x-accel-buffering"), Some("no"));
    assert_eq!(reply.header("cache-control"), Some("no-cache"));
    assert!(reply.header("x-ratelimit-remaining").is_some());
    let text = String::from_utf8(reply.body.to_vec()).unwrap();
    assert!(text.starts_with("data: {"));
    assert!(text.ends_with("data: [DONE]\n\n"));
    assert!(text.contains("chat.completion.chunk"));
}

#[tokio::test]
async fn session_ids_are_kept_or_minted() {
    let env = Env::mock(&[]).await;
    let body = chat_body("svc-mock-1");
    let request = env
        .chat(&body)
        .header("x-svc-session-id", "thread:42.a_b-c")
        .body(json_body(&body))
        .unwrap();
    let reply = send(&env.client, request).await;
    assert_eq!(reply.header("x-svc-session-id"), Some("thread:42.a_b-c"));

    let request = env
        .chat(&body)
        .header("x-svc-session-id", "x".repeat(65))
        .body(json_body(&body))
        .unwrap();
    let minted = send(&env.client, request).await;
    let id = uuid::Uuid::parse_str(minted.header("x-svc-session-id").unwrap()).unwrap();
    assert_eq!(id.get_version_num(), 7);

    // Echoed on rejections too.
    let request = Request::post(env.url("/v1/chat/completions"))
        .header("x-svc-session-id", "s-1")
        .body(Full::default())
        .unwrap();
    let rejected = send(&env.client, request).await;
    assert_envelope(&rejected, 401, "MISSING_TOKEN");
    assert_eq!(rejected.header("x-svc-session-id"), Some("s-1"));
}

#[tokio::test]
async fn chat_needs_the_chat_permission() {
    let env = Env::mock(&[]).await;
    let body = chat_body("svc-mock-1");
    let mut request = env.chat(&body).body(json_body(&body)).unwrap();
    let bearer = format!("Bearer {}", env.world.bare_token);
    request
        .headers_mut()
        .insert("authorization", bearer.parse().unwrap());
    assert_envelope(
        &send(&env.client, request).await,
        403,
        "INSUFFICIENT_PERMISSIONS",
    );
}

#[tokio::test]
async fn auth_and_agent_failures_use_the_envelope() {
    let env = Env::mock(&[]).await;
    let body = chat_body("svc-mock-1");
    let cases = [
        ("authorization", None, 401, "MISSING_TOKEN"),
        (
            "authorization",
            Some("Bearer svc_pat_nope".to_owned()),
            401,
            "INVALID_TOKEN",
        ),
        ("x-svc-agent-id", None, 400, "MISSING_AGENT_ID"),
        (
            "x-svc-agent-id",
            Some(uuid::Uuid::new_v4().to_string()),
            403,
            "AGENT_NOT_AUTHORIZED",
        ),
        (
            "x-svc-agent-id",
            Some(env.world.suspended_agent_id.to_string()),
            403,
            "AGENT_SUSPENDED",
        ),
    ];
    for (header, value, status, code) in cases {
        let mut request = env.chat(&body).body(json_body(&body)).unwrap();
        match value {
            Some(value) => {
                request.headers_mut().insert(header, value.parse().unwrap());
            }
            None => {
                request.headers_mut().remove(header);
            }
        }
        assert_envelope(&send(&env.client, request).await, status, code);
    }
}
