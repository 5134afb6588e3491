use std::time::Duration;

use super::*;
use crate::budget::Price;

const GOOD: &str = r#"
[[providers]]
name = "openai"
kind = "openai"
base_url = "https://api.openai.com/v1/"
api_key_env = "OPENAI_API_KEY"
timeout = "20s"

[[providers]]
name = "anthropic"
kind = "anthropic"
api_key_env = "ANTHROPIC_API_KEY"
breaker_failures = 3
breaker_cooldown = "5s"

[[providers]]
name = "local"
kind = "mock"

[[models]]
name = "gpt-4o"
targets = ["openai:gpt-4o-2024", "local"]

[[models]]
name = "claude-*"
targets = ["anthropic"]
"#;

fn env_with(anthropic: bool) -> Vars {
    let mut pairs = vec![("OPENAI_API_KEY", "sk-openai")];
    if anthropic {
        pairs.push(("ANTHROPIC_API_KEY", "sk-ant"));
    }
    Vars::from_pairs(pairs)
}

fn env() -> Vars {
    env_with(true)
}

fn refused(text: &str) -> String {
    parse_file(text, &env()).expect_err("a refused file")
}

/// GOOD with `from` replaced by `to`.
fn good_with(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "{from}");
    GOOD.replacen(from, to, 1)
}

#[test]
fn a_good_file_is_read_whole() {
    let file = parse_file(GOOD, &env()).unwrap();
    let [openai, anthropic, local] = &file.providers[..] else {
        panic!("three providers")
    };
    assert_eq!(openai.kind, ProviderKind::OpenAi);
    assert_eq!(
        openai.base_url.as_deref(),
        Some("https://api.openai.com/v1")
    );
    assert_eq!(
        openai.api_key.as_ref().map(Secret::expose),
        Some("sk-openai")
    );
    assert_eq!(openai.timeout, Duration::from_secs(20));
    assert_eq!(openai.breaker, BreakerSettings::default());
    assert_eq!(
        anthropic.base_url.as_deref(),
        Some(DEFAULT_ANTHROPIC_BASE_URL)
    );
    assert_eq!(
        anthropic.breaker,
        BreakerSettings {
            failures: 3,
            cooldown: Duration::from_secs(5)
        }
    );
    assert_eq!(local.kind, ProviderKind::Mock);
    assert_eq!(
        file.models[0].targets,
        [
            TargetEntry {
                provider: 0,
                model: Some("gpt-4o-2024".into())
            },
            TargetEntry {
                provider: 2,
                model: None
            }
        ]
    );
    assert_eq!(
        (file.models[1].name.as_str(), file.models[1].prefix),
        ("claude-", true)
    );
}

#[test]
fn an_unknown_kind_names_the_entry() {
    assert_eq!(
        refused(&good_with("kind = \"mock\"", "kind = \"x\"")),
        "providers[2]: unknown kind \"x\" (openai, anthropic or mock)"
    );
}

#[test]
fn an_unknown_provider_in_a_target() {
    assert_eq!(
        refused(&good_with("\"anthropic\"]", "\"bedrock\"]")),
        "models[1]: targets[0]: unknown provider \"bedrock\""
    );
}

#[test]
fn a_missing_key_variable() {
    assert_eq!(
        parse_file(GOOD, &env_with(false)).unwrap_err(),
        "providers[1]: api_key_env: ANTHROPIC_API_KEY is not set"
    );
    assert_eq!(
        refused(&good_with("api_key_env = \"ANTHROPIC_API_KEY\"\n", "")),
        "providers[1]: api_key_env is required for kind \"anthropic\""
    );
}

#[test]
fn a_duplicate_model_name() {
    assert_eq!(
        refused(&good_with("name = \"claude-*\"", "name = \"gpt-4o\"")),
        "models[1]: duplicate model name \"gpt-4o\""
    );
}

#[test]
fn a_duplicate_provider_name() {
    assert_eq!(
        refused(&good_with("name = \"local\"", "name = \"openai\"")),
        "providers[2]: duplicate provider name \"openai\""
    );
}

#[test]
fn a_bad_url() {
    assert_eq!(
        refused(&good_with("https://api.openai.com/v1/", "ftp://x")),
        "providers[0]: base_url: \"ftp://x\" is not an http(s) URL"
    );
    assert_eq!(
        refused(&good_with(
            "base_url = \"https://api.openai.com/v1/\"\n",
            ""
        )),
        "providers[0]: base_url is required"
    );
}

#[test]
fn a_bad_timeout() {
    let reason = refused(&good_with("\"20s\"", "\"20\""));
    assert!(reason.starts_with("providers[0]: timeout: "), "{reason}");
    let reason = refused(&good_with("breaker_failures = 3", "breaker_failures = 0"));
    assert_eq!(
        reason,
        "providers[1]: breaker_failures: 0 is not a positive integer"
    );
}

#[test]
fn bad_names_and_shapes() {
    let reason = refused(&good_with("name = \"local\"", "name = \"lo:cal\""));
    assert!(
        reason.starts_with("providers[2]: name \"lo:cal\""),
        "{reason}"
    );
    assert_eq!(
        refused(&good_with("claude-*", "cla*ude")),
        "models[1]: name \"cla*ude\": only a trailing * is a pattern"
    );
    assert_eq!(
        refused(&good_with("\"openai:gpt-4o-2024\"", "\"openai:\"")),
        "models[0]: targets[0]: \"openai:\" names no upstream model"
    );
    let reason = refused(&good_with(
        "timeout = \"20s\"",
        "timeout = \"20s\"\ncolour = 1",
    ));
    assert!(reason.starts_with("line "), "{reason}");
    assert!(reason.contains("colour"), "{reason}");
    assert!(!reason.contains('\n'), "{reason}");
    assert_eq!(
        refused("[[providers]]\nname = \"a\"\nkind = \"mock\"\n"),
        "no [[models]] entry"
    );
}

#[test]
fn the_variable_reads_the_file_and_replaces_the_single_provider_ones() {
    use crate::config::{Config, SVC_PROVIDERS_FILE};

    let dir = svc_testkit::TempDir::create();
    let path = dir.path().join("providers.toml");
    std::fs::write(&path, GOOD).unwrap();
    let path = path.to_str().unwrap();
    let vars = |extra: &[(&'static str, &'static str)]| {
        let mut vars: Vec<(String, String)> = vec![
            ("OPENAI_API_KEY".into(), "sk-openai".into()),
            ("ANTHROPIC_API_KEY".into(), "sk-ant".into()),
        ];
        vars.push(("SVC_AUTH_GRPC_ADDR".into(), "127.0.0.1:9091".into()));
        vars.push((SVC_PROVIDERS_FILE.into(), path.into()));
        vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        vars
    };
    let config = Config::from_map(vars(&[])).unwrap();
    assert_eq!(config.provider.file.map(|f| f.models.len()), Some(2));
    assert_eq!(config.provider.models, ["gpt-4o"], "the concrete names");
    // Production needs no SVC_LLM_MODE with a file.
    let production = [
        ("SVC_ENV", "production"),
        ("SVC_GRPC_ALLOW_PLAINTEXT", "true"),
    ];
    assert!(Config::from_map(vars(&production)).is_ok());
    let both = Config::from_map(vars(&[("SVC_PROVIDER_BASE_URL", "http://x")])).unwrap_err();
    assert_eq!(both.variable, SVC_PROVIDERS_FILE);
    assert!(both.problem.contains("SVC_PROVIDER_BASE_URL"), "{both}");

    let missing = format!("{path}.missing");
    let mut vars = vars(&[]);
    vars.retain(|(k, _)| k != SVC_PROVIDERS_FILE);
    vars.push((SVC_PROVIDERS_FILE.into(), missing.clone()));
    let error = Config::from_map(vars).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with(&format!("SVC_PROVIDERS_FILE: {missing}: cannot read")),
        "{error}"
    );
}

/// GOOD with one `[[mcp_servers]]` entry of `body` appended.
fn with_mcp(body: &str) -> String {
    format!("{GOOD}\n[[mcp_servers]]\n{body}\n")
}

#[test]
fn mcp_servers_are_read_with_headers_from_the_environment() {
    let text = with_mcp(
        "name = \"git_hub-1\"\nurl = \"http://127.0.0.1:9/mcp\"\ntimeout = \"5s\"\n\
         headers_env = { \"Authorization\" = \"GITHUB_MCP_AUTH\" }",
    );
    let env = Vars::from_pairs([
        ("OPENAI_API_KEY", "sk-openai"),
        ("ANTHROPIC_API_KEY", "sk-ant"),
        ("GITHUB_MCP_AUTH", "Bearer gh-secret"),
    ]);
    let file = parse_file(&text, &env).unwrap();
    let [server] = &file.mcp_servers[..] else {
        panic!("one server")
    };
    assert_eq!(server.name, "git_hub-1");
    assert_eq!(server.url, "http://127.0.0.1:9/mcp");
    assert_eq!(server.timeout, Duration::from_secs(5));
    assert_eq!(server.headers.len(), 1);
    assert_eq!(server.headers[0].0, "authorization");
    assert_eq!(server.headers[0].1.expose(), "Bearer gh-secret");
    assert!(parse_file(GOOD, &env).unwrap().mcp_servers.is_empty());
}

#[test]
fn a_bad_mcp_server_names_its_entry() {
    for (body, expected) in [
        (
            "name = \"a.b\"\nurl = \"http://h/mcp\"",
            "mcp_servers[0]: name \"a.b\"",
        ),
        (
            "name = \"a\"\nurl = \"ftp://h/mcp\"",
            "mcp_servers[0]: url:",
        ),
        (
            "name = \"a\"\nurl = \"http://h/mcp\"\nheaders_env = { \"Authorization\" = \"UNSET_VAR\" }",
            "mcp_servers[0]: headers_env: UNSET_VAR is not set",
        ),
        (
            "name = \"a\"\nurl = \"http://h/mcp\"\nheaders_env = { \"X-SVC-Agent-ID\" = \"OPENAI_API_KEY\" }",
            "mcp_servers[0]: headers_env: \"X-SVC-Agent-ID\" is set by the gateway",
        ),
        (
            "name = \"a\"\nurl = \"http://h/mcp\"\ntimeout = \"soon\"",
            "mcp_servers[0]: timeout:",
        ),
        (
            "name = \"a\"\nurl = \"http://h/mcp\"\ntoken = \"x\"",
            "unknown field",
        ),
    ] {
        let error = refused(&with_mcp(body));
        assert!(error.contains(expected), "{error} lacks {expected}");
    }
    let twice = format!(
        "{}\n[[mcp_servers]]\nname = \"a\"\nurl = \"http://h/mcp\"\n",
        with_mcp("name = \"a\"\nurl = \"http://h/mcp\"")
    );
    assert!(refused(&twice).contains("mcp_servers[1]: duplicate server name \"a\""));
}

#[test]
fn prices_are_read_and_cached_input_defaults_to_input() {
    let text = good_with(
        "targets = [\"openai:gpt-4o-2024\", \"local\"]",
        "targets = [\"openai:gpt-4o-2024\", \"local\"]\nprice = { input = 2.50, output = 10.00, cached_input = 1.25 }",
    )
    .replace(
        "targets = [\"anthropic\"]",
        "targets = [\"anthropic\"]\nprice = { input = 3, output = 15 }",
    );
    let file = parse_file(&text, &env()).unwrap();
    assert_eq!(
        file.models[0].price,
        Some(Price {
            input: 2_500_000,
            output: 10_000_000,
            cached_input: 1_250_000
        })
    );
    assert_eq!(
        file.models[1].price.map(|p| p.cached_input),
        Some(3_000_000)
    );
    assert_eq!(parse_file(GOOD, &env()).unwrap().models[0].price, None);
}

#[test]
fn a_malformed_or_negative_price_names_the_entry() {
    let priced = |price: &str| {
        refused(&good_with(
            "targets = [\"anthropic\"]",
            &format!("targets = [\"anthropic\"]\nprice = {price}"),
        ))
    };
    assert_eq!(
        priced("{ input = -1, output = 2 }"),
        "models[1]: price.input: -1 is not a non-negative amount"
    );
    assert!(
        priced("{ input = 1 }").contains("missing field `output`"),
        "{}",
        priced("{ input = 1 }")
    );
    let reason = priced("{ input = 1, output = 2, cache = 1 }");
    assert!(reason.contains("unknown field `cache`"), "{reason}");
    let reason = priced("\"cheap\"");
    assert!(reason.starts_with("line "), "{reason}");
}
