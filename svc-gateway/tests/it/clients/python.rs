//! The Python clients, from one virtualenv: the anthropic SDK, the OpenAI Agents SDK,
//! LangChain, and the openai SDK's `parse()` against the mock.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::stack::{CLAUDE, GPT, Stack};
use super::tools;
use super::upstream::{COUNTED, CUT_MARKER};
use super::{install::Skip, plane};

/// The virtualenv's Python, or why the test skips.
async fn python(client: &str) -> Option<PathBuf> {
    match tools::python().await {
        Ok(python) => Some(python),
        Err(why) => {
            println!("skipped: {client} cannot run: {}", why as Skip);
            None
        }
    }
}

/// A case's outcome, failing the test with its error when it raised.
fn outcome<'a>(out: &'a Value, case: &str) -> &'a Value {
    let outcome = &out[case];
    assert!(
        outcome.get("error").is_none(),
        "{case} raised {}: {}\n{}",
        outcome["error"],
        outcome["message"],
        outcome["trace"].as_str().unwrap_or_default()
    );
    outcome
}

/// What the upstream's answers to a `Weather` output schema hold.
fn weather() -> Value {
    json!({"city": "mock", "temperature_c": 1.0, "summary": "mock"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_anthropic_sdk_counts_tokens_and_raises_on_a_cut_stream() {
    let Some(python) = python("the anthropic SDK").await else {
        return;
    };
    let stack = Stack::start().await;
    let mut config = stack.config();
    config["cut_marker"] = json!(CUT_MARKER);
    let out = tools::script(&python, "anthropic_sdk.py", &config).await;

    // A Claude model's count is the provider's; another model's the gateway's estimate.
    assert_eq!(outcome(&out, "count_claude")["input_tokens"], COUNTED);
    let estimate = outcome(&out, "count_gpt")["input_tokens"].as_u64();
    assert!(estimate.is_some_and(|n| n > 0 && n != COUNTED), "{out}");

    let cut = outcome(&out, "cut");
    assert_eq!(cut["raised"], true, "a cut stream raises: {cut}");
    let said = format!("{} {}", cut["message"], cut["body"]);
    assert!(
        said.contains("PROVIDER_UNAVAILABLE"),
        "the code shows: {cut}"
    );
    let cuts = stack.upstream.seen().into_iter().filter(|e| e.cut).count();
    assert_eq!(cuts, 1, "{}", stack.upstream.summary());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_sdk_runs_a_tool_and_its_output_type_on_both_models() {
    let Some(python) = python("the OpenAI Agents SDK").await else {
        return;
    };
    let stack = Stack::start().await;
    let out = tools::script(&python, "agents_sdk.py", &stack.config()).await;
    let mut failures = Vec::new();
    for case in [
        "chat_gpt",
        "responses_gpt",
        "chat_claude",
        "responses_claude",
    ] {
        let result = &out[case];
        if result.get("error").is_some() {
            failures.push(format!("{case}: {} {}", result["error"], result["message"]));
            continue;
        }
        assert_eq!(result["type"], "Weather", "{case}: {result}");
        assert_eq!(result["final"], weather(), "{case}");
        assert_eq!(
            result["tool_calls"],
            json!(["mock"]),
            "{case}: one tool call"
        );
    }
    let paths = [
        ("/v1/chat/completions", GPT),
        ("/v1/responses", GPT),
        ("/v1/messages", CLAUDE),
    ];
    for (path, model) in paths {
        let turns = stack.upstream.seen_at(path, model);
        assert!(
            turns.iter().any(|t| t.has_tool_result()),
            "a tool result reached {path} for {model}: {}",
            stack.upstream.summary()
        );
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langchain_gets_structured_output_and_runs_an_anthropic_tool() {
    let Some(python) = python("LangChain").await else {
        return;
    };
    let stack = Stack::start().await;
    let out = tools::script(&python, "langchain_clients.py", &stack.config()).await;
    for case in ["structured_gpt", "structured_claude"] {
        let result = outcome(&out, case);
        assert_eq!(result["type"], "Weather", "{case}: {result}");
        assert_eq!(result["final"], weather(), "{case}");
    }
    let tool = outcome(&out, "anthropic_tool");
    assert_eq!(
        tool["tool_calls"],
        json!([{"name": "get_weather", "args": {"city": "mock"}}])
    );
    assert_eq!(tool["final"], svc_gateway::provider::mock::MOCK_REPLY);
    let turns = stack.upstream.seen_at("/v1/messages", CLAUDE);
    assert!(
        turns.iter().any(|t| t.has_tool_result()),
        "{}",
        stack.upstream.summary()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_parses_what_the_mock_makes_from_schemas() {
    let Some(python) = python("the openai SDK").await else {
        return;
    };
    let (_db, auth, seed) = plane::auth_plane().await;
    let gateway = plane::gateway(auth.grpc_addr, &[("SVC_LLM_MODE", "mock")]).await;
    let config = json!({
        "base_url": gateway.url(),
        "token": seed.chat_token,
        "agent_id": plane::agent(&seed, "active"),
        "model": "svc-mock-1",
    });
    let out = tools::script(&python, "mock_parse.py", &config).await;
    let person = json!({"name": "mock", "age": 1, "email": "mock", "nickname": "mock",
                        "addresses": [{"city": "mock", "zip_code": "mock"}]});
    assert_eq!(outcome(&out, "chat_parse")["parsed"], person);
    assert_eq!(outcome(&out, "chat_parse")["type"], "Person");
    assert_eq!(outcome(&out, "chat_stream_parse")["parsed"], person);
    assert_eq!(outcome(&out, "chat_tool")["parsed"], person);
    assert_eq!(outcome(&out, "chat_tool")["name"], "save_person");
    assert_eq!(outcome(&out, "responses_parse")["parsed"], person);
    assert_eq!(outcome(&out, "responses_tool")["arguments"], person);
    assert_eq!(outcome(&out, "messages_tool")["input"], person);
    gateway.shutdown().await;
}
