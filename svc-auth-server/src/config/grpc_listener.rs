//! The gRPC listener's own limits: it serves a few long-lived gateway connections, not the
//! internet, so its cap and its handshake deadline are its own.
//!
//! ```
//! use svc_auth_server::config::grpc_listener::GrpcListener;
//! use svc_runtime::config::Vars;
//!
//! let vars = Vars::from_pairs([("SVC_GRPC_HANDSHAKE_TIMEOUT", "0s")]);
//! let error = GrpcListener::from_vars(&vars).unwrap_err();
//! assert_eq!(error.variable, "SVC_GRPC_HANDSHAKE_TIMEOUT");
//! ```

use std::time::Duration;

use svc_runtime::config::{ConfigError, Vars, parse_positive, parse_timeout};

svc_runtime::variables! {
    /// gRPC connections served at once; past it, new ones wait in the backlog.
    SVC_GRPC_MAX_CONNECTIONS;
    /// Time from accept to the end of the HTTP/2 preface (and of TLS) on the gRPC port.
    SVC_GRPC_HANDSHAKE_TIMEOUT;
}

/// Default `SVC_GRPC_MAX_CONNECTIONS`.
pub const DEFAULT_GRPC_MAX_CONNECTIONS: usize = 1024;
/// Default `SVC_GRPC_HANDSHAKE_TIMEOUT`.
pub const DEFAULT_GRPC_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// How the gRPC listener admits connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrpcListener {
    /// Connections served at once; past it new ones wait in the backlog.
    pub max_connections: usize,
    /// From accept to the end of the HTTP/2 preface (and of TLS, when served).
    pub handshake_timeout: Duration,
}

impl Default for GrpcListener {
    fn default() -> GrpcListener {
        GrpcListener {
            max_connections: DEFAULT_GRPC_MAX_CONNECTIONS,
            handshake_timeout: DEFAULT_GRPC_HANDSHAKE_TIMEOUT,
        }
    }
}

impl GrpcListener {
    /// Reads the variables above.
    pub fn from_vars(vars: &Vars) -> Result<GrpcListener, ConfigError> {
        Ok(GrpcListener {
            max_connections: vars.parse_or(
                SVC_GRPC_MAX_CONNECTIONS,
                DEFAULT_GRPC_MAX_CONNECTIONS,
                parse_positive,
            )?,
            handshake_timeout: vars.parse_or(
                SVC_GRPC_HANDSHAKE_TIMEOUT,
                DEFAULT_GRPC_HANDSHAKE_TIMEOUT,
                parse_timeout,
            )?,
        })
    }
}
