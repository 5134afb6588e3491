//! `GrpcAuthClient::connect_lazy_tls` against an AuthService on loopback that requires client
//! certificates: with its identity the call is answered, without it the handshake is refused,
//! and an `http://` address is refused before anything is sent in plaintext; the same for
//! ValidateToken's own connection, which also checks the server's name.
//!
//! The certificates are svc-auth-server's test fixtures (CA, server for `localhost`, client).

#![cfg(feature = "grpc-tls")]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use svc_testkit::fake_auth::FakeAuth;
use svc_tower::auth::{TokenError, TokenValidator};
use svc_tower::grpc::GrpcAuthClient;
use svc_tower::grpc::GrpcClientError;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};

/// Known to no one: ValidateToken answers Unauthenticated, which proves a call got through.
const TOKEN: &str = "svc_pat_0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b_AbC123xyz";

fn pem(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../svc-auth-server/tests/fixtures/tls")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Serves a fake AuthService knowing no token over mutual TLS on a fresh loopback port.
async fn serve_mtls() -> SocketAddr {
    let tls = ServerTlsConfig::new()
        .identity(Identity::from_pem(pem("server.pem"), pem("server.key")))
        .client_ca_root(Certificate::from_pem(pem("ca.pem")));
    FakeAuth::new().tls(tls).start().await.addr()
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

/// A client whose ValidateToken goes over its own TLS connection to `addr`, expecting a
/// certificate for `name`.
fn token_client(addr: SocketAddr, name: &str, identity: bool) -> GrpcAuthClient {
    let (cert, key) = (pem("client.pem"), pem("client.key"));
    let identity = identity.then_some((cert.as_slice(), key.as_slice()));
    client(
        &format!("https://localhost:{}", addr.port()),
        identity.is_some(),
    )
    .with_token_connection_tls(addr, name, &pem("ca.pem"), identity)
    .unwrap()
}

#[tokio::test]
async fn the_token_connection_speaks_mutual_tls() {
    let addr = serve_mtls().await;
    // By its IP address, connect_lazy_tls gives ValidateToken its own connection.
    let tokens = client(&format!("https://{addr}"), true);
    assert!(tokens.has_token_connection());
    assert_eq!(tokens.validate(TOKEN).await, Err(TokenError::Invalid));
    assert!(!client(&format!("https://localhost:{}", addr.port()), true).has_token_connection());
    // The fixture's certificate names localhost and 127.0.0.1.
    for name in ["127.0.0.1", "localhost"] {
        let tokens = token_client(addr, name, true);
        assert!(tokens.has_token_connection());
        assert_eq!(
            tokens.validate(TOKEN).await,
            Err(TokenError::Invalid),
            "{name}"
        );
    }
}

#[tokio::test]
async fn the_token_connection_is_refused_without_its_certificate_or_the_right_name() {
    let addr = serve_mtls().await;
    for (name, identity) in [("127.0.0.1", false), ("auth.example", true)] {
        let outcome = token_client(addr, name, identity).validate(TOKEN).await;
        assert_eq!(outcome, Err(TokenError::Unavailable), "{name}, {identity}");
    }
}

#[tokio::test]
async fn token_connection_tls_material_is_checked_up_front() {
    let addr: SocketAddr = "127.0.0.1:9091".parse().unwrap();
    let base = || GrpcAuthClient::connect_lazy("127.0.0.1:9091").unwrap();
    let err = base()
        .with_token_connection_tls(addr, "127.0.0.1", b"not a certificate", None)
        .unwrap_err();
    assert!(matches!(err, GrpcClientError::TokenTls(_)), "{err}");
    let (cert, key) = (pem("client.pem"), pem("server.key"));
    let err = base()
        .with_token_connection_tls(addr, "127.0.0.1", &pem("ca.pem"), Some((&cert, &key)))
        .unwrap_err();
    assert!(matches!(err, GrpcClientError::TokenTls(_)), "{err}");
}
