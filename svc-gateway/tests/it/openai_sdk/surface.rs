//! What `openai_sdk_surface.py` observed, held against what the provider answers, and (in
//! live mode) what the upstream received held against what the client sent.

use serde_json::{Value, json};

use super::upstream::Seen;

/// What the provider of one mode answers.
pub(crate) struct Expect {
    /// The text of a plain answer.
    pub(crate) text: &'static str,
    /// The arguments of a tool call, parsed.
    pub(crate) tool_arguments: Value,
    /// The parsed content of an answer asked for a JSON schema; `None` when the provider
    /// answers such a request with its plain text.
    pub(crate) json_reply: Option<Value>,
    /// The registry, in order.
    pub(crate) models: &'static [&'static str],
    /// The chat model.
    pub(crate) model: &'static str,
    /// `owned_by` of every model.
    pub(crate) owned_by: &'static str,
    /// The length of an embedding without `dimensions`.
    pub(crate) dimensions: usize,
}

/// The observation `name`, which must not have raised.
fn observed<'a>(results: &'a Value, name: &str) -> &'a Value {
    let check = &results[name];
    assert!(check.is_object(), "{name}: {check}");
    assert!(check.get("unexpected").is_none(), "{name} raised: {check}");
    check
}

fn adds_up(usage: &Value, prompt: &str, completion: &str) {
    let count = |name: &str| {
        usage[name]
            .as_u64()
            .unwrap_or_else(|| panic!("{name}: {usage}"))
    };
    assert!(count(prompt) > 0, "{usage}");
    assert!(count(completion) > 0, "{usage}");
    assert_eq!(
        count("total_tokens"),
        count(prompt) + count(completion),
        "{usage}"
    );
}

fn chat_usage(usage: &Value) {
    adds_up(usage, "prompt_tokens", "completion_tokens");
}

pub(crate) fn tools(results: &Value, expect: &Expect) {
    let tools = observed(results, "tools");
    assert_eq!(tools["first_finish"], "tool_calls", "{tools}");
    assert_eq!(tools["first_content"], Value::Null);
    assert_eq!(tools["call_type"], "function");
    assert_eq!(tools["call_name"], "get_weather");
    assert!(
        tools["call_id"].as_str().is_some_and(|id| !id.is_empty()),
        "{tools}"
    );
    assert_eq!(tools["call_arguments"], expect.tool_arguments);
    assert_eq!(tools["second_finish"], "stop", "{tools}");
    assert_eq!(tools["second_content"], expect.text);
    assert_eq!(tools["second_calls"], 0);
    chat_usage(&tools["usage"]);
}

pub(crate) fn vision_and_json(results: &Value, expect: &Expect) {
    let vision = observed(results, "vision");
    assert_eq!(vision["content"], expect.text, "{vision}");
    chat_usage(&vision["usage"]);

    let schema = observed(results, "json_schema");
    assert_eq!(schema["finish"], "stop", "{schema}");
    match &expect.json_reply {
        Some(parsed) => assert_eq!(&schema["parsed"], parsed, "{schema}"),
        None => assert_eq!(schema["content"], expect.text, "{schema}"),
    }
}

pub(crate) fn streams(results: &Value, expect: &Expect) {
    let streams = observed(results, "streams");
    for name in ["plain", "with_usage"] {
        let stream = &streams[name];
        assert_eq!(
            stream["classes"],
            json!(["ChatCompletionChunk"]),
            "{stream}"
        );
        assert_eq!(stream["ids"], 1, "one id across the chunks: {stream}");
        assert_eq!(stream["text"], expect.text, "{name}: {stream}");
        assert_eq!(stream["finish_reasons"], json!(["stop"]), "{stream}");
    }
    let plain = &streams["plain"];
    assert_eq!(plain["usage"], json!([]), "no usage unless asked: {plain}");
    let asked = &streams["with_usage"];
    let usage = asked["usage"].as_array().expect("usage chunks");
    assert_eq!(usage.len(), 1, "one usage chunk: {asked}");
    chat_usage(&usage[0]);
    assert_eq!(
        asked["chunks"].as_u64().unwrap_or_default(),
        plain["chunks"].as_u64().unwrap_or_default() + 1,
        "the usage chunk is the only difference"
    );
}

fn vectors(value: &Value) -> Vec<Vec<f64>> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("vectors: {value}"))
        .iter()
        .map(|v| {
            v.as_array()
                .unwrap_or_else(|| panic!("a vector: {v}"))
                .iter()
                .map(|x| x.as_f64().expect("a number"))
                .collect()
        })
        .collect()
}

fn unit(vector: &[f64]) {
    let norm = vector.iter().map(|x| x * x).sum::<f64>().sqrt();
    assert!((norm - 1.0).abs() < 1e-3, "not a unit vector: {vector:?}");
}

pub(crate) fn embeddings(results: &Value, expect: &Expect) {
    let embeddings = observed(results, "embeddings");
    assert_eq!(embeddings["object"], "list", "{embeddings}");
    assert_eq!(embeddings["indexes"], json!([0, 1]));
    let usage = &embeddings["usage"];
    assert!(
        usage["prompt_tokens"].as_u64().is_some_and(|p| p > 0),
        "{usage}"
    );
    assert_eq!(usage["total_tokens"], usage["prompt_tokens"], "{usage}");
    // Decoded from base64 by the SDK, the same numbers as asked for in JSON.
    let (decoded, floats) = (
        vectors(&embeddings["default"]),
        vectors(&embeddings["float"]),
    );
    assert_eq!(decoded.len(), 2, "{embeddings}");
    assert_ne!(decoded[0], decoded[1], "one vector per input");
    for (a, b) in decoded.iter().zip(&floats) {
        assert_eq!(a.len(), expect.dimensions, "{embeddings}");
        assert_eq!(a.len(), b.len());
        assert!(
            a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6),
            "base64 {a:?} and float {b:?} differ"
        );
        unit(a);
    }
    let keyed = embeddings["keyed"].as_array().expect("keyed calls");
    let (first, again) = (vectors(&keyed[0]), vectors(&keyed[1]));
    assert_eq!(first[0].len(), 4, "dimensions reached the provider");
    assert_eq!(first, again, "the replay is the first answer");
    assert_eq!(embeddings["keyed_replayed"], json!([null, "true"]));
}

pub(crate) fn responses(results: &Value, expect: &Expect) {
    let responses = observed(results, "responses");
    assert_eq!(responses["object"], "response", "{responses}");
    assert_eq!(responses["status"], "completed");
    assert_eq!(responses["text"], expect.text);
    adds_up(&responses["usage"], "input_tokens", "output_tokens");
    let ids = &responses["ids"];
    assert_eq!(ids[0], ids[1], "replayed, not recomputed: {responses}");
    assert_eq!(responses["replayed"], json!([null, "true"]));

    let types: Vec<&str> = responses["event_types"]
        .as_array()
        .expect("event types")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(types.first(), Some(&"response.created"), "{types:?}");
    assert_eq!(types.last(), Some(&"response.completed"), "{types:?}");
    assert!(types.contains(&"response.output_text.delta"), "{types:?}");
    assert_eq!(responses["deltas"], expect.text);
    assert_eq!(responses["completed_text"], expect.text);
    adds_up(
        &responses["completed_usage"],
        "input_tokens",
        "output_tokens",
    );
    assert_eq!(responses["helper_text"], expect.text, "responses.stream()");
    assert_eq!(responses["helper_status"], "completed");
}

pub(crate) fn models(results: &Value, expect: &Expect) {
    let models = observed(results, "models");
    assert_eq!(models["ids"], json!(expect.models), "{models}");
    assert_eq!(models["objects"], json!(["model"]));
    assert_eq!(
        models["retrieved"],
        json!({"id": expect.model, "object": "model", "owned_by": expect.owned_by})
    );
    assert!(models["created"].as_i64().is_some_and(|c| c > 0));
    assert_eq!(
        models["missing"],
        json!({"class": "NotFoundError", "status": 404, "code": "NOT_FOUND"})
    );
}

/// The body the upstream must receive for a client body: the same bytes, but for a chat
/// stream whose client did not ask for usage, which asks for it.
fn expected_upstream(path: &str, sent: &str) -> Option<Value> {
    let mut json: Value = serde_json::from_str(sent).expect("the client sent JSON");
    let adds_usage = path == "/v1/chat/completions"
        && json["stream"] == true
        && json["stream_options"]["include_usage"] != true;
    if !adds_usage {
        return None;
    }
    let options = &mut json["stream_options"];
    if !options.is_object() {
        *options = json!({});
    }
    options["include_usage"] = json!(true);
    Some(json)
}

/// Every provider call the client made reached the upstream once, with the client's JSON
/// (plus the documented usage request), the provider key, and nothing of the client's
/// credentials or idempotency keys. Replays and model lookups never reach it.
pub(crate) fn forwarded(results: &Value, seen: &[Seen], token: &str, provider_key: &str) {
    let exchanges = results["exchanges"].as_array().expect("exchanges");
    let mut forwarded = 0;
    let mut usage_added = 0;
    let mut keys = Vec::new();
    for exchange in exchanges {
        assert_eq!(exchange["authorization"], format!("Bearer {token}"));
        if let Some(key) = exchange["idempotency_key"].as_str() {
            keys.push(key.to_owned());
        }
        if exchange["method"] != "POST" {
            continue;
        }
        assert_eq!(exchange["status"], 200, "{exchange}");
        if exchange["replayed"] == "true" {
            continue;
        }
        forwarded += 1;
        let path = exchange["path"].as_str().expect("path");
        let sent = exchange["body"].as_str().expect("a body");
        let request_id = exchange["request_id"].as_str().expect("X-Request-ID");
        let matching: Vec<&Seen> = seen
            .iter()
            .filter(|s| {
                s.headers
                    .get("x-request-id")
                    .is_some_and(|v| v == request_id)
            })
            .collect();
        assert_eq!(matching.len(), 1, "one upstream call for {exchange}");
        let upstream = matching[0];
        assert_eq!(upstream.path, path);
        match expected_upstream(path, sent) {
            None => assert_eq!(
                upstream.body,
                sent.as_bytes(),
                "forwarded as sent: {exchange}"
            ),
            Some(expected) => {
                usage_added += 1;
                let received: Value = serde_json::from_slice(&upstream.body).expect("JSON");
                assert_eq!(received, expected, "only include_usage added");
            }
        }
    }
    assert_eq!(seen.len(), forwarded, "nothing else reached the upstream");
    assert!(usage_added > 0, "a stream without include_usage was sent");
    assert!(keys.len() >= 4, "keyed calls were made: {keys:?}");
    for upstream in seen {
        let headers = &upstream.headers;
        assert_eq!(
            headers.get("authorization").map(|v| v.to_str().unwrap()),
            Some(format!("Bearer {provider_key}").as_str()),
            "the provider key, not the client's token"
        );
        assert!(headers.get("idempotency-key").is_none(), "{headers:?}");
        for value in headers.values() {
            let value = value.to_str().unwrap_or_default();
            assert!(!value.contains(token), "the client's token leaked");
            assert!(
                keys.iter().all(|key| !value.contains(key.as_str())),
                "an Idempotency-Key leaked: {value}"
            );
        }
        let body = String::from_utf8_lossy(&upstream.body);
        assert!(!body.contains(token), "the client's token leaked");
    }
}
