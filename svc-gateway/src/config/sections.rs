//! Parsing of the variable groups that have rules across variables.

use http::HeaderName;

use super::parse;
use super::types::{AuthConfig, LlmMode, ProviderConfig};
use super::vars::*;
use super::{
    ConfigError, DEFAULT_AUTH_VALIDATE_TIMEOUT, DEFAULT_MOCK_MODEL, DEFAULT_PROVIDER_TIMEOUT,
    Secret, Vars,
};

pub(super) fn auth_config(vars: &Vars, production: bool) -> Result<AuthConfig, ConfigError> {
    let raw = vars
        .get(SVC_AUTH_GRPC_ADDR)
        .ok_or_else(|| ConfigError::new(SVC_AUTH_GRPC_ADDR, "is required (host:port)"))?;
    let (tls, host_port) = if let Some(rest) = raw.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = raw.strip_prefix("http://") {
        (false, rest)
    } else if raw.contains("://") {
        return Err(ConfigError::new(
            SVC_AUTH_GRPC_ADDR,
            "scheme must be http or https",
        ));
    } else {
        (false, raw)
    };
    let host_port = host_port.trim_end_matches('/');
    parse::host_port(host_port).map_err(|reason| ConfigError::new(SVC_AUTH_GRPC_ADDR, reason))?;
    let scheme = if tls { "https" } else { "http" };
    let allow_plaintext = vars.parse_or(SVC_GRPC_ALLOW_PLAINTEXT, false, parse::boolean)?;
    if production && !tls && !allow_plaintext {
        return Err(ConfigError::new(
            SVC_AUTH_GRPC_ADDR,
            "production requires https:// (or SVC_GRPC_ALLOW_PLAINTEXT=true)",
        ));
    }
    let tls_ca = vars.get(SVC_AUTH_GRPC_TLS_CA).map(str::to_owned);
    if tls && tls_ca.is_none() {
        return Err(ConfigError::new(
            SVC_AUTH_GRPC_TLS_CA,
            "is required with an https:// SVC_AUTH_GRPC_ADDR",
        ));
    }
    let tls_cert = vars.get(SVC_AUTH_GRPC_TLS_CERT).map(str::to_owned);
    let tls_key = vars.get(SVC_AUTH_GRPC_TLS_KEY).map(str::to_owned);
    if tls_cert.is_some() != tls_key.is_some() {
        let missing = if tls_cert.is_none() {
            SVC_AUTH_GRPC_TLS_CERT
        } else {
            SVC_AUTH_GRPC_TLS_KEY
        };
        return Err(ConfigError::new(
            missing,
            "client certificate and key go together",
        ));
    }
    // tonic only speaks TLS to an https:// URI: with http:// the files would be read and then
    // silently unused, leaving the channel in plaintext.
    let tls_files = [
        (SVC_AUTH_GRPC_TLS_CA, &tls_ca),
        (SVC_AUTH_GRPC_TLS_CERT, &tls_cert),
        (SVC_AUTH_GRPC_TLS_KEY, &tls_key),
    ];
    if let Some((var, _)) = tls_files.iter().find(|(_, file)| file.is_some() && !tls) {
        return Err(ConfigError::new(
            var,
            "needs an https:// SVC_AUTH_GRPC_ADDR (over http the channel would be plaintext)",
        ));
    }
    Ok(AuthConfig {
        endpoint: format!("{scheme}://{host_port}"),
        validate_timeout: vars.parse_or(
            SVC_AUTH_VALIDATE_TIMEOUT,
            DEFAULT_AUTH_VALIDATE_TIMEOUT,
            parse::duration,
        )?,
        tls_ca,
        tls_cert,
        tls_key,
    })
}

pub(super) fn provider_config(
    vars: &Vars,
    production: bool,
) -> Result<ProviderConfig, ConfigError> {
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
        None if production => {
            return Err(ConfigError::new(
                SVC_LLM_MODE,
                "production refuses an implicit mock provider: set SVC_PROVIDER_BASE_URL or SVC_LLM_MODE=mock",
            ));
        }
        None => LlmMode::Mock,
    };
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
    let models = match (mode, listed.is_empty()) {
        (LlmMode::Mock, true) => vec![DEFAULT_MOCK_MODEL.to_owned()],
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
