//! The real thing on loopback: svc-auth-server over a fresh migrated database, the shared
//! Redis under a random key prefix, and a fake upstream. Gateways (one or several replicas)
//! are started on top with [`Stack::gateway`].

use std::net::SocketAddr;

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use svc_auth_server::seed::{self, SeedOptions, SeedOutput};
use svc_auth_server::store::AgentStatus;
use svc_auth_server::store::postgres::PoolSettings;
use svc_auth_server::{RunningServer, Server};
use svc_gateway::Running;
use svc_proto::v1::auth_service_client::AuthServiceClient;
use svc_proto::v1::{
    CreateTokenRequest, GetUsageRequest, GetUsageResponse, RevokeTokenRequest,
    SetAgentStatusRequest, SetAgentToolsRequest, UsageGroupBy,
};
use svc_testkit::{FaultProxy, TestDb};
use uuid::Uuid;

use super::{LIVE_MODEL, PROVIDER_KEY, Script, Upstream, config, start};

pub struct Stack {
    pub db: TestDb,
    pub auth_config: svc_auth_server::Config,
    pub auth: RunningServer,
    /// One org with an agent in each status: active, paused, suspended, archived.
    pub seed: SeedOutput,
    /// Where gateways reach the auth server: through a proxy the test can cut.
    pub auth_proxy: FaultProxy,
    /// Where gateways reach Redis: through a proxy the test can cut.
    pub redis_proxy: FaultProxy,
    pub redis_prefix: String,
    pub upstream: Upstream,
}

impl Stack {
    pub async fn start(script: Script) -> Stack {
        Stack::start_tuned(script, |_| {}).await
    }

    /// [`Stack::start`] with the auth server's configuration adjusted by `tune`.
    pub async fn start_tuned(
        script: Script,
        tune: impl FnOnce(&mut svc_auth_server::Config),
    ) -> Stack {
        let db = TestDb::create().await;
        svc_auth_server::migrate::run(db.url(), &PoolSettings::default())
            .await
            .expect("migrate");
        let mut auth_config = svc_auth_server::Config::local(db.url());
        tune(&mut auth_config);
        let auth = Server::start(auth_config.clone())
            .await
            .expect("auth server starts");
        let seed = seed_org(&auth_config, None).await;
        let auth_proxy = FaultProxy::start(auth.grpc_addr).await;
        let redis_proxy = FaultProxy::start(redis_addr()).await;
        Stack {
            db,
            auth_config,
            auth,
            seed,
            auth_proxy,
            redis_proxy,
            redis_prefix: svc_testkit::redis_prefix(),
            upstream: Upstream::start(script).await,
        }
    }

    /// A gateway replica: live provider on the fake upstream, Redis and the auth server
    /// through their proxies, durable sessions in the test database; `extra` overrides.
    pub async fn gateway(&self, extra: &[(&str, &str)]) -> Running {
        let base = self.upstream.base_url();
        let redis = format!("redis://{}", self.redis_proxy.addr());
        let mut vars: Vec<(&str, &str)> = vec![
            ("SVC_PROVIDER_BASE_URL", &base),
            ("SVC_PROVIDER_API_KEY", PROVIDER_KEY),
            ("SVC_PROVIDER_MODELS", LIVE_MODEL),
            ("SVC_PROVIDER_TIMEOUT", "2s"),
            ("REDIS_URL", &redis),
            ("SVC_REDIS_KEY_PREFIX", &self.redis_prefix),
            ("POSTGRES_DSN", self.db.url()),
        ];
        vars.extend_from_slice(extra);
        start(config(self.auth_proxy.addr(), &vars)).await
    }

    /// [`Stack::gateway`] with the registry as a file: the fake upstream serves
    /// [`LIVE_MODEL`] at `price` (a TOML inline table, or `None` for no price).
    pub async fn gateway_priced(&self, price: Option<&str>, extra: &[(&str, &str)]) -> Running {
        let dir = svc_testkit::TempDir::create();
        let path = dir.path().join("providers.toml");
        let price = price.map(|p| format!("price = {p}\n")).unwrap_or_default();
        let file = format!(
            "[[providers]]\nname = \"upstream\"\nkind = \"openai\"\nbase_url = \"{}\"\n\
             api_key_env = \"TEST_PROVIDER_KEY\"\ntimeout = \"2s\"\n\n\
             [[models]]\nname = \"{LIVE_MODEL}\"\ntargets = [\"upstream\"]\n{price}",
            self.upstream.base_url()
        );
        std::fs::write(&path, file).unwrap();
        let path = path.to_str().unwrap().to_owned();
        let redis = format!("redis://{}", self.redis_proxy.addr());
        let mut vars: Vec<(&str, &str)> = vec![
            ("SVC_PROVIDERS_FILE", &path),
            ("TEST_PROVIDER_KEY", PROVIDER_KEY),
            ("REDIS_URL", &redis),
            ("SVC_REDIS_KEY_PREFIX", &self.redis_prefix),
            ("POSTGRES_DSN", self.db.url()),
        ];
        vars.extend_from_slice(extra);
        // The file is read whole at start: the directory may go once the gateway is built.
        start(config(self.auth_proxy.addr(), &vars)).await
    }

    pub fn agent(&self, status: &str) -> Uuid {
        self.seed
            .agents
            .iter()
            .find(|a| a.status == status)
            .map(|a| a.agent_id)
            .expect("seeded agent")
    }

    /// A chat request through `gateway` as the seeded chat token and active agent.
    pub fn chat(&self, gateway: &Running) -> http::request::Builder {
        self.chat_as(gateway, &self.seed.chat_token)
    }

    /// A chat request through `gateway` as `token` and the seeded active agent.
    pub fn chat_as(&self, gateway: &Running, token: &str) -> http::request::Builder {
        Request::post(format!("{}/v1/chat/completions", gateway.url()))
            .header("authorization", format!("Bearer {token}"))
            .header("x-svc-agent-id", self.agent("active").to_string())
            .header("content-type", "application/json")
    }

    /// A token of the seeded org with exactly `permissions`, minted through CreateToken.
    pub async fn token_with(&self, permissions: i64) -> (Uuid, String) {
        self.token_limited(permissions, None, None).await
    }

    /// A token with `permissions` and its own requests and tokens per minute.
    pub async fn token_limited(
        &self,
        permissions: i64,
        rpm_limit: Option<u32>,
        tpm_limit: Option<u64>,
    ) -> (Uuid, String) {
        let admin = self.seed.admin_token.clone();
        self.mint_as(&admin, permissions, rpm_limit, tpm_limit)
            .await
    }

    /// A token with `permissions` minted by `issuer` (which needs TOKEN_CREATE).
    pub async fn mint_as(
        &self,
        issuer: &str,
        permissions: i64,
        rpm_limit: Option<u32>,
        tpm_limit: Option<u64>,
    ) -> (Uuid, String) {
        let mut client = self.admin_client().await;
        let mut request = tonic::Request::new(CreateTokenRequest {
            org_id: self.seed.org_id.to_string(),
            user_id: None,
            agent_id: None,
            permissions,
            expires_at: None,
            name: Some("gateway test".into()),
            rpm_limit,
            tpm_limit,
        });
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {issuer}").parse().unwrap());
        let created = client
            .create_token(request)
            .await
            .expect("CreateToken")
            .into_inner();
        (created.token_id.parse().unwrap(), created.token)
    }

    pub async fn revoke(&self, token_id: Uuid) {
        let mut client = self.admin_client().await;
        let mut request = tonic::Request::new(RevokeTokenRequest {
            token_id: token_id.to_string(),
            keep_issued: false,
        });
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {}", self.seed.admin_token).parse().unwrap(),
        );
        client.revoke_token(request).await.expect("RevokeToken");
    }

    /// Moves an agent of the seeded org with SetAgentStatus, as the seeded admin.
    pub async fn set_agent_status(&self, agent_id: Uuid, status: &str) {
        let mut client = self.admin_client().await;
        let mut request = tonic::Request::new(SetAgentStatusRequest {
            agent_id: agent_id.to_string(),
            status: status.to_owned(),
            reason: Some("gateway test".into()),
        });
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {}", self.seed.admin_token).parse().unwrap(),
        );
        client
            .set_agent_status(request)
            .await
            .expect("SetAgentStatus");
    }

    /// Replaces the MCP tool grants of an agent of the seeded org, as the seeded admin.
    pub async fn set_agent_tools(&self, agent_id: Uuid, tools: &[&str]) -> svc_proto::v1::Agent {
        let mut client = self.admin_client().await;
        let mut request = tonic::Request::new(SetAgentToolsRequest {
            agent_id: agent_id.to_string(),
            tools: tools.iter().map(|t| (*t).to_owned()).collect(),
        });
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {}", self.seed.admin_token).parse().unwrap(),
        );
        client
            .set_agent_tools(request)
            .await
            .expect("SetAgentTools")
            .into_inner()
    }

    pub async fn admin_client(&self) -> AuthServiceClient<tonic::transport::Channel> {
        let channel =
            tonic::transport::Endpoint::from_shared(format!("http://{}", self.auth.grpc_addr))
                .expect("endpoint")
                .connect()
                .await
                .expect("connect to the auth server");
        AuthServiceClient::new(channel)
    }

    /// Sets a budget of the seeded org as its admin: `scope` org (empty `target_id`), agent
    /// or token, `limit` micro-dollars per `period`.
    pub async fn set_budget(&self, scope: &str, target_id: &str, limit: i64, period: &str) {
        let mut client = self.admin_client().await;
        let mut request = tonic::Request::new(svc_proto::v1::SetBudgetRequest {
            scope: scope.to_owned(),
            target_id: target_id.to_owned(),
            limit_usd_micros: limit,
            period: period.to_owned(),
        });
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {}", self.seed.admin_token).parse().unwrap(),
        );
        client.set_budget(request).await.expect("SetBudget");
    }

    /// The seeded org's budgets with their spend, from ListBudgets.
    pub async fn budgets(&self) -> Vec<svc_proto::v1::Budget> {
        let mut client = self.admin_client().await;
        let mut request = tonic::Request::new(svc_proto::v1::ListBudgetsRequest {});
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {}", self.seed.admin_token).parse().unwrap(),
        );
        client
            .list_budgets(request)
            .await
            .expect("ListBudgets")
            .into_inner()
            .budgets
    }

    /// The seeded admin's GetUsage of `org_id` (empty: its own) grouped by `group_by`, one page.
    pub async fn usage(
        &self,
        org_id: &str,
        group_by: UsageGroupBy,
        page_size: i32,
        page_token: String,
    ) -> Result<GetUsageResponse, tonic::Status> {
        let mut client = self.admin_client().await;
        let mut request = tonic::Request::new(GetUsageRequest {
            org_id: org_id.to_owned(),
            start_time: None,
            end_time: None,
            group_by: group_by as i32,
            page_size,
            page_token,
        });
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {}", self.seed.admin_token).parse().unwrap(),
        );
        client
            .get_usage(request)
            .await
            .map(tonic::Response::into_inner)
    }

    /// A FaultProxy in front of the test database, and the DSN that goes through it.
    pub async fn db_proxy(&self) -> (FaultProxy, String) {
        FaultProxy::for_postgres(self.db.url()).await
    }

    /// A second org (its own tokens and agents) in the same database.
    pub async fn other_org(&self) -> SeedOutput {
        seed_org(&self.auth_config, None).await
    }
}

async fn seed_org(config: &svc_auth_server::Config, org_id: Option<Uuid>) -> SeedOutput {
    seed::run_with_config(
        config,
        &SeedOptions {
            org_id,
            agent_statuses: AgentStatus::ALL.to_vec(),
        },
    )
    .await
    .expect("seed")
}

fn redis_addr() -> SocketAddr {
    let url = svc_testkit::redis_url();
    let host_port = url
        .trim_start_matches("redis://")
        .split('/')
        .next()
        .unwrap_or("127.0.0.1:6379")
        .rsplit('@')
        .next()
        .unwrap_or("127.0.0.1:6379")
        .to_owned();
    std::net::ToSocketAddrs::to_socket_addrs(&host_port)
        .ok()
        .and_then(|mut addrs| addrs.next())
        .expect("the test Redis address resolves")
}

pub fn body(body: &serde_json::Value) -> Full<Bytes> {
    Full::new(Bytes::from(body.to_string()))
}
