//! Parsing of the variable groups that have rules across variables.

use http::HeaderName;

use super::parse;
use super::types::{LlmMode, ProviderConfig};
use super::vars::*;
use super::{ConfigError, DEFAULT_MOCK_MODEL, DEFAULT_PROVIDER_TIMEOUT, Secret, Vars};

pub(super) fn provider_config(
    vars: &Vars,
    production: bool,
) -> Result<ProviderConfig, ConfigError> {
    let file = vars.parse_or(SVC_PROVIDERS_FILE, None, |path| {
        super::providers::load(path, vars).map(Some)
    })?;
    if let Some(var) = [SVC_PROVIDER_BASE_URL, SVC_PROVIDER_MODELS, SVC_LLM_MODE]
        .into_iter()
        .find(|var| file.is_some() && vars.get(var).is_some())
    {
        let reason = format!("replaces {var}: set one or the other");
        return Err(ConfigError::new(SVC_PROVIDERS_FILE, reason));
    }
    let base_url = vars.parse_or(SVC_PROVIDER_BASE_URL, None, |v| http_url(v).map(Some))?;
    let explicit_mode = vars.parse_or(SVC_LLM_MODE, None, |v| {
        match v.to_ascii_lowercase().as_str() {
            "mock" => Ok(Some(LlmMode::Mock)),
            "live" => Ok(Some(LlmMode::Live)),
            _ => Err(format!("{v:?} is not mock or live")),
        }
    })?;
    let mode = match explicit_mode {
        Some(mode) => mode,
        None if base_url.is_some() => LlmMode::Live,
        None if production && file.is_none() => {
            return Err(ConfigError::new(
                SVC_LLM_MODE,
                "production refuses an implicit mock provider: set SVC_PROVIDER_BASE_URL or SVC_LLM_MODE=mock",
            ));
        }
        None => LlmMode::Mock,
    };
    // Production sends prompts and the provider key over TLS only, unless told otherwise
    // (a sidecar on the same host, say).
    let allow_http = vars.parse_or(
        SVC_PROVIDER_ALLOW_HTTP,
        false,
        svc_runtime::config::parse_bool,
    )?;
    if production && !allow_http {
        let plain = |url: &str| url.to_ascii_lowercase().starts_with("http://");
        if base_url.as_deref().is_some_and(plain) {
            return Err(ConfigError::new(
                SVC_PROVIDER_BASE_URL,
                "production refuses an http:// provider: use https://, or set SVC_PROVIDER_ALLOW_HTTP=true",
            ));
        }
        if let Some(entry) = file
            .iter()
            .flat_map(|f| &f.providers)
            .find(|p| p.base_url.as_deref().is_some_and(plain))
        {
            let reason = format!(
                "provider {:?}: production refuses an http:// base_url: use https://, or set SVC_PROVIDER_ALLOW_HTTP=true",
                entry.name
            );
            return Err(ConfigError::new(SVC_PROVIDERS_FILE, reason));
        }
        // An MCP server is sent the credentials its entry names: TLS too.
        if let Some(entry) = file
            .iter()
            .flat_map(|f| &f.mcp_servers)
            .find(|s| plain(&s.url))
        {
            let reason = format!(
                "mcp server {:?}: production refuses an http:// url: use https://, or set SVC_PROVIDER_ALLOW_HTTP=true",
                entry.name
            );
            return Err(ConfigError::new(SVC_PROVIDERS_FILE, reason));
        }
    }
    if mode == LlmMode::Live && base_url.is_none() {
        return Err(ConfigError::new(
            SVC_PROVIDER_BASE_URL,
            "is required when SVC_LLM_MODE=live",
        ));
    }
    let listed: Vec<String> = vars
        .get(SVC_PROVIDER_MODELS)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|m| !m.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if let Some(bad) = listed
        .iter()
        .find(|m| m.chars().count() > crate::validate::MAX_MODEL_CHARS)
    {
        return Err(ConfigError::new(
            SVC_PROVIDER_MODELS,
            format!("model name {bad:?} is longer than 256 characters"),
        ));
    }
    let models = match (&file, mode, listed.is_empty()) {
        // The file's concrete names: what `/v1/models` lists and dev mode's banner shows.
        (Some(file), ..) => file
            .models
            .iter()
            .filter(|m| !m.prefix)
            .map(|m| m.name.clone())
            .collect(),
        (None, LlmMode::Mock, true) => vec![DEFAULT_MOCK_MODEL.to_owned()],
        _ => listed,
    };
    Ok(ProviderConfig {
        mode,
        base_url: base_url.map(|u| u.trim_end_matches('/').to_owned()),
        api_key: vars.get(SVC_PROVIDER_API_KEY).map(Secret::new),
        timeout: vars.parse_or(
            SVC_PROVIDER_TIMEOUT,
            DEFAULT_PROVIDER_TIMEOUT,
            parse::duration,
        )?,
        models,
        file,
    })
}

pub(super) fn http_url(value: &str) -> Result<String, String> {
    let uri: http::Uri = value
        .parse()
        .map_err(|_| format!("{value:?} is not a URL"))?;
    match (uri.scheme_str(), uri.authority()) {
        (Some("http" | "https"), Some(_)) => Ok(value.to_owned()),
        _ => Err(format!("{value:?} is not an http(s) URL")),
    }
}

pub(super) fn header_name(value: &str) -> Result<HeaderName, String> {
    HeaderName::from_bytes(value.as_bytes()).map_err(|_| format!("{value:?} is not a header name"))
}
