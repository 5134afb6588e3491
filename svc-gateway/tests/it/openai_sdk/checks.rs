//! What the script observed, held against SPEC and the SDK's documented behaviour.

use serde_json::Value;

use super::{CUT_TEXT, MOCK_REPLY, MODEL, RATE_LIMIT_RPM};

fn is_uuid(value: &Value) -> bool {
    value
        .as_str()
        .is_some_and(|v| uuid::Uuid::parse_str(v).is_ok())
}

fn usage_adds_up(usage: &Value) {
    let count = |name: &str| {
        usage[name]
            .as_u64()
            .unwrap_or_else(|| panic!("{name}: {usage}"))
    };
    assert!(count("prompt_tokens") > 0, "{usage}");
    assert_eq!(
        count("total_tokens"),
        count("prompt_tokens") + count("completion_tokens"),
        "{usage}"
    );
}

/// `attempts` is every HTTP response the SDK saw for one call.
fn statuses(check: &Value) -> Vec<u64> {
    check["attempts"]
        .as_array()
        .unwrap_or_else(|| panic!("attempts: {check}"))
        .iter()
        .map(|a| a["status"].as_u64().unwrap_or_default())
        .collect()
}

/// The SDK raised `class` for our envelope, and its fields carry our code and message.
fn raised(results: &Value, name: &str, class: &str, status: u64, code: &str) -> Value {
    let error = results[name].clone();
    assert_eq!(error["class"], class, "{name}: {error}");
    assert_eq!(error["status"], status, "{name}: {error}");
    assert_eq!(error["code"], code, "{name}: e.code");
    assert_eq!(error["body_code"], code, "{name}: e.body");
    let message = error["body_message"].as_str().unwrap_or_default();
    assert!(!message.is_empty(), "{name}: {error}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains(message)),
        "{name}: e.message carries ours: {error}"
    );
    assert!(is_uuid(&error["request_id"]), "{name}: {error}");
    assert_eq!(error["request_id"], error["body_request_id"], "{name}");
    error
}

pub(super) fn completions(results: &Value) {
    let create = &results["create"];
    assert_eq!(create["class"], "ChatCompletion", "{create}");
    assert_eq!(create["object"], "chat.completion");
    assert_eq!(create["model"], MODEL);
    assert_eq!(create["role"], "assistant");
    assert_eq!(create["content"], MOCK_REPLY);
    assert_eq!(create["finish_reason"], "stop");
    usage_adds_up(&create["usage"]);
    assert!(is_uuid(&create["request_id"]), "completion._request_id");
    assert_eq!(statuses(create), [200]);
    assert!(
        create["attempts"][0]["idempotency_key"].is_null(),
        "no key of its own"
    );

    let stream = &results["stream"];
    assert_eq!(
        stream["classes"],
        serde_json::json!(["ChatCompletionChunk"]),
        "{stream}"
    );
    assert_eq!(
        stream["objects"],
        serde_json::json!(["chat.completion.chunk"])
    );
    assert_eq!(stream["ids"], 1, "one id across the chunks");
    assert!(
        stream["chunks"].as_u64().unwrap_or_default() >= 3,
        "{stream}"
    );
    assert_eq!(stream["text"], MOCK_REPLY);
    assert_eq!(stream["finish_reasons"], serde_json::json!(["stop"]));
    assert_eq!(
        stream["usage"],
        serde_json::json!([]),
        "usage only when asked"
    );
    assert_eq!(stream["response_closed"], true, "ended cleanly on [DONE]");

    let usage = &results["stream_usage"];
    assert_eq!(usage["text"], MOCK_REPLY, "{usage}");
    let reported = usage["usage"].as_array().expect("usage chunks");
    assert_eq!(reported.len(), 1, "one usage chunk: {usage}");
    usage_adds_up(&reported[0]);

    // An error after the stream started is the final `data: {"error": ...}` event.
    let cut = &results["stream_cut"];
    assert_eq!(cut["class"], "APIError", "{cut}");
    assert_eq!(cut["code"], "PROVIDER_UNAVAILABLE");
    assert_eq!(
        cut["text"], CUT_TEXT,
        "the deltas before the failure arrived"
    );
    assert!(is_uuid(&cut["body_request_id"]), "{cut}");
    assert!(cut["message"].as_str().is_some_and(|m| !m.is_empty()));

    let raw = &results["raw"];
    assert_eq!(raw["status"], 200, "{raw}");
    assert!(
        raw["content_type"]
            .as_str()
            .is_some_and(|c| c.starts_with("application/json"))
    );
    assert!(is_uuid(&raw["request_id"]));
    assert_eq!(raw["parsed_request_id"], raw["request_id"]);
    assert_eq!(raw["content"], MOCK_REPLY);
    assert_eq!(raw["stream_status"], 200);
    assert!(
        raw["stream_content_type"]
            .as_str()
            .is_some_and(|c| c.starts_with("text/event-stream"))
    );
    assert_eq!(raw["stream_text"], MOCK_REPLY);

    let headers = &results["sdk_headers"];
    assert_eq!(headers["content"], MOCK_REPLY, "{headers}");
    let sent: Vec<&str> = headers["sent"]
        .as_array()
        .expect("sent headers")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for name in [
        "user-agent",
        "openai-organization",
        "openai-project",
        "x-stainless-lang",
    ] {
        assert!(sent.contains(&name), "the SDK sent {name}: {sent:?}");
    }
}

pub(super) fn errors(results: &Value) {
    let bad_token = raised(
        results,
        "bad_token",
        "AuthenticationError",
        401,
        "INVALID_TOKEN",
    );
    assert_eq!(bad_token["type"], "authentication_error");
    assert_eq!(statuses(&bad_token), [401], "a 401 is not retried");

    let missing = raised(
        results,
        "missing_agent",
        "BadRequestError",
        400,
        "MISSING_AGENT_ID",
    );
    assert_eq!(missing["type"], "invalid_request_error");

    let suspended = raised(
        results,
        "suspended_agent",
        "PermissionDeniedError",
        403,
        "AGENT_SUSPENDED",
    );
    assert_eq!(suspended["type"], "permission_error");
    assert_eq!(statuses(&suspended), [403]);

    // The SDK retries every 5xx unless told otherwise; an unknown model is not transient.
    for name in ["unknown_model", "unknown_model_stream"] {
        let error = raised(
            results,
            name,
            "InternalServerError",
            501,
            "PROVIDER_NOT_CONFIGURED",
        );
        assert_eq!(statuses(&error), [501], "{name}: not retried");
        assert_eq!(error["attempts"][0]["should_retry"], "false");
    }

    let invalid = raised(
        results,
        "invalid",
        "BadRequestError",
        400,
        "VALIDATION_ERROR",
    );
    assert_eq!(invalid["param"], "messages", "e.param names the field");
}

pub(super) fn idempotency(results: &Value) {
    let replay = &results["replay"];
    assert_eq!(replay["replay_status"], 200, "{replay}");
    assert_eq!(
        replay["replay_id"], replay["first_id"],
        "replayed, not recomputed"
    );
    assert_eq!(replay["replayed_header"], "true");
    let unkeyed = &replay["unkeyed_ids"];
    assert_ne!(unkeyed[0], unkeyed[1], "no key, no replay: {replay}");
    assert_ne!(unkeyed[0], replay["first_id"]);
    let keys: Vec<&Value> = replay["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .map(|a| &a["idempotency_key"])
        .collect();
    let key = &replay["key"];
    assert_eq!(
        keys,
        [key, key, &Value::Null, &Value::Null],
        "sent only when given"
    );

    let reuse = raised(
        results,
        "key_reuse",
        "ConflictError",
        409,
        "IDEMPOTENCY_KEY_REUSE",
    );
    assert_eq!(reuse["type"], "conflict_error");
    assert_eq!(statuses(&reuse), [409], "x-should-retry: false is obeyed");
    assert_eq!(reuse["attempts"][0]["should_retry"], "false");

    let in_progress = &results["in_progress"];
    assert_eq!(in_progress["saw_conflict"], true, "{in_progress}");
    let (a, b) = (&in_progress["calls"]["a"], &in_progress["calls"]["b"]);
    assert_eq!(
        (&a["status"], &b["status"]),
        (&200.into(), &200.into()),
        "{in_progress}"
    );
    assert_eq!(a["id"], b["id"], "one completion for one key");
    let retried: Vec<&Value> = [a, b]
        .into_iter()
        .filter(|c| c["replayed"] == "true")
        .collect();
    assert_eq!(retried.len(), 1, "one answer is the replay: {in_progress}");
    assert_ne!(
        retried[0]["retry_count"], "0",
        "reached by the SDK's own retry"
    );
    let conflicts: Vec<&Value> = in_progress["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .filter(|a| a["status"] == 409)
        .collect();
    assert!(!conflicts.is_empty(), "{in_progress}");
    for conflict in conflicts {
        assert!(
            conflict["retry_after"].is_string(),
            "Retry-After: {conflict}"
        );
        assert!(conflict["should_retry"].is_null(), "{conflict}");
    }
}

pub(super) fn rate_limit(results: &Value) {
    let limited = &results["rate_limit"];
    assert_eq!(limited["class"], "RateLimitError", "{limited}");
    assert_eq!(limited["code"], "RATE_LIMITED");
    assert_eq!(limited["limit"], RATE_LIMIT_RPM);
    assert_eq!(limited["remaining"], "0");
    let retry_after: u64 = limited["retry_after"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("Retry-After in seconds");
    // Within the SDK's two-minute cap, so with retries it would wait and try again.
    assert!((1..=60).contains(&retry_after), "{limited}");
}
