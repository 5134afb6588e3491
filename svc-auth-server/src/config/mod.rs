//! The auth server's configuration, read once at start from environment variables.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `SVC_PORT` | HTTP port (`/health`, `/ready`, `/metrics`) | 8081 |
//! | `SVC_GRPC_PORT` | gRPC port | 9091 |
//! | `SVC_BIND_ADDR` | address both listeners bind | 0.0.0.0 |
//! | `POSTGRES_DSN` | PostgreSQL connection string | required |
//! | `SVC_ENV` | development, staging or production | development |
//! | `SVC_LOG_LEVEL` | DEBUG, INFO, WARN, ERROR | INFO |
//! | `SVC_LOG_FORMAT` | json or text (production: json only) | json |
//! | `SVC_GRPC_ALLOW_PLAINTEXT` | production accepts plaintext gRPC only when true | false |
//! | `SVC_GRPC_TLS_CERT`, `SVC_GRPC_TLS_KEY` | PEM files: serve gRPC over TLS | unset |
//! | `SVC_GRPC_TLS_CLIENT_CA` | PEM file: require client certificates signed by it (mTLS) | unset |
//! | `SVC_ARGON2_MEMORY_KIB`, `SVC_ARGON2_ITERATIONS`, `SVC_ARGON2_PARALLELISM` | cost of new hashes | 19456, 2, 1 |
//! | `SVC_HASH_CONCURRENCY` | Argon2 runs at once | half the CPU count, at least 1 |
//! | `SVC_COLD_VALIDATION_RATE` | validations of secrets not yet seen to succeed, started per second (the rest wait up to 25 ms, then answer busy) | 1000 |
//! | `SVC_DB_MAX_CONNECTIONS` | size of each pool (validation lookups; admin transactions) | 16 |
//! | `SVC_DB_CONNECT_TIMEOUT` | opening a standalone connection | 2s |
//! | `SVC_DB_ACQUIRE_TIMEOUT` | getting a pooled connection; also the most a validation lookup's statement may take before its connection is dropped | 1s |
//! | `SVC_HTTP_HEADER_READ_TIMEOUT` | HTTP: time a client has to send a request's headers | 10s |
//! | `SVC_HTTP_IDLE_TIMEOUT` | HTTP: a connection with no request in flight this long is closed | 60s |
//! | `SVC_HTTP_MAX_CONNECTIONS` | HTTP: connections served at once | 4096 |
//! | `SVC_MAX_CONNECTIONS_PER_ADDRESS` | connections from one client address, per listener (HTTP and gRPC) | 256 |
//! | `SVC_WRITE_TIMEOUT` | a write, or a response not taken, blocked this long closes the connection (HTTP and gRPC) | 30s |
//! | `SVC_GRPC_MAX_CONNECTIONS` | gRPC: connections served at once | 1024 |
//! | `SVC_GRPC_HANDSHAKE_TIMEOUT` | gRPC: from accept to the HTTP/2 preface (and TLS) | 5s |
//! | `SVC_SHUTDOWN_GRACE` | how long a shutdown waits for calls in flight | 10s |
//! | `SVC_WORKER_THREADS` | the async runtime's worker threads (Argon2 runs on threads of its own) | half the CPU count, at least 1 |
//! | `OTEL_EXPORTER_OTLP_ENDPOINT` | `host:port` of an OTLP gRPC collector, `https://host:port` over TLS; empty: no export | empty |
//! | `OTEL_EXPORTER_OTLP_CERTIFICATE` | PEM file: CA certificates also trusted for an `https://` collector | unset |
//! | `OTEL_SAMPLE_RATIO` | share of traces started here that are exported, 0..=1 | 0.01 |
//! | `OTEL_SERVICE_NAME` | exported `service.name`; else `SVC_SERVICE_NAME`, else svc-auth-server | |
//! | `OTEL_DEPLOYMENT_ENVIRONMENT` | exported `deployment.environment`; else `SVC_ENV` | |
//! | `SENTRY_DSN` | a Sentry DSN: Internal, Unknown and DataLoss answers and panics are reported | unset |
//!
//! ```
//! use svc_auth_server::config::Config;
//! use svc_runtime::config::Vars;
//!
//! let vars = Vars::from_pairs([("POSTGRES_DSN", "postgres://app:pw@db/svc"), ("SVC_PORT", "abc")]);
//! let error = Config::from_vars(&vars).unwrap_err();
//! assert_eq!(error.to_string(), r#"SVC_PORT: invalid port "abc""#);
//!
//! let vars = Vars::from_pairs([("POSTGRES_DSN", "postgres://app:pw@db/svc")]);
//! let config = Config::from_vars(&vars).unwrap();
//! assert_eq!(config.http_addr.port(), 8081);
//! assert!(!format!("{config:?}").contains("pw@db"));
//! ```

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use svc_runtime::Secret;
use svc_runtime::http_server::HttpSettings;
use svc_runtime::postgres::{
    DEFAULT_ACQUIRE_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_CONNECTIONS, PoolSettings,
    connect_options,
};
use svc_runtime::telemetry::LogSettings;
use svc_runtime::telemetry::otel::OtelSettings;

use crate::verify::{Argon2Params, DEFAULT_COLD_RATE, FailureLimits, hasher};

pub mod grpc_listener;

use grpc_listener::GrpcListener;

/// The shared parsing every svc binary uses, at the path this crate has always offered it.
pub use svc_runtime::config as vars;

use vars::{
    ConfigError, Environment, Vars, parse_bool, parse_duration, parse_port, parse_positive,
};

svc_runtime::variables! {
    /// HTTP port of the ops routes (health, readiness, metrics).
    SVC_PORT;
    /// gRPC port.
    SVC_GRPC_PORT;
    /// Address both listeners bind.
    SVC_BIND_ADDR;
    /// `development`, `staging` or `production`.
    SVC_ENV;
    /// Production serves plaintext gRPC only when true.
    SVC_GRPC_ALLOW_PLAINTEXT;
    /// Server certificate (PEM).
    SVC_GRPC_TLS_CERT;
    /// Server private key (PEM).
    SVC_GRPC_TLS_KEY;
    /// CA that client certificates must chain to (PEM).
    SVC_GRPC_TLS_CLIENT_CA;
    /// Argon2 memory cost in KiB.
    SVC_ARGON2_MEMORY_KIB;
    /// Argon2 passes.
    SVC_ARGON2_ITERATIONS;
    /// Argon2 lanes.
    SVC_ARGON2_PARALLELISM;
    /// Concurrent Argon2 runs.
    SVC_HASH_CONCURRENCY;
    /// Cold validations started per second.
    SVC_COLD_VALIDATION_RATE;
    /// Database pool size.
    SVC_DB_MAX_CONNECTIONS;
    /// Bound on opening one database connection outside the pool.
    SVC_DB_CONNECT_TIMEOUT;
    /// Bound on getting a pooled database connection.
    SVC_DB_ACQUIRE_TIMEOUT;
    /// Sentry DSN.
    SENTRY_DSN;
}

/// PostgreSQL DSN variable.
pub use svc_runtime::postgres::POSTGRES_DSN;

/// Every variable the server reads, by the modules that declare them: its `--help` lists them.
pub const EVERY_VARIABLE: &[&[svc_runtime::config::Variable]] = &[
    VARIABLES,
    svc_runtime::postgres::VARIABLES,
    grpc_listener::VARIABLES,
    svc_runtime::http_server::VARIABLES,
    svc_runtime::telemetry::VARIABLES,
    svc_runtime::telemetry::otel::VARIABLES,
    svc_runtime::runtime::VARIABLES,
];

/// The binary's name: the exported `service.name` unless `OTEL_SERVICE_NAME` or
/// `SVC_SERVICE_NAME` says otherwise.
pub const SERVICE_NAME: &str = "svc-auth-server";

/// Default HTTP port.
pub const DEFAULT_HTTP_PORT: u16 = 8081;
/// Default gRPC port.
pub const DEFAULT_GRPC_PORT: u16 = 9091;
/// Default bind address: every interface.
pub const DEFAULT_BIND_ADDR: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);

/// PEM files for serving gRPC over TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// Certificate chain.
    pub cert: PathBuf,
    /// Private key.
    pub key: PathBuf,
    /// When set, clients must present a certificate signed by this CA.
    pub client_ca: Option<PathBuf>,
}

/// Everything the server needs, validated.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the HTTP ops routes listen.
    pub http_addr: SocketAddr,
    /// Where gRPC listens.
    pub grpc_addr: SocketAddr,
    /// The identity store.
    pub postgres_dsn: Secret,
    /// Development, staging or production.
    pub environment: Environment,
    /// Logging.
    pub log: LogSettings,
    /// TLS for gRPC; plaintext when `None`.
    pub grpc_tls: Option<TlsFiles>,
    /// `SVC_GRPC_ALLOW_PLAINTEXT`: production may serve plaintext gRPC.
    pub grpc_allow_plaintext: bool,
    /// Cost of new hashes.
    pub argon2: Argon2Params,
    /// Argon2 runs at once.
    pub hash_concurrency: usize,
    /// Pool sizing and timeouts.
    pub pool: PoolSettings,
    /// Wrong-secret limits per token id.
    pub failure_limits: FailureLimits,
    /// Trace export (`OTEL_*`).
    pub otel: OtelSettings,
    /// `SVC_HTTP_*` and `SVC_SHUTDOWN_GRACE`: timeouts, connection cap, drain.
    pub http: HttpSettings,
    /// `SVC_GRPC_MAX_CONNECTIONS` and `SVC_GRPC_HANDSHAKE_TIMEOUT`.
    pub grpc_listener: GrpcListener,
    /// `SENTRY_DSN`: a checked Sentry DSN; server faults and panics are reported there.
    pub sentry_dsn: Option<Secret>,
    /// `SVC_WORKER_THREADS`: the runtime's workers.
    pub worker_threads: usize,
}

/// Half the CPUs: a flood of never-seen secrets, each worth an Argon2 run, leaves the other
/// half to the tokens already verified.
fn default_hash_concurrency() -> usize {
    svc_runtime::runtime::half_the_cpus()
}

impl Config {
    /// Defaults, with both listeners on 127.0.0.1 and OS-assigned ports: for tests and the
    /// embedded development mode.
    pub fn local(dsn: impl Into<String>) -> Config {
        let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
        Config {
            http_addr: SocketAddr::new(loopback, 0),
            grpc_addr: SocketAddr::new(loopback, 0),
            postgres_dsn: Secret::new(dsn),
            environment: Environment::Development,
            log: LogSettings::default(),
            grpc_tls: None,
            grpc_allow_plaintext: false,
            argon2: Argon2Params::default(),
            hash_concurrency: default_hash_concurrency(),
            pool: PoolSettings::default(),
            failure_limits: FailureLimits::default(),
            otel: OtelSettings::disabled(SERVICE_NAME, Environment::Development),
            http: HttpSettings::default(),
            grpc_listener: GrpcListener::default(),
            sentry_dsn: None,
            worker_threads: svc_runtime::runtime::half_the_cpus(),
        }
    }

    /// The rules for serving, beyond those every subcommand needs: production refuses
    /// plaintext gRPC unless `SVC_GRPC_ALLOW_PLAINTEXT=true`, and TLS without a client CA
    /// (the internal plane is mutual TLS). `migrate` and `seed` serve nothing, so a migration
    /// job in production needs no gRPC settings.
    pub fn check_serving(&self) -> Result<(), ConfigError> {
        if self.environment == Environment::Production
            && self
                .grpc_tls
                .as_ref()
                .is_some_and(|tls| tls.client_ca.is_none())
        {
            return Err(ConfigError::new(
                SVC_GRPC_TLS_CLIENT_CA,
                "production requires mutual TLS on gRPC: set it to the CA that signs the \
                 gateways' client certificates",
            ));
        }
        if self.environment == Environment::Production
            && self.grpc_tls.is_none()
            && !self.grpc_allow_plaintext
        {
            return Err(ConfigError::new(
                SVC_GRPC_ALLOW_PLAINTEXT,
                "production refuses plaintext gRPC: set SVC_GRPC_TLS_CERT and SVC_GRPC_TLS_KEY, \
                 or SVC_GRPC_ALLOW_PLAINTEXT=true on a private network",
            ));
        }
        Ok(())
    }

    /// Reads and validates every variable; the first problem found is returned.
    pub fn from_vars(vars: &Vars) -> Result<Config, ConfigError> {
        let environment = vars.parse_or(SVC_ENV, Environment::default(), Environment::parse)?;
        let bind = vars.parse_or(SVC_BIND_ADDR, DEFAULT_BIND_ADDR, |v| {
            v.parse::<IpAddr>()
                .map_err(|_| format!("invalid IP address {v:?}"))
        })?;
        let http_port = vars.parse_or(SVC_PORT, DEFAULT_HTTP_PORT, parse_port)?;
        let grpc_port = vars.parse_or(SVC_GRPC_PORT, DEFAULT_GRPC_PORT, parse_port)?;
        if http_port == grpc_port && http_port != 0 {
            return Err(ConfigError::new(
                SVC_GRPC_PORT,
                format!("port {grpc_port} is also {SVC_PORT}"),
            ));
        }

        let dsn = vars.required(POSTGRES_DSN)?;
        connect_options(dsn)?;

        let log = LogSettings::from_vars(vars)?;
        if environment == Environment::Production
            && log.format == svc_runtime::telemetry::LogFormat::Text
        {
            return Err(ConfigError::new(
                svc_runtime::telemetry::SVC_LOG_FORMAT,
                "text logs are refused in production; use json",
            ));
        }

        let grpc_tls = tls_files(vars)?;
        let grpc_allow_plaintext = vars.parse_or(SVC_GRPC_ALLOW_PLAINTEXT, false, parse_bool)?;

        let argon2 = Argon2Params {
            memory_kib: vars.parse_or(
                SVC_ARGON2_MEMORY_KIB,
                hasher::DEFAULT_MEMORY_KIB,
                parse_positive,
            )?,
            iterations: vars.parse_or(
                SVC_ARGON2_ITERATIONS,
                hasher::DEFAULT_ITERATIONS,
                parse_positive,
            )?,
            parallelism: vars.parse_or(
                SVC_ARGON2_PARALLELISM,
                hasher::DEFAULT_PARALLELISM,
                parse_positive,
            )?,
        };
        crate::verify::Hasher::new(argon2, 1)
            .map_err(|e| ConfigError::new(SVC_ARGON2_MEMORY_KIB, e.to_string()))?;

        Ok(Config {
            http_addr: SocketAddr::new(bind, http_port),
            grpc_addr: SocketAddr::new(bind, grpc_port),
            postgres_dsn: Secret::new(dsn),
            environment,
            log,
            grpc_tls,
            grpc_allow_plaintext,
            argon2,
            hash_concurrency: vars.parse_or(
                SVC_HASH_CONCURRENCY,
                default_hash_concurrency(),
                parse_positive,
            )?,
            pool: PoolSettings {
                max_connections: vars.parse_or(
                    SVC_DB_MAX_CONNECTIONS,
                    DEFAULT_MAX_CONNECTIONS,
                    parse_positive,
                )?,
                connect_timeout: vars.parse_or(
                    SVC_DB_CONNECT_TIMEOUT,
                    DEFAULT_CONNECT_TIMEOUT,
                    parse_nonzero_duration,
                )?,
                acquire_timeout: vars.parse_or(
                    SVC_DB_ACQUIRE_TIMEOUT,
                    DEFAULT_ACQUIRE_TIMEOUT,
                    parse_nonzero_duration,
                )?,
            },
            failure_limits: FailureLimits {
                cold_rate: vars.parse_or(
                    SVC_COLD_VALIDATION_RATE,
                    DEFAULT_COLD_RATE,
                    parse_positive,
                )?,
                ..FailureLimits::default()
            },
            otel: OtelSettings::from_vars(vars, SERVICE_NAME, environment)?,
            http: HttpSettings::from_vars(vars)?,
            grpc_listener: GrpcListener::from_vars(vars)?,
            sentry_dsn: vars.parse_or(SENTRY_DSN, None, svc_runtime::error_report::parse_dsn)?,
            worker_threads: svc_runtime::runtime::worker_threads(vars)?,
        })
    }
}

fn parse_nonzero_duration(value: &str) -> Result<Duration, String> {
    match parse_duration(value)? {
        Duration::ZERO => Err(format!("invalid duration {value:?} (must be above zero)")),
        duration => Ok(duration),
    }
}

fn tls_files(vars: &Vars) -> Result<Option<TlsFiles>, ConfigError> {
    let cert = vars.get(SVC_GRPC_TLS_CERT).map(PathBuf::from);
    let key = vars.get(SVC_GRPC_TLS_KEY).map(PathBuf::from);
    let client_ca = vars.get(SVC_GRPC_TLS_CLIENT_CA).map(PathBuf::from);
    match (cert, key) {
        (Some(cert), Some(key)) => Ok(Some(TlsFiles {
            cert,
            key,
            client_ca,
        })),
        (None, None) if client_ca.is_none() => Ok(None),
        (None, _) => Err(ConfigError::new(
            SVC_GRPC_TLS_CERT,
            "required when SVC_GRPC_TLS_KEY or SVC_GRPC_TLS_CLIENT_CA is set",
        )),
        (Some(_), None) => Err(ConfigError::new(
            SVC_GRPC_TLS_KEY,
            "required when SVC_GRPC_TLS_CERT is set",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DSN: &str = "postgres://owner:s3cret@127.0.0.1:5432/svc";

    fn parse(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let mut all = vec![(POSTGRES_DSN, DSN)];
        all.extend_from_slice(pairs);
        Config::from_vars(&Vars::from_pairs(all.iter().copied()))
    }

    #[test]
    fn help_lists_every_variable_read() {
        let shapes: [&[(&str, &str)]; 2] = [
            &[],
            &[
                (SVC_ENV, "production"),
                (SVC_GRPC_TLS_CERT, "/cert.pem"),
                (SVC_GRPC_TLS_KEY, "/key.pem"),
                (SVC_GRPC_TLS_CLIENT_CA, "/ca.pem"),
            ],
        ];
        let mut everything = std::collections::BTreeSet::new();
        for shape in shapes {
            let mut all = vec![(POSTGRES_DSN, DSN)];
            all.extend_from_slice(shape);
            let vars = Vars::from_pairs(all);
            let _ = Config::from_vars(&vars);
            assert_eq!(vars.unlisted(EVERY_VARIABLE), Vec::<String>::new());
            everything.extend(vars.asked());
        }
        assert!(everything.len() > 25, "{everything:?}");
    }

    #[test]
    fn defaults() {
        let config = parse(&[]).unwrap();
        assert_eq!(config.http_addr, "0.0.0.0:8081".parse().unwrap());
        assert_eq!(config.grpc_addr, "0.0.0.0:9091".parse().unwrap());
        assert_eq!(config.environment, Environment::Development);
        assert_eq!(config.log, LogSettings::default());
        assert_eq!(config.argon2, Argon2Params::default());
        assert_eq!(config.pool, PoolSettings::default());
        assert!(config.grpc_tls.is_none());
    }

    #[test]
    fn every_bad_value_names_its_variable() {
        let cases: &[(&str, &str)] = &[
            (SVC_PORT, "abc"),
            (SVC_GRPC_PORT, "-1"),
            (SVC_BIND_ADDR, "localhost:1"),
            (SVC_ENV, "prod"),
            ("SVC_LOG_LEVEL", "verbose"),
            ("SVC_LOG_FORMAT", "xml"),
            (SVC_GRPC_ALLOW_PLAINTEXT, "sure"),
            (SVC_ARGON2_MEMORY_KIB, "0"),
            (SVC_ARGON2_ITERATIONS, "x"),
            (SVC_HASH_CONCURRENCY, "0"),
            (SVC_COLD_VALIDATION_RATE, "0"),
            (SVC_DB_MAX_CONNECTIONS, "many"),
            (SVC_DB_CONNECT_TIMEOUT, "5"),
            (SVC_DB_ACQUIRE_TIMEOUT, "0s"),
            (POSTGRES_DSN, "mysql://nope"),
        ];
        for (name, value) in cases {
            let error = parse(&[(name, value)]).expect_err(name);
            assert_eq!(error.variable, *name, "{error}");
        }
        assert_eq!(
            parse(&[(SVC_PORT, "abc")]).unwrap_err().to_string(),
            r#"SVC_PORT: invalid port "abc""#
        );
    }

    #[test]
    fn the_dsn_is_required_and_never_shown() {
        let error = Config::from_vars(&Vars::default()).unwrap_err();
        assert_eq!(error.variable, POSTGRES_DSN);
        let bad = parse(&[(POSTGRES_DSN, "mysql://user:s3cret@host/db")]).unwrap_err();
        assert!(!bad.to_string().contains("s3cret"));
        let config = parse(&[]).unwrap();
        assert!(!format!("{config:?}").contains("s3cret"));
        assert_eq!(config.postgres_dsn.expose(), DSN);
    }

    #[test]
    fn production_refuses_text_logs_and_unannounced_plaintext() {
        let error = parse(&[(SVC_ENV, "production"), ("SVC_LOG_FORMAT", "text")]).unwrap_err();
        assert_eq!(error.variable, "SVC_LOG_FORMAT");
        let error = parse(&[(SVC_ENV, "production")])
            .unwrap()
            .check_serving()
            .unwrap_err();
        assert_eq!(error.variable, SVC_GRPC_ALLOW_PLAINTEXT);
        let config = parse(&[(SVC_ENV, "PRODUCTION"), (SVC_GRPC_ALLOW_PLAINTEXT, "true")]).unwrap();
        assert_eq!(config.environment, Environment::Production);
        let config = parse(&[
            (SVC_ENV, "production"),
            (SVC_GRPC_TLS_CERT, "/c.pem"),
            (SVC_GRPC_TLS_KEY, "/k.pem"),
        ])
        .unwrap();
        assert!(config.grpc_tls.is_some());
        // TLS without client certificates is not the mutual TLS the internal plane needs.
        let error = config.check_serving().unwrap_err();
        assert_eq!(error.variable, SVC_GRPC_TLS_CLIENT_CA);
        let mutual = parse(&[
            (SVC_ENV, "production"),
            (SVC_GRPC_TLS_CERT, "/c.pem"),
            (SVC_GRPC_TLS_KEY, "/k.pem"),
            (SVC_GRPC_TLS_CLIENT_CA, "/ca.pem"),
        ])
        .unwrap();
        assert!(mutual.check_serving().is_ok());
        // Server-only TLS is fine outside production.
        let staging =
            parse(&[(SVC_GRPC_TLS_CERT, "/c.pem"), (SVC_GRPC_TLS_KEY, "/k.pem")]).unwrap();
        assert!(staging.check_serving().is_ok());
        // Text logs are fine outside production.
        parse(&[("SVC_LOG_FORMAT", "text")]).unwrap();
    }

    #[test]
    fn tls_needs_both_cert_and_key() {
        assert_eq!(
            parse(&[(SVC_GRPC_TLS_CERT, "/c.pem")])
                .unwrap_err()
                .variable,
            SVC_GRPC_TLS_KEY
        );
        assert_eq!(
            parse(&[(SVC_GRPC_TLS_CLIENT_CA, "/ca.pem")])
                .unwrap_err()
                .variable,
            SVC_GRPC_TLS_CERT
        );
    }

    #[test]
    fn ports_must_differ() {
        let error = parse(&[(SVC_PORT, "9000"), (SVC_GRPC_PORT, "9000")]).unwrap_err();
        assert_eq!(error.variable, SVC_GRPC_PORT);
    }
}
