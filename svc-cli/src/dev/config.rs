//! What `svc dev` reads from the environment, validated before anything is opened.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

pub use svc_auth_server::config::{SVC_BIND_ADDR, SVC_GRPC_PORT};

use svc_gateway::config::{
    Config, POSTGRES_DSN, REDIS_URL, SVC_AUTH_GRPC_ADDR, SVC_AUTH_VALIDATE_TIMEOUT, SVC_ENV,
    SVC_LOG_FORMAT,
};

/// Where the embedded store and the dev state live (default [`DEFAULT_DATA_DIR`]).
pub const SVC_DEV_DATA_DIR: &str = "SVC_DEV_DATA_DIR";
/// The default data directory, relative to the current directory.
pub const DEFAULT_DATA_DIR: &str = ".svc-dev";
/// The ValidateToken budget in dev mode: SPEC's Limits allow about 2 s for local hashing, and a
/// debug build's first Argon2id run is far slower than production's 50 ms budget.
pub const DEV_VALIDATE_TIMEOUT: &str = "2s";

/// Why `dev` refuses to start. The message is the one line printed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DevConfigError {
    /// SVC_ENV names production.
    #[error(
        "svc dev refuses SVC_ENV=production: the embedded store and in-process limits \
         are for local development only"
    )]
    Production,
    /// A variable is invalid.
    #[error("{var}: {reason}")]
    Invalid {
        /// The variable at fault.
        var: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

/// The validated dev configuration.
#[derive(Debug, Clone)]
pub struct DevConfig {
    /// The gateway's configuration; its auth endpoint is set once the embedded auth plane has
    /// bound its port.
    pub gateway: Config,
    /// Where the auth plane's gRPC listens (port 0: any free port).
    pub grpc_addr: SocketAddr,
    /// The data directory.
    pub data_dir: PathBuf,
    /// `REDIS_URL` and `POSTGRES_DSN` were set and are ignored in dev mode.
    pub ignored: Vec<&'static str>,
}

impl DevConfig {
    /// Reads a variable map (the process environment in `main`, a literal in tests).
    pub fn from_map<I, K, V>(vars: I) -> Result<DevConfig, DevConfigError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let mut map: HashMap<String, String> = vars
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        let get = |name: &str| {
            map.get(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        if get(SVC_ENV)
            .is_some_and(|env| matches!(env.to_ascii_lowercase().as_str(), "production" | "prod"))
        {
            return Err(DevConfigError::Production);
        }
        let bind = match get(SVC_BIND_ADDR) {
            None => IpAddr::V4(Ipv4Addr::LOCALHOST),
            Some(value) => value.parse().map_err(|_| DevConfigError::Invalid {
                var: SVC_BIND_ADDR,
                reason: format!("{value:?} is not an IP address"),
            })?,
        };
        let grpc_port = match get(SVC_GRPC_PORT) {
            None => 0,
            Some(value) => value.parse::<u16>().map_err(|_| DevConfigError::Invalid {
                var: SVC_GRPC_PORT,
                reason: format!("{value:?} is not a port"),
            })?,
        };
        let data_dir =
            PathBuf::from(get(SVC_DEV_DATA_DIR).unwrap_or_else(|| DEFAULT_DATA_DIR.to_owned()));

        // Everything shared lives in this process: no Redis, no PostgreSQL.
        let ignored = [REDIS_URL, POSTGRES_DSN]
            .into_iter()
            .filter(|name| get(name).is_some())
            .collect();
        map.remove(REDIS_URL);
        map.remove(POSTGRES_DSN);
        // A placeholder that parses; the real port is known once the auth plane listens.
        map.insert(SVC_AUTH_GRPC_ADDR.to_owned(), "127.0.0.1:1".to_owned());
        map.entry(SVC_AUTH_VALIDATE_TIMEOUT.to_owned())
            .or_insert_with(|| DEV_VALIDATE_TIMEOUT.to_owned());
        // Lines for a terminal; logs go to stderr, the banner to stdout.
        map.entry(SVC_LOG_FORMAT.to_owned())
            .or_insert_with(|| "text".to_owned());
        let mut gateway = Config::from_map(map).map_err(|e| DevConfigError::Invalid {
            var: e.variable,
            reason: e.problem,
        })?;
        gateway.listen = SocketAddr::new(bind, gateway.listen.port());
        Ok(DevConfig {
            gateway,
            grpc_addr: SocketAddr::new(bind, grpc_port),
            data_dir,
            ignored,
        })
    }

    /// The identity database file.
    pub fn database_path(&self) -> PathBuf {
        self.data_dir.join("identity.db")
    }

    /// The state file: the dev org, agent and admin token to reuse.
    pub fn state_path(&self) -> PathBuf {
        self.data_dir.join("dev-state.json")
    }

    /// Points the gateway at the auth plane's bound gRPC address.
    pub(crate) fn connect_to(&mut self, grpc_addr: SocketAddr) {
        let host = if grpc_addr.ip().is_unspecified() {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), grpc_addr.port())
        } else {
            grpc_addr
        };
        self.gateway.auth.endpoints = vec![format!("http://{host}")];
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn production_is_refused_in_one_line() {
        for env in ["production", "PRODUCTION", " prod "] {
            let error = DevConfig::from_map([(SVC_ENV, env)]).unwrap_err();
            assert_eq!(error, DevConfigError::Production);
            assert!(!error.to_string().contains('\n'));
        }
        DevConfig::from_map([(SVC_ENV, "staging")]).unwrap();
    }

    #[test]
    fn defaults_are_local_and_generous() {
        let config = DevConfig::from_map(Vec::<(String, String)>::new()).unwrap();
        assert_eq!(config.gateway.listen, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(config.grpc_addr, "127.0.0.1:0".parse().unwrap());
        assert_eq!(config.data_dir, PathBuf::from(DEFAULT_DATA_DIR));
        assert_eq!(config.gateway.auth.validate_timeout, Duration::from_secs(2));
        assert!(config.gateway.redis_url.is_none());
        assert!(config.gateway.postgres_dsn.is_none());
        assert_eq!(config.gateway.provider.models, ["svc-mock-1"]);
        assert!(config.ignored.is_empty());
    }

    #[test]
    fn ports_dir_and_timeout_can_be_set() {
        let config = DevConfig::from_map([
            ("SVC_PORT", "18080"),
            (SVC_GRPC_PORT, "19091"),
            (SVC_DEV_DATA_DIR, "/tmp/x"),
            (SVC_AUTH_VALIDATE_TIMEOUT, "500ms"),
            (REDIS_URL, "redis://127.0.0.1:6379"),
        ])
        .unwrap();
        assert_eq!(config.gateway.listen.port(), 18080);
        assert_eq!(config.grpc_addr.port(), 19091);
        assert_eq!(config.database_path(), PathBuf::from("/tmp/x/identity.db"));
        assert_eq!(
            config.gateway.auth.validate_timeout,
            Duration::from_millis(500)
        );
        assert!(config.gateway.redis_url.is_none());
        assert_eq!(config.ignored, [REDIS_URL]);
    }

    #[test]
    fn bad_values_name_their_variable() {
        let cases: [(&str, &str); 3] = [
            (SVC_GRPC_PORT, "http"),
            (SVC_BIND_ADDR, "localhost"),
            ("SVC_PORT", "0"),
        ];
        for (var, value) in cases {
            match DevConfig::from_map([(var, value)]) {
                Err(DevConfigError::Invalid { var: got, .. }) => assert_eq!(got, var),
                other => panic!("{var}={value}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_gateway_dials_loopback_when_bound_everywhere() {
        let mut config = DevConfig::from_map([(SVC_BIND_ADDR, "0.0.0.0")]).unwrap();
        config.connect_to("0.0.0.0:4000".parse().unwrap());
        assert_eq!(config.gateway.auth.endpoints, ["http://127.0.0.1:4000"]);
    }
}
