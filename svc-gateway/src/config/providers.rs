//! `SVC_PROVIDERS_FILE`: the provider registry as a TOML file.
//!
//! ```toml
//! [[providers]]
//! name = "openai"                 # the label in metrics and logs
//! kind = "openai"                 # openai (any OpenAI-compatible API) | anthropic | mock
//! base_url = "https://api.openai.com/v1"
//! api_key_env = "OPENAI_API_KEY"  # the key is read from this variable, never from the file
//! timeout = "60s"
//! breaker_failures = 5            # consecutive failures that open a target's breaker
//! breaker_cooldown = "30s"        # how long an open breaker skips its target
//!
//! [[models]]
//! name = "gpt-4o"                 # what clients send
//! targets = ["openai:gpt-4o", "azure-east:gpt-4o"]
//! # US dollars per million tokens; cached_input defaults to input
//! price = { input = 2.50, output = 10.00, cached_input = 1.25 }
//!
//! [[models]]
//! name = "claude-*"               # a trailing * matches a prefix
//! targets = ["anthropic"]         # a bare provider sends the client's model name
//! price = { input = 3, output = 15 } # applies to every model the pattern matches
//!
//! [[mcp_servers]]
//! name = "github"                 # the route /mcp/github, and the `server` of tool grants
//! url = "https://mcp.example.com/mcp"   # a Streamable HTTP endpoint
//! timeout = "60s"                 # the deadline of an answer's head
//! headers_env = { "Authorization" = "GITHUB_MCP_AUTH" }  # values read from these variables
//! ```
//!
//! The file is read and checked whole at start; the first mistake is reported as
//! `<path>: providers[1]: unknown kind "x"` under the variable's name.

use std::time::Duration;

use serde::Deserialize;

use super::sections::http_url;
use super::{DEFAULT_PROVIDER_TIMEOUT, parse};
use crate::budget::Price;
use svc_runtime::{Secret, Vars};

/// Default `breaker_failures`.
pub const DEFAULT_BREAKER_FAILURES: u32 = 5;
/// Default `breaker_cooldown`.
pub const DEFAULT_BREAKER_COOLDOWN: Duration = Duration::from_secs(30);
/// Default `base_url` of an `anthropic` provider.
pub const DEFAULT_ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com/v1";
/// Longest provider name: it is a metric label.
pub const MAX_PROVIDER_NAME_CHARS: usize = 64;
/// Default `timeout` of an MCP server.
pub const DEFAULT_MCP_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest MCP server name: it is a path segment, a metric label and the start of a grant.
pub const MAX_MCP_SERVER_NAME_CHARS: usize = 64;

/// What a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// Any OpenAI-compatible API.
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
    /// The deterministic in-process provider.
    Mock,
}

/// When a target's circuit breaker opens and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerSettings {
    /// Consecutive failures that open the breaker.
    pub failures: u32,
    /// How long an open breaker skips its target before one probe goes through.
    pub cooldown: Duration,
}

impl Default for BreakerSettings {
    fn default() -> BreakerSettings {
        BreakerSettings {
            failures: DEFAULT_BREAKER_FAILURES,
            cooldown: DEFAULT_BREAKER_COOLDOWN,
        }
    }
}

/// One `[[providers]]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderEntry {
    /// The operator's name for it: metric label, log field, target prefix.
    pub name: String,
    /// What it speaks.
    pub kind: ProviderKind,
    /// Its base URL (none for the mock).
    pub base_url: Option<String>,
    /// Its key, read from the variable `api_key_env` names.
    pub api_key: Option<Secret>,
    /// The deadline of one call (the response head, then each streamed chunk).
    pub timeout: Duration,
    /// Its targets' breakers.
    pub breaker: BreakerSettings,
}

/// One target of a model: a provider, and the model name to send it when not the client's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetEntry {
    /// Index into [`RegistryFile::providers`].
    pub provider: usize,
    /// The upstream model name.
    pub model: Option<String>,
}

/// One `[[models]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelEntry {
    /// The name clients send, or with `prefix` the start of it (the `*` removed).
    pub name: String,
    /// A trailing `*` was written: any model starting with `name` matches.
    pub prefix: bool,
    /// Tried in order.
    pub targets: Vec<TargetEntry>,
    /// What a call costs; `None` is unpriced (it costs 0).
    pub price: Option<Price>,
}

/// One `[[mcp_servers]]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerEntry {
    /// Its name: the route `/mcp/{name}`, the metric label, the `server` of a tool grant.
    pub name: String,
    /// Its Streamable HTTP endpoint.
    pub url: String,
    /// The deadline of an answer's head (a JSON answer's whole body; a stream runs on).
    pub timeout: Duration,
    /// The only headers it is sent besides the transport's own, values read from the
    /// variables `headers_env` names.
    pub headers: Vec<(http::HeaderName, Secret)>,
}

/// The whole registry, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct RegistryFile {
    /// The providers, in file order.
    pub providers: Vec<ProviderEntry>,
    /// The models, in file order.
    pub models: Vec<ModelEntry>,
    /// The MCP servers, in file order.
    pub mcp_servers: Vec<McpServerEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    providers: Vec<RawProvider>,
    #[serde(default)]
    models: Vec<RawModel>,
    #[serde(default)]
    mcp_servers: Vec<RawMcpServer>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMcpServer {
    name: String,
    url: String,
    timeout: Option<String>,
    #[serde(default)]
    headers_env: std::collections::BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProvider {
    name: String,
    kind: String,
    base_url: Option<String>,
    api_key_env: Option<String>,
    timeout: Option<String>,
    breaker_failures: Option<i64>,
    breaker_cooldown: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModel {
    name: String,
    targets: Vec<String>,
    price: Option<RawPrice>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrice {
    input: f64,
    output: f64,
    cached_input: Option<f64>,
}

/// Reads and checks the file at `path`; `env` holds the variables keys are read from.
pub(super) fn load(path: &str, env: &Vars) -> Result<RegistryFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: cannot read: {e}"))?;
    parse_file(&text, env).map_err(|reason| format!("{path}: {reason}"))
}

/// Checks the text of a registry file.
pub(super) fn parse_file(text: &str, env: &Vars) -> Result<RegistryFile, String> {
    let raw: RawFile = toml::from_str(text).map_err(|error| {
        let line = error
            .span()
            .map(|span| text[..span.start.min(text.len())].lines().count().max(1));
        let message = error.message().replace('\n', " ");
        match line {
            Some(line) => format!("line {line}: {message}"),
            None => message,
        }
    })?;
    if raw.providers.is_empty() {
        return Err("no [[providers]] entry".to_owned());
    }
    if raw.models.is_empty() {
        return Err("no [[models]] entry".to_owned());
    }
    let mut providers: Vec<ProviderEntry> = Vec::with_capacity(raw.providers.len());
    for (i, entry) in raw.providers.into_iter().enumerate() {
        let checked = provider(entry, env).map_err(|reason| format!("providers[{i}]: {reason}"))?;
        if providers.iter().any(|p| p.name == checked.name) {
            return Err(format!(
                "providers[{i}]: duplicate provider name {:?}",
                checked.name
            ));
        }
        providers.push(checked);
    }
    let mut models: Vec<ModelEntry> = Vec::with_capacity(raw.models.len());
    for (i, entry) in raw.models.into_iter().enumerate() {
        let checked =
            model(entry, &providers).map_err(|reason| format!("models[{i}]: {reason}"))?;
        if models
            .iter()
            .any(|m| m.name == checked.name && m.prefix == checked.prefix)
        {
            let star = if checked.prefix { "*" } else { "" };
            return Err(format!(
                "models[{i}]: duplicate model name \"{}{star}\"",
                checked.name
            ));
        }
        models.push(checked);
    }
    let mut mcp_servers: Vec<McpServerEntry> = Vec::with_capacity(raw.mcp_servers.len());
    for (i, entry) in raw.mcp_servers.into_iter().enumerate() {
        let checked =
            mcp_server(entry, env).map_err(|reason| format!("mcp_servers[{i}]: {reason}"))?;
        if mcp_servers.iter().any(|s| s.name == checked.name) {
            return Err(format!(
                "mcp_servers[{i}]: duplicate server name {:?}",
                checked.name
            ));
        }
        mcp_servers.push(checked);
    }
    Ok(RegistryFile {
        providers,
        models,
        mcp_servers,
    })
}

/// Headers the transport sets itself, or that would carry the client's identity: never taken
/// from `headers_env`.
const RESERVED_MCP_HEADERS: [&str; 9] = [
    "host",
    "content-type",
    "content-length",
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
    "x-svc-agent-id",
    "transfer-encoding",
];

fn mcp_server(raw: RawMcpServer, env: &Vars) -> Result<McpServerEntry, String> {
    let name_ok = (1..=MAX_MCP_SERVER_NAME_CHARS).contains(&raw.name.len())
        && raw
            .name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'));
    if !name_ok {
        return Err(format!(
            "name {:?} must be 1 to {MAX_MCP_SERVER_NAME_CHARS} letters, digits, '-' or '_'",
            raw.name
        ));
    }
    let url = http_url(&raw.url).map_err(|reason| format!("url: {reason}"))?;
    let timeout = match raw.timeout {
        Some(value) => parse::duration(&value).map_err(|reason| format!("timeout: {reason}"))?,
        None => DEFAULT_MCP_TIMEOUT,
    };
    let mut headers = Vec::with_capacity(raw.headers_env.len());
    for (header, var) in raw.headers_env {
        let name = http::HeaderName::from_bytes(header.as_bytes())
            .map_err(|_| format!("headers_env: {header:?} is not a header name"))?;
        if RESERVED_MCP_HEADERS.contains(&name.as_str()) {
            return Err(format!(
                "headers_env: {header:?} is set by the gateway, not the file"
            ));
        }
        let value = env.get(&var).map(str::trim).filter(|v| !v.is_empty());
        let value = value.ok_or_else(|| format!("headers_env: {var} is not set"))?;
        if http::HeaderValue::from_str(value).is_err() {
            return Err(format!("headers_env: {var} is not a valid header value"));
        }
        headers.push((name, Secret::new(value)));
    }
    Ok(McpServerEntry {
        name: raw.name,
        url,
        timeout,
        headers,
    })
}

fn provider(raw: RawProvider, env: &Vars) -> Result<ProviderEntry, String> {
    let name_ok = !raw.name.is_empty()
        && raw.name.len() <= MAX_PROVIDER_NAME_CHARS
        && raw
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !name_ok {
        return Err(format!(
            "name {:?} must be 1 to 64 letters, digits, '-', '_' or '.'",
            raw.name
        ));
    }
    let kind = match raw.kind.as_str() {
        "openai" => ProviderKind::OpenAi,
        "anthropic" => ProviderKind::Anthropic,
        "mock" => ProviderKind::Mock,
        other => {
            return Err(format!(
                "unknown kind {other:?} (openai, anthropic or mock)"
            ));
        }
    };
    let base_url = match (kind, raw.base_url) {
        (ProviderKind::Mock, _) => None,
        (_, Some(url)) => Some(
            http_url(&url)
                .map_err(|reason| format!("base_url: {reason}"))?
                .trim_end_matches('/')
                .to_owned(),
        ),
        (ProviderKind::Anthropic, None) => Some(DEFAULT_ANTHROPIC_BASE_URL.to_owned()),
        (ProviderKind::OpenAi, None) => return Err("base_url is required".to_owned()),
    };
    let api_key = match raw.api_key_env {
        Some(var) => {
            let value = env.get(&var).map(str::trim).filter(|v| !v.is_empty());
            let value = value.ok_or_else(|| format!("api_key_env: {var} is not set"))?;
            if http::HeaderValue::from_str(value).is_err() {
                return Err(format!("api_key_env: {var} is not a valid header value"));
            }
            Some(Secret::new(value))
        }
        None if kind == ProviderKind::Anthropic => {
            return Err("api_key_env is required for kind \"anthropic\"".to_owned());
        }
        None => None,
    };
    let duration = |field: &str, value: Option<String>, default: Duration| match value {
        Some(value) => parse::duration(&value).map_err(|reason| format!("{field}: {reason}")),
        None => Ok(default),
    };
    let timeout = duration("timeout", raw.timeout, DEFAULT_PROVIDER_TIMEOUT)?;
    let cooldown = duration(
        "breaker_cooldown",
        raw.breaker_cooldown,
        DEFAULT_BREAKER_COOLDOWN,
    )?;
    let failures = match raw.breaker_failures {
        None => DEFAULT_BREAKER_FAILURES,
        Some(n) => u32::try_from(n)
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("breaker_failures: {n} is not a positive integer"))?,
    };
    Ok(ProviderEntry {
        name: raw.name,
        kind,
        base_url,
        api_key,
        timeout,
        breaker: BreakerSettings { failures, cooldown },
    })
}

fn model(raw: RawModel, providers: &[ProviderEntry]) -> Result<ModelEntry, String> {
    let (name, prefix) = match raw.name.strip_suffix('*') {
        Some(start) => (start, true),
        None => (raw.name.as_str(), false),
    };
    if name.contains('*') {
        return Err(format!(
            "name {:?}: only a trailing * is a pattern",
            raw.name
        ));
    }
    if (name.is_empty() && !prefix) || name.chars().count() > crate::validate::MAX_MODEL_CHARS {
        return Err(format!("name {:?} must be 1 to 256 characters", raw.name));
    }
    if raw.targets.is_empty() {
        return Err("targets must name at least one provider".to_owned());
    }
    let mut targets = Vec::with_capacity(raw.targets.len());
    for (j, target) in raw.targets.iter().enumerate() {
        let (provider, upstream) = match target.split_once(':') {
            Some((provider, model)) => (provider, Some(model)),
            None => (target.as_str(), None),
        };
        if upstream.is_some_and(str::is_empty) {
            return Err(format!("targets[{j}]: {target:?} names no upstream model"));
        }
        let index = providers
            .iter()
            .position(|p| p.name == provider)
            .ok_or_else(|| format!("targets[{j}]: unknown provider {provider:?}"))?;
        targets.push(TargetEntry {
            provider: index,
            model: upstream.map(str::to_owned),
        });
    }
    let price = raw
        .price
        .map(|p| Price::from_dollars(p.input, p.output, p.cached_input))
        .transpose()?;
    Ok(ModelEntry {
        name: name.to_owned(),
        prefix,
        targets,
        price,
    })
}

#[cfg(test)]
#[path = "providers_tests.rs"]
mod tests;
