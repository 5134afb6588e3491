//! gRPC over TLS, and mutual TLS when a client CA is configured.

use tonic::transport::{Certificate, Identity, ServerTlsConfig};

use crate::config::TlsFiles;
use crate::server::StartError;

fn read(path: &std::path::Path) -> Result<Vec<u8>, StartError> {
    std::fs::read(path).map_err(|e| StartError::Tls(format!("cannot read {}: {e}", path.display())))
}

/// The server's TLS settings from PEM files.
pub(crate) fn server_config(files: &TlsFiles) -> Result<ServerTlsConfig, StartError> {
    let identity = Identity::from_pem(read(&files.cert)?, read(&files.key)?);
    let mut tls = ServerTlsConfig::new().identity(identity);
    if let Some(ca) = &files.client_ca {
        tls = tls.client_ca_root(Certificate::from_pem(read(ca)?));
    }
    Ok(tls)
}
