//! The gRPC admin template against the real auth server, started in process on a fresh,
//! migrated and seeded PostgreSQL database.

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use svc_auth_server::config::Config;
use svc_auth_server::seed::{self, SeedOptions, SeedOutput};
use svc_auth_server::{RunningServer, Server};
use svc_examples::grpc_admin::{self, AdminBearer, AdminClient, AdminError, TOKEN_NAME};
use svc_proto::v1::auth_service_client::AuthServiceClient;
use svc_proto::v1::{PermissionBit, ValidateTokenRequest};
use svc_testkit::TestDb;
use tonic::Code;
use tonic::transport::Channel;

struct Auth {
    _db: TestDb,
    server: RunningServer,
    seed: SeedOutput,
}

impl Auth {
    async fn start() -> Auth {
        let db = TestDb::create().await;
        let config = Config::local(db.url());
        svc_auth_server::migrate::run(db.url(), &config.pool)
            .await
            .expect("migrate");
        let server = Server::start(config.clone()).await.expect("server starts");
        let seed = seed::run_with_config(&config, &SeedOptions::default())
            .await
            .expect("seed");
        Auth {
            _db: db,
            server,
            seed,
        }
    }

    async fn channel(&self) -> Channel {
        grpc_admin::connect(&self.server.grpc_addr.to_string())
            .await
            .expect("connect")
    }

    async fn admin(&self) -> AdminClient {
        let bearer = AdminBearer::new(&self.seed.admin_token).unwrap();
        AuthServiceClient::with_interceptor(self.channel().await, bearer)
    }
}

/// The token id inside a `svc_pat_<uuid>_<secret>` value.
fn token_id(token: &str) -> String {
    token["svc_pat_".len()..]
        .split_once('_')
        .unwrap()
        .0
        .to_owned()
}

#[tokio::test]
async fn the_walkthrough_creates_lists_revokes_and_then_validation_refuses() {
    let auth = Auth::start().await;
    let org = auth.seed.org_id.to_string();

    let w = grpc_admin::run(auth.channel().await, &auth.seed.admin_token, 2)
        .await
        .expect("the walkthrough succeeds");

    // CreateToken, in the admin token's org.
    assert_eq!(w.org_id, org);
    assert_eq!(
        w.created.permissions,
        grpc_admin::permission(PermissionBit::ChatCompletions)
    );
    assert_eq!(token_id(&w.created.token), w.created.token_id);
    let expires_at = SystemTime::try_from(w.created.expires_at.unwrap()).unwrap();
    let lifetime = expires_at.duration_since(SystemTime::now()).unwrap();
    assert!(lifetime > Duration::from_secs(50 * 60) && lifetime <= grpc_admin::TOKEN_LIFETIME);
    assert_eq!(w.validated_org_id, org);
    assert!(!format!("{w:?}").contains(&w.created.token));

    // ListTokens: the seeded admin and chat tokens plus the new one, two to a page.
    let sizes: Vec<usize> = w.pages.iter().map(Vec::len).collect();
    assert_eq!(sizes, [2, 1]);
    let listed: Vec<_> = w.pages.iter().flatten().collect();
    let ids: HashSet<&str> = listed.iter().map(|t| t.token_id.as_str()).collect();
    let expected: HashSet<String> = [
        token_id(&auth.seed.admin_token),
        token_id(&auth.seed.chat_token),
        w.created.token_id.clone(),
    ]
    .into();
    assert_eq!(ids, expected.iter().map(String::as_str).collect());
    assert!(listed.iter().all(|t| t.org_id == org));
    let new = listed
        .iter()
        .find(|t| t.token_id == w.created.token_id)
        .unwrap();
    assert_eq!(new.name.as_deref(), Some(TOKEN_NAME));
    assert!(new.revoked_at.is_none(), "listed before the revocation");

    // RevokeToken, then ValidateToken refuses the token at once.
    assert!(w.revoked_at.is_some());
    assert_eq!(w.after_revoke, Code::Unauthenticated);

    // The listing now shows the revocation; the admin token itself still works.
    let mut admin = auth.admin().await;
    let pages = grpc_admin::list_all(&mut admin, 1).await.unwrap();
    assert_eq!(pages.len(), 3, "one token per page");
    let revoked = pages
        .iter()
        .flatten()
        .find(|t| t.token_id == w.created.token_id)
        .unwrap();
    assert!(revoked.revoked_at.is_some());
    let mut plain = AuthServiceClient::new(auth.channel().await);
    let admin_org = plain
        .validate_token(ValidateTokenRequest {
            access_token: auth.seed.admin_token.clone(),
            agent_id: None,
        })
        .await
        .unwrap()
        .into_inner()
        .org_id;
    assert_eq!(admin_org, org);
}

#[tokio::test]
async fn a_token_without_token_create_is_refused_at_create_token() {
    let auth = Auth::start().await;
    let error = grpc_admin::run(auth.channel().await, &auth.seed.chat_token, 2)
        .await
        .unwrap_err();
    match error {
        AdminError::Call { step, status } => {
            assert_eq!(step, "CreateToken");
            assert_eq!(status.code(), Code::PermissionDenied);
        }
        other => panic!("expected a refused CreateToken, got {other:?}"),
    }
}

#[tokio::test]
async fn an_unknown_admin_token_stops_before_any_admin_call() {
    let auth = Auth::start().await;
    let unknown = format!(
        "svc_pat_{}_{}",
        uuid::Uuid::new_v4(),
        uuid::Uuid::new_v4().simple()
    );
    let error = grpc_admin::run(auth.channel().await, &unknown, 2)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, AdminError::Call { step, status }
            if step.starts_with("ValidateToken") && status.code() == Code::Unauthenticated),
        "{error:?}"
    );
    // Nothing was created: the org still holds the two seeded tokens.
    let mut admin = auth.admin().await;
    let pages = grpc_admin::list_all(&mut admin, 50).await.unwrap();
    assert_eq!(pages.iter().map(Vec::len).sum::<usize>(), 2);
}

#[tokio::test]
async fn an_unreachable_auth_service_is_a_connect_error() {
    let addr = format!("127.0.0.1:{}", svc_testkit::free_port());
    let error = grpc_admin::connect(&addr).await.unwrap_err();
    assert!(matches!(error, AdminError::Connect(_)), "{error:?}");
    let error = grpc_admin::connect("http://[::1").await.unwrap_err();
    assert!(matches!(error, AdminError::Address(_)), "{error:?}");
}
