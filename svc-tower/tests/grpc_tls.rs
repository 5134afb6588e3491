//! `GrpcAuthClient::connect_lazy_tls` against an AuthService on loopback that requires client
//! certificates: with its identity the call is answered, without it the handshake is refused,
//! and an `http://` address is refused before anything is sent in plaintext.
//!
//! The certificates are svc-auth-server's test fixtures (CA, server for `localhost`, client).

#![cfg(feature = "grpc-tls")]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use svc_proto::v1::auth_service_server::{AuthService, AuthServiceServer};
use svc_proto::v1::{
    CreateTokenRequest, CreateTokenResponse, ListTokensRequest, ListTokensResponse,
    RevokeTokenRequest, RevokeTokenResponse, ValidateAgentRequest, ValidateAgentResponse,
    ValidateTokenRequest, ValidateTokenResponse,
};
use svc_tower::auth::grpc::GrpcClientError;
use svc_tower::auth::{GrpcAuthClient, TokenError, TokenValidator};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::Status;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};

const TOKEN: &str = "svc_pat_0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b_AbC123xyz";

fn pem(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../svc-auth-server/tests/fixtures/tls")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Knows no token: every ValidateToken is Unauthenticated, which proves a call got through.
struct NoTokens;

#[tonic::async_trait]
impl AuthService for NoTokens {
    async fn validate_token(
        &self,
        _: tonic::Request<ValidateTokenRequest>,
    ) -> Result<tonic::Response<ValidateTokenResponse>, Status> {
        Err(Status::unauthenticated("invalid token"))
    }

    async fn validate_agent(
        &self,
        _: tonic::Request<ValidateAgentRequest>,
    ) -> Result<tonic::Response<ValidateAgentResponse>, Status> {
        Err(Status::unimplemented("not in this test"))
    }

    async fn create_token(
        &self,
        _: tonic::Request<CreateTokenRequest>,
    ) -> Result<tonic::Response<CreateTokenResponse>, Status> {
        Err(Status::unimplemented("not in this test"))
    }

    async fn revoke_token(
        &self,
        _: tonic::Request<RevokeTokenRequest>,
    ) -> Result<tonic::Response<RevokeTokenResponse>, Status> {
        Err(Status::unimplemented("not in this test"))
    }

    async fn list_tokens(
        &self,
        _: tonic::Request<ListTokensRequest>,
    ) -> Result<tonic::Response<ListTokensResponse>, Status> {
        Err(Status::unimplemented("not in this test"))
    }
}

/// Serves [`NoTokens`] over mutual TLS on a fresh loopback port.
async fn serve_mtls() -> SocketAddr {
    let tls = ServerTlsConfig::new()
        .identity(Identity::from_pem(pem("server.pem"), pem("server.key")))
        .client_ca_root(Certificate::from_pem(pem("ca.pem")));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tonic::transport::Server::builder()
        .tls_config(tls)
        .unwrap()
        .add_service(AuthServiceServer::new(NoTokens));
    tokio::spawn(server.serve_with_incoming(TcpListenerStream::new(listener)));
    addr
}

fn client(addr: &str, identity: bool) -> GrpcAuthClient {
    let (cert, key) = (pem("client.pem"), pem("client.key"));
    let identity = identity.then_some((cert.as_slice(), key.as_slice()));
    GrpcAuthClient::connect_lazy_tls(addr, &pem("ca.pem"), identity)
        .unwrap()
        .validate_timeout(Duration::from_secs(5))
}

#[tokio::test]
async fn a_client_with_its_certificate_is_answered() {
    let port = serve_mtls().await.port();
    for addr in [
        format!("https://localhost:{port}"),
        // A bare host:port means TLS here.
        format!("localhost:{port}"),
    ] {
        let outcome = client(&addr, true).validate(TOKEN).await;
        assert_eq!(outcome.unwrap_err(), TokenError::Invalid, "{addr}");
    }
}

#[tokio::test]
async fn a_client_without_a_certificate_is_refused() {
    let port = serve_mtls().await.port();
    let outcome = client(&format!("https://localhost:{port}"), false)
        .validate(TOKEN)
        .await;
    let err = outcome.unwrap_err();
    assert_ne!(err, TokenError::Invalid, "the server must never answer");
}

#[test]
fn an_http_address_is_refused_rather_than_sent_in_plaintext() {
    let err = GrpcAuthClient::connect_lazy_tls("http://localhost:9091", &pem("ca.pem"), None)
        .unwrap_err();
    assert!(matches!(err, GrpcClientError::InvalidAddress(_)), "{err}");
}
