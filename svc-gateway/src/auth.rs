//! The one channel to the auth service, shared by PatAuth, AgentCheck and the readiness probe
//! (ValidateToken on a connection of its own for one IP address),
//! built from [`AuthConfig`] by [`svc_runtime::auth_client`] (as `svc token` builds its own).

use svc_tower::grpc::GrpcAuthClient;
use tonic::transport::Channel;

pub use svc_runtime::auth_client::AuthSetupError;

use crate::config::AuthConfig;

/// A lazily connecting channel (TCP_NODELAY, keepalive, mutual TLS when configured).
pub fn channel(config: &AuthConfig) -> Result<Channel, AuthSetupError> {
    config.channel()
}

/// The validator for PatAuth and AgentCheck, with the configured ValidateToken deadline.
pub fn client(channel: Channel, config: &AuthConfig) -> GrpcAuthClient {
    config.client(channel)
}
