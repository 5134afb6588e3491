//! gRPC over mutual TLS: a client with a certificate from the configured CA is served; a
//! client without one, or speaking plaintext, is not.

use std::path::PathBuf;
use std::time::Duration;

use crate::common::*;
use svc_auth_server::config::TlsFiles;
use svc_auth_server::{Config, Server};
use svc_proto::v1::ValidateTokenRequest;
use svc_proto::v1::auth_service_client::AuthServiceClient;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tls")
        .join(name)
}

fn pem(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).unwrap()
}

async fn call(endpoint: Endpoint, token: &str) -> Result<(), String> {
    let channel = endpoint
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| format!("connect: {e}"))?;
    AuthServiceClient::new(channel)
        .validate_token(ValidateTokenRequest {
            access_token: token.to_owned(),
            agent_id: None,
        })
        .await
        .map(drop)
        .map_err(|status| format!("call: {status:?}"))
}

#[tokio::test]
async fn mutual_tls_serves_only_clients_with_a_certificate_from_the_ca() {
    let db = migrated_db().await;
    let mut config = Config::local(db.url());
    config.grpc_tls = Some(TlsFiles {
        cert: fixture("server.pem"),
        key: fixture("server.key"),
        client_ca: Some(fixture("ca.pem")),
    });
    let server = Server::start(config.clone()).await.unwrap();
    let seed = seed_org(&config, None).await;
    let url = format!("https://localhost:{}", server.grpc_addr.port());
    let server_trust = || {
        ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(pem("ca.pem")))
            .domain_name("localhost")
    };

    let with_identity = Endpoint::from_shared(url.clone())
        .unwrap()
        .tls_config(
            server_trust().identity(Identity::from_pem(pem("client.pem"), pem("client.key"))),
        )
        .unwrap();
    call(with_identity, &seed.chat_token).await.unwrap();

    let without_identity = Endpoint::from_shared(url.clone())
        .unwrap()
        .tls_config(server_trust())
        .unwrap();
    assert!(call(without_identity, &seed.chat_token).await.is_err());

    let plaintext = Endpoint::from_shared(format!("http://{}", server.grpc_addr)).unwrap();
    assert!(call(plaintext, &seed.chat_token).await.is_err());

    // Readiness still sees the listener.
    let (status, _, body) = http_get(server.http_addr, "/ready").await;
    assert_eq!(status, 200, "{body}");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn unreadable_tls_files_stop_the_start() {
    let db = migrated_db().await;
    let mut config = Config::local(db.url());
    config.grpc_tls = Some(TlsFiles {
        cert: fixture("missing.pem"),
        key: fixture("server.key"),
        client_ca: None,
    });
    let error = Server::start(config).await.unwrap_err();
    assert!(
        error.to_string().starts_with("gRPC TLS: cannot read"),
        "{error}"
    );
}
