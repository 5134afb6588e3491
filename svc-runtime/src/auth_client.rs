//! The one way to reach the auth service: its address, TLS files and deadline read from the
//! environment, and the channel built from them (TCP_NODELAY, connect timeout, HTTP/2 and TCP
//! keepalive; see [`GrpcAuthClient::endpoint`]). The gateway's PatAuth and AgentCheck, its
//! readiness check and `svc token` all use it.
//!
//! | variable | meaning |
//! |---|---|
//! | `SVC_AUTH_GRPC_ADDR` | `host:port` or `http(s)://host:port`; required |
//! | `SVC_AUTH_VALIDATE_TIMEOUT` | deadline of ValidateToken and ValidateAgent |
//! | `SVC_AUTH_GRPC_TLS_CA` | CA of the server certificate; required with `https://` |
//! | `SVC_AUTH_GRPC_TLS_CERT`, `SVC_AUTH_GRPC_TLS_KEY` | client certificate and key (mutual TLS) |
//! | `SVC_GRPC_ALLOW_PLAINTEXT` | production accepts an `http://` address only when true |
//!
//! ```
//! use std::time::Duration;
//! use svc_runtime::auth_client::AuthClientConfig;
//! use svc_runtime::config::Vars;
//!
//! let vars = Vars::from_pairs([("SVC_AUTH_GRPC_ADDR", "auth:9091")]);
//! let config = AuthClientConfig::from_vars(&vars, false, Duration::from_millis(50)).unwrap();
//! assert_eq!(config.endpoint, "http://auth:9091");
//!
//! let vars = Vars::from_pairs([("SVC_AUTH_GRPC_ADDR", "https://auth:9091")]);
//! let error = AuthClientConfig::from_vars(&vars, false, Duration::from_millis(50)).unwrap_err();
//! assert_eq!(error.variable, "SVC_AUTH_GRPC_TLS_CA");
//! ```

use std::time::Duration;

use svc_tower::auth::GrpcAuthClient;
use svc_tower::auth::grpc::GrpcClientError;
use tonic::transport::Channel;

use crate::config::{ConfigError, Vars, parse_bool, parse_timeout};

/// Auth gRPC address, `host:port` or `http(s)://host:port`.
pub const SVC_AUTH_GRPC_ADDR: &str = "SVC_AUTH_GRPC_ADDR";
/// ValidateToken and ValidateAgent deadline (duration).
pub const SVC_AUTH_VALIDATE_TIMEOUT: &str = "SVC_AUTH_VALIDATE_TIMEOUT";
/// Allows a plaintext auth channel in production.
pub const SVC_GRPC_ALLOW_PLAINTEXT: &str = "SVC_GRPC_ALLOW_PLAINTEXT";
/// CA bundle that signs the auth server's certificate.
pub const SVC_AUTH_GRPC_TLS_CA: &str = "SVC_AUTH_GRPC_TLS_CA";
/// Client certificate for mutual TLS to the auth server.
pub const SVC_AUTH_GRPC_TLS_CERT: &str = "SVC_AUTH_GRPC_TLS_CERT";
/// Client key for mutual TLS to the auth server.
pub const SVC_AUTH_GRPC_TLS_KEY: &str = "SVC_AUTH_GRPC_TLS_KEY";

/// How to reach the auth service, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthClientConfig {
    /// The gRPC endpoint as a URI: `http://host:port` or `https://host:port`.
    pub endpoint: String,
    /// The ValidateToken deadline.
    pub validate_timeout: Duration,
    /// CA of the server certificate (`SVC_AUTH_GRPC_TLS_CA`), a path as given.
    pub tls_ca: Option<String>,
    /// Client certificate for mutual TLS.
    pub tls_cert: Option<String>,
    /// Client key for mutual TLS.
    pub tls_key: Option<String>,
}

/// Why the auth channel could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum AuthSetupError {
    /// The address was refused.
    #[error("SVC_AUTH_GRPC_ADDR: not a usable gRPC address")]
    Address(#[source] GrpcClientError),
    /// A TLS file could not be read (the path is the operator's own configuration).
    #[error("{var}: cannot read {path}")]
    TlsFile {
        /// The variable naming the file.
        var: &'static str,
        /// The path given.
        path: String,
        /// The read error.
        #[source]
        source: std::io::Error,
    },
}

impl AuthClientConfig {
    /// Reads the variables above; `production` refuses plaintext without
    /// `SVC_GRPC_ALLOW_PLAINTEXT=true`, `default_timeout` applies without
    /// `SVC_AUTH_VALIDATE_TIMEOUT`.
    pub fn from_vars(
        vars: &Vars,
        production: bool,
        default_timeout: Duration,
    ) -> Result<AuthClientConfig, ConfigError> {
        let raw = vars
            .get(SVC_AUTH_GRPC_ADDR)
            .ok_or_else(|| ConfigError::new(SVC_AUTH_GRPC_ADDR, "is required (host:port)"))?;
        let (tls, address) = if let Some(rest) = raw.strip_prefix("https://") {
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
        let address = address.trim_end_matches('/');
        host_port(address).map_err(|reason| ConfigError::new(SVC_AUTH_GRPC_ADDR, reason))?;
        let scheme = if tls { "https" } else { "http" };
        let allow_plaintext = vars.parse_or(SVC_GRPC_ALLOW_PLAINTEXT, false, parse_bool)?;
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
        Ok(AuthClientConfig {
            endpoint: format!("{scheme}://{address}"),
            validate_timeout: vars.parse_or(
                SVC_AUTH_VALIDATE_TIMEOUT,
                default_timeout,
                parse_timeout,
            )?,
            tls_ca,
            tls_cert,
            tls_key,
        })
    }
}

impl AuthClientConfig {
    /// A lazily connecting channel: [`GrpcAuthClient::endpoint`]'s settings (TCP_NODELAY,
    /// connect timeout, HTTP/2 and TCP keepalive), with TLS, or mutual TLS, when configured.
    /// Build it inside a Tokio runtime.
    pub fn channel(&self) -> Result<Channel, AuthSetupError> {
        let endpoint = match &self.tls_ca {
            None => GrpcAuthClient::endpoint(&self.endpoint),
            Some(ca) => {
                let ca = read(SVC_AUTH_GRPC_TLS_CA, ca)?;
                let identity = match (&self.tls_cert, &self.tls_key) {
                    (Some(cert), Some(key)) => Some((
                        read(SVC_AUTH_GRPC_TLS_CERT, cert)?,
                        read(SVC_AUTH_GRPC_TLS_KEY, key)?,
                    )),
                    _ => None,
                };
                let identity = identity
                    .as_ref()
                    .map(|(cert, key)| (cert.as_slice(), key.as_slice()));
                GrpcAuthClient::tls_endpoint(&self.endpoint, &ca, identity)
            }
        };
        Ok(endpoint.map_err(AuthSetupError::Address)?.connect_lazy())
    }

    /// The validator for PatAuth and AgentCheck over `channel`, with the configured deadline.
    pub fn client(&self, channel: Channel) -> GrpcAuthClient {
        GrpcAuthClient::from_channel(channel).validate_timeout(self.validate_timeout)
    }
}

fn read(var: &'static str, path: &str) -> Result<Vec<u8>, AuthSetupError> {
    std::fs::read(path).map_err(|source| AuthSetupError::TlsFile {
        var,
        path: path.to_owned(),
        source,
    })
}

/// A `host:port` pair; the host may be a name, an IPv4 address or a bracketed IPv6 address.
fn host_port(value: &str) -> Result<(), String> {
    let (host, port) = value
        .rsplit_once(':')
        .ok_or_else(|| format!("{value:?} is not host:port"))?;
    if host.is_empty() || host.contains('/') || host.contains(char::is_whitespace) {
        return Err(format!("{value:?} has no valid host"));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err(format!("{value:?} has no valid port")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_ports() {
        assert!(host_port("auth:9091").is_ok());
        assert!(host_port("127.0.0.1:9091").is_ok());
        assert!(host_port("[::1]:9091").is_ok());
        for bad in ["auth", ":9091", "auth:", "auth:0", "auth:99999", "a/b:1"] {
            assert!(host_port(bad).is_err(), "{bad}");
        }
    }
}
