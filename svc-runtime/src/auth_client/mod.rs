//! The one way to reach the auth service: its addresses, TLS files and deadline read from the
//! environment, and the channel built from them (TCP_NODELAY, connect timeout, HTTP/2 and TCP
//! keepalive; see [`GrpcAuthClient::endpoint`]). The gateway's PatAuth and AgentCheck, its
//! readiness check and `svc token` all use it.
//!
//! One IP address gets one channel, and ValidateToken a connection of its own
//! ([`GrpcAuthClient::with_token_connection`], over TLS when the address is `https://`). Several addresses, or a DNS name, get a
//! channel balanced over every address, re-resolved periodically and health-watched (see
//! [`balance`]).
//!
//! | variable | meaning |
//! |---|---|
//! | `SVC_AUTH_GRPC_ADDR` | `host:port` or `http(s)://host:port`, or several comma-separated; required |
//! | `SVC_AUTH_GRPC_RESOLVE_INTERVAL` | how often the names are resolved again (default 10s) |
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
//! assert_eq!(config.endpoints, ["http://auth:9091"]);
//!
//! let vars = Vars::from_pairs([("SVC_AUTH_GRPC_ADDR", "10.0.0.1:9091, 10.0.0.2:9091")]);
//! let config = AuthClientConfig::from_vars(&vars, false, Duration::from_millis(50)).unwrap();
//! assert_eq!(config.endpoints, ["http://10.0.0.1:9091", "http://10.0.0.2:9091"]);
//!
//! let vars = Vars::from_pairs([("SVC_AUTH_GRPC_ADDR", "https://auth:9091")]);
//! let error = AuthClientConfig::from_vars(&vars, false, Duration::from_millis(50)).unwrap_err();
//! assert_eq!(error.variable, "SVC_AUTH_GRPC_TLS_CA");
//! ```

pub mod balance;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use svc_tower::grpc::GrpcAuthClient;
use svc_tower::grpc::GrpcClientError;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::config::{ConfigError, Vars, parse_bool, parse_timeout};
use balance::Target;

crate::variables! {
    /// Auth gRPC addresses: `host:port` or `http(s)://host:port`, comma-separated.
    SVC_AUTH_GRPC_ADDR;
    /// How often the names of `SVC_AUTH_GRPC_ADDR` are resolved again (duration).
    SVC_AUTH_GRPC_RESOLVE_INTERVAL;
    /// ValidateToken and ValidateAgent deadline (duration).
    SVC_AUTH_VALIDATE_TIMEOUT;
    /// Allows a plaintext auth channel in production.
    SVC_GRPC_ALLOW_PLAINTEXT;
    /// CA bundle that signs the auth server's certificate.
    SVC_AUTH_GRPC_TLS_CA;
    /// Client certificate for mutual TLS to the auth server.
    SVC_AUTH_GRPC_TLS_CERT;
    /// Client key for mutual TLS to the auth server.
    SVC_AUTH_GRPC_TLS_KEY;
}

/// Default `SVC_AUTH_GRPC_RESOLVE_INTERVAL`.
pub const DEFAULT_RESOLVE_INTERVAL: Duration = Duration::from_secs(10);

/// How to reach the auth service, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthClientConfig {
    /// The gRPC endpoints as URIs, `http://host:port` or `https://host:port`, one scheme for
    /// all.
    pub endpoints: Vec<String>,
    /// How often the names are resolved again.
    pub resolve_interval: Duration,
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
        let mut scheme = None;
        let mut endpoints = Vec::new();
        for entry in raw.split(',').map(str::trim) {
            let (tls, address) = scheme_and_address(entry)
                .map_err(|reason| ConfigError::new(SVC_AUTH_GRPC_ADDR, reason))?;
            if scheme.is_some_and(|first| first != tls) {
                return Err(ConfigError::new(
                    SVC_AUTH_GRPC_ADDR,
                    "every address needs the same scheme (http or https)",
                ));
            }
            scheme = Some(tls);
            let scheme = if tls { "https" } else { "http" };
            endpoints.push(format!("{scheme}://{address}"));
        }
        let tls = scheme.unwrap_or(false);
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
            endpoints,
            resolve_interval: vars.parse_or(
                SVC_AUTH_GRPC_RESOLVE_INTERVAL,
                DEFAULT_RESOLVE_INTERVAL,
                parse_timeout,
            )?,
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
    /// One IP address gets a plain channel; several addresses or a name, a balanced one.
    /// Build it inside a Tokio runtime.
    pub fn channel(&self) -> Result<Channel, AuthSetupError> {
        let tls = self.tls()?;
        let https = self.endpoints.iter().any(|e| e.starts_with("https://"));
        let targets: Vec<Target> = self
            .endpoints
            .iter()
            .filter_map(|endpoint| target(endpoint))
            .collect();
        let make = move |authority: &str, host: &str| {
            endpoint(https, authority, host, tls.as_ref()).map_err(AuthSetupError::Address)
        };
        if let Some(addr) = self.single_ip() {
            let endpoint = make(&addr.to_string(), &addr.ip().to_string())?;
            let transport = svc_tower::grpc::coalesce::connector(endpoint.get_tcp_keepalive());
            return Ok(endpoint.connect_with_connector_lazy(transport));
        }
        // Refuses bad TLS material now rather than in the discovery task.
        if let Some(first) = targets.first() {
            make(&format!("{}:{}", first.host, first.port), &first.host)?;
        }
        let make: balance::MakeEndpoint = Arc::new(move |addr: SocketAddr, host: &str| {
            let port = addr.port();
            let origin = format!("{}://{host}:{port}", if https { "https" } else { "http" });
            let endpoint = make(&addr.to_string(), host).ok()?;
            // The :authority the server sees is the name configured, not the address.
            Some(match origin.parse() {
                Ok(origin) => endpoint.origin(origin),
                Err(_) => endpoint,
            })
        });
        Ok(balance::channel(targets, make, self.resolve_interval))
    }

    /// The one address, when it is an IP address and port.
    fn single_ip(&self) -> Option<SocketAddr> {
        let [single] = self.endpoints.as_slice() else {
            return None;
        };
        let target = target(single)?;
        let ip = bare_host(&target.host).parse::<IpAddr>().ok()?;
        Some(SocketAddr::new(ip, target.port))
    }

    /// The CA and the client identity as PEM, read from their files.
    fn tls_pems(&self) -> Result<Option<TlsPems>, AuthSetupError> {
        let Some(ca) = &self.tls_ca else {
            return Ok(None);
        };
        let identity = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some((
                read(SVC_AUTH_GRPC_TLS_CERT, cert)?,
                read(SVC_AUTH_GRPC_TLS_KEY, key)?,
            )),
            _ => None,
        };
        Ok(Some(TlsPems {
            ca: read(SVC_AUTH_GRPC_TLS_CA, ca)?,
            identity,
        }))
    }

    /// The channel's TLS: the CA and the client identity.
    fn tls(&self) -> Result<Option<ClientTlsConfig>, AuthSetupError> {
        let Some(pems) = self.tls_pems()? else {
            return Ok(None);
        };
        let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pems.ca));
        if let Some((cert, key)) = pems.identity {
            tls = tls.identity(Identity::from_pem(cert, key));
        }
        Ok(Some(tls))
    }

    /// The validator for PatAuth and AgentCheck over `channel`, with the configured deadline.
    /// With one IP address, ValidateToken goes over a connection of its own
    /// ([`GrpcAuthClient::with_token_connection`], over TLS with the channel's CA and identity
    /// when the address is `https://`); balanced addresses keep it on the channel.
    pub fn client(&self, channel: Channel) -> GrpcAuthClient {
        let client = GrpcAuthClient::from_channel(channel).validate_timeout(self.validate_timeout);
        let Some(addr) = self.single_ip() else {
            return client;
        };
        // The channel has read and accepted the same files; should they fail now, ValidateToken
        // stays on the channel.
        let with_connection = match self.tls_pems() {
            Ok(None) => Ok(client.clone().with_token_connection(addr)),
            Ok(Some(pems)) => {
                let identity = pems.identity.as_ref();
                let identity = identity.map(|(cert, key)| (cert.as_slice(), key.as_slice()));
                let name = addr.ip().to_string();
                (client
                    .clone()
                    .with_token_connection_tls(addr, &name, &pems.ca, identity))
                .map_err(|error| error.to_string())
            }
            Err(error) => Err(error.to_string()),
        };
        with_connection.unwrap_or_else(|reason| {
            tracing::warn!(%reason, "ValidateToken stays on the channel");
            client
        })
    }
}

/// The CA and the client's certificate and key, as read.
struct TlsPems {
    ca: Vec<u8>,
    identity: Option<(Vec<u8>, Vec<u8>)>,
}

/// The endpoint of `authority` (`host:port` or `ip:port`), over TLS that expects a
/// certificate for `host` when `tls` is set.
fn endpoint(
    https: bool,
    authority: &str,
    host: &str,
    tls: Option<&ClientTlsConfig>,
) -> Result<Endpoint, GrpcClientError> {
    let scheme = if https { "https" } else { "http" };
    let endpoint = GrpcAuthClient::endpoint(&format!("{scheme}://{authority}"))?;
    match tls {
        None => Ok(endpoint),
        Some(tls) => endpoint
            .tls_config(tls.clone().domain_name(bare_host(host)))
            .map_err(GrpcClientError::Tls),
    }
}

/// `host` without the brackets of an IPv6 literal.
fn bare_host(host: &str) -> &str {
    host.trim_start_matches('[').trim_end_matches(']')
}

/// The `host:port` of an endpoint URI.
fn target(endpoint: &str) -> Option<Target> {
    let authority = endpoint
        .split_once("://")
        .map_or(endpoint, |(_, rest)| rest);
    let (host, port) = authority.rsplit_once(':')?;
    Some(Target {
        host: host.to_owned(),
        port: port.parse().ok()?,
    })
}

/// Whether `entry` asks for TLS, and its `host:port`.
fn scheme_and_address(entry: &str) -> Result<(bool, &str), String> {
    let (tls, address) = if let Some(rest) = entry.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = entry.strip_prefix("http://") {
        (false, rest)
    } else if entry.contains("://") {
        return Err("scheme must be http or https".to_owned());
    } else {
        (false, entry)
    };
    let address = address.trim_end_matches('/');
    host_port(address)?;
    Ok((tls, address))
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

    #[tokio::test]
    async fn validate_token_has_a_connection_of_its_own_on_one_ip_address() {
        let with = |pairs: &[(&str, &str)]| {
            let config = AuthClientConfig::from_vars(
                &Vars::from_pairs(pairs.iter().copied()),
                false,
                Duration::from_millis(50),
            )
            .unwrap();
            let channel = GrpcAuthClient::endpoint("127.0.0.1:9091")
                .unwrap()
                .connect_lazy();
            config.client(channel).has_token_connection()
        };
        assert!(with(&[("SVC_AUTH_GRPC_ADDR", "127.0.0.1:9091")]));
        assert!(with(&[("SVC_AUTH_GRPC_ADDR", "http://[::1]:9091")]));
        assert!(!with(&[("SVC_AUTH_GRPC_ADDR", "auth.internal:9091")]));
        assert!(!with(&[(
            "SVC_AUTH_GRPC_ADDR",
            "10.0.0.1:9091,10.0.0.2:9091"
        )]));
        // Over TLS with the channel's CA; a CA that cannot be read leaves it on the channel.
        let ca = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../svc-auth-server/tests/fixtures/tls/ca.pem"
        );
        assert!(with(&[
            ("SVC_AUTH_GRPC_ADDR", "https://127.0.0.1:9091"),
            ("SVC_AUTH_GRPC_TLS_CA", ca),
        ]));
        assert!(!with(&[
            ("SVC_AUTH_GRPC_ADDR", "https://127.0.0.1:9091"),
            ("SVC_AUTH_GRPC_TLS_CA", "/nonexistent/ca.pem"),
        ]));
    }

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
