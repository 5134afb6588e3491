//! The one channel to the auth service, shared by PatAuth, AgentCheck and the readiness probe.

use svc_tower::auth::GrpcAuthClient;
use svc_tower::auth::grpc::GrpcClientError;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

use crate::config::AuthConfig;

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
    /// tonic refused the TLS material.
    #[error("SVC_AUTH_GRPC_TLS_*: invalid TLS material")]
    Tls(#[source] tonic::transport::Error),
}

/// A lazily connecting channel (TCP_NODELAY, mutual TLS when configured).
pub fn channel(config: &AuthConfig) -> Result<Channel, AuthSetupError> {
    let mut endpoint =
        GrpcAuthClient::endpoint(&config.endpoint).map_err(AuthSetupError::Address)?;
    if let Some(ca) = &config.tls_ca {
        let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read(
            crate::config::SVC_AUTH_GRPC_TLS_CA,
            ca,
        )?));
        if let (Some(cert), Some(key)) = (&config.tls_cert, &config.tls_key) {
            tls = tls.identity(Identity::from_pem(
                read(crate::config::SVC_AUTH_GRPC_TLS_CERT, cert)?,
                read(crate::config::SVC_AUTH_GRPC_TLS_KEY, key)?,
            ));
        }
        endpoint = endpoint.tls_config(tls).map_err(AuthSetupError::Tls)?;
    }
    Ok(endpoint.connect_lazy())
}

/// The validator for PatAuth and AgentCheck, with the configured ValidateToken deadline.
pub fn client(channel: Channel, config: &AuthConfig) -> GrpcAuthClient {
    GrpcAuthClient::from_channel(channel).validate_timeout(config.validate_timeout)
}

fn read(var: &'static str, path: &str) -> Result<Vec<u8>, AuthSetupError> {
    std::fs::read(path).map_err(|source| AuthSetupError::TlsFile {
        var,
        path: path.to_owned(),
        source,
    })
}
