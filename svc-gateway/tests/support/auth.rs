//! A loopback `svc.auth.v1.AuthService` with one org, its tokens and its agents, answering as
//! the real server does. The end-to-end suite runs the real auth server instead.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use svc_proto::v1::auth_service_server::{AuthService, AuthServiceServer};
use svc_proto::v1::{
    CreateTokenRequest, CreateTokenResponse, ListTokensRequest, ListTokensResponse,
    RevokeTokenRequest, RevokeTokenResponse, ValidateAgentRequest, ValidateAgentResponse,
    ValidateTokenRequest, ValidateTokenResponse,
};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};
use uuid::Uuid;

/// One org: a chat token, a token without permissions, an active and a suspended agent.
#[derive(Clone, Debug)]
pub struct World {
    pub org_id: Uuid,
    pub chat_token: String,
    pub chat_token_id: Uuid,
    pub bare_token: String,
    pub agent_id: Uuid,
    pub suspended_agent_id: Uuid,
    /// ValidateAgent answers Unavailable for this one, as when the store is down.
    pub unavailable_agent_id: Uuid,
    /// ValidateToken answers Internal for this one.
    pub failing_token: String,
}

impl World {
    pub fn random() -> World {
        let token = || format!("svc_pat_{}_{}", Uuid::new_v4(), Uuid::new_v4().simple());
        World {
            org_id: Uuid::new_v4(),
            chat_token: token(),
            chat_token_id: Uuid::new_v4(),
            bare_token: token(),
            agent_id: Uuid::new_v4(),
            suspended_agent_id: Uuid::new_v4(),
            unavailable_agent_id: Uuid::new_v4(),
            failing_token: token(),
        }
    }
}

/// The method and `traceparent` metadata of each validation call, in arrival order.
pub type Calls = Arc<Mutex<Vec<(&'static str, Option<String>)>>>;

#[derive(Clone)]
struct FakeAuth {
    world: Arc<World>,
    tokens: Arc<HashMap<String, (Uuid, i64)>>,
    calls: Calls,
}

impl FakeAuth {
    fn record<T>(&self, method: &'static str, request: &tonic::Request<T>) {
        let traceparent = request
            .metadata()
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        self.calls.lock().unwrap().push((method, traceparent));
    }
}

#[tonic::async_trait]
impl AuthService for FakeAuth {
    async fn validate_token(
        &self,
        request: tonic::Request<ValidateTokenRequest>,
    ) -> Result<tonic::Response<ValidateTokenResponse>, Status> {
        self.record("ValidateToken", &request);
        if request.get_ref().access_token == self.world.failing_token {
            return Err(Status::internal("store failure"));
        }
        let Some((token_id, permissions)) = self.tokens.get(&request.get_ref().access_token) else {
            return Err(Status::unauthenticated("invalid token"));
        };
        Ok(tonic::Response::new(ValidateTokenResponse {
            org_id: self.world.org_id.to_string(),
            permissions: *permissions,
            agent_id: None,
            user_id: None,
            token_id: token_id.to_string(),
            expires_at: None,
        }))
    }

    async fn validate_agent(
        &self,
        request: tonic::Request<ValidateAgentRequest>,
    ) -> Result<tonic::Response<ValidateAgentResponse>, Status> {
        self.record("ValidateAgent", &request);
        let message = request.into_inner();
        let same_org = message.org_id == self.world.org_id.to_string();
        let reason = if !same_org {
            "AGENT_NOT_AUTHORIZED"
        } else if message.agent_id == self.world.agent_id.to_string() {
            return Ok(tonic::Response::new(ValidateAgentResponse {
                agent_id: message.agent_id,
                org_id: message.org_id,
                status: "active".to_owned(),
            }));
        } else if message.agent_id == self.world.unavailable_agent_id.to_string() {
            return Err(Status::unavailable("store down"));
        } else if message.agent_id == self.world.suspended_agent_id.to_string() {
            "AGENT_SUSPENDED"
        } else {
            "AGENT_NOT_AUTHORIZED"
        };
        Err(Status::with_error_details(
            Code::PermissionDenied,
            "agent refused",
            ErrorDetails::with_error_info(reason, "svc.auth.v1", HashMap::new()),
        ))
    }

    async fn create_token(
        &self,
        _: tonic::Request<CreateTokenRequest>,
    ) -> Result<tonic::Response<CreateTokenResponse>, Status> {
        Err(Status::unimplemented("not served here"))
    }

    async fn revoke_token(
        &self,
        _: tonic::Request<RevokeTokenRequest>,
    ) -> Result<tonic::Response<RevokeTokenResponse>, Status> {
        Err(Status::unimplemented("not served here"))
    }

    async fn list_tokens(
        &self,
        _: tonic::Request<ListTokensRequest>,
    ) -> Result<tonic::Response<ListTokensResponse>, Status> {
        Err(Status::unimplemented("not served here"))
    }
}

/// Serves the world on 127.0.0.1 until the test ends.
pub async fn start(world: &World) -> SocketAddr {
    start_recording(world).await.0
}

/// Like [`start`], also returning the validation calls as they arrive.
pub async fn start_recording(world: &World) -> (SocketAddr, Calls) {
    let tokens = HashMap::from([
        (world.chat_token.clone(), (world.chat_token_id, 1_i64)),
        (world.bare_token.clone(), (Uuid::new_v4(), 0_i64)),
    ]);
    let calls = Calls::default();
    let service = FakeAuth {
        world: Arc::new(world.clone()),
        tokens: Arc::new(tokens),
        calls: calls.clone(),
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(AuthServiceServer::new(service))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    (addr, calls)
}
