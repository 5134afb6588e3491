//! The scripted `AuthService` itself.

use std::collections::HashMap;

use svc_proto::v1;
use svc_proto::v1::auth_service_server::AuthService;
use svc_proto::v1::{
    CreateTokenRequest, CreateTokenResponse, GetUsageRequest, GetUsageResponse, ListTokensRequest,
    ListTokensResponse, RevokeTokenRequest, RevokeTokenResponse, ValidateAgentRequest,
    ValidateAgentResponse, ValidateTokenRequest, ValidateTokenResponse,
};
use tonic::{Code, Request, Response, Status};
use tonic_types::{ErrorDetails, StatusExt};
use uuid::Uuid;

use super::script::{AGENT_NOT_AUTHORIZED, AgentAnswer, Grant, TokenAnswer};
use super::{Call, Method, Recorder};

/// Says nothing about why, as the real server's messages say nothing a client could use.
const FAILURE_MESSAGE: &str = "scripted failure";

pub(super) struct Scripted {
    pub(super) org_id: Uuid,
    pub(super) tokens: HashMap<String, TokenAnswer>,
    pub(super) agents: HashMap<String, AgentAnswer>,
    pub(super) recorder: Recorder,
}

impl Scripted {
    fn granted(&self, grant: &Grant) -> Response<ValidateTokenResponse> {
        Response::new(ValidateTokenResponse {
            org_id: self.org_id.to_string(),
            permissions: grant.permissions,
            agent_id: grant.agent_id.map(|id| id.to_string()),
            user_id: grant.user_id.map(|id| id.to_string()),
            token_id: grant.token_id.to_string(),
            expires_at: None,
            agent: None,
            rpm_limit: None,
            tpm_limit: None,
            budgets: Vec::new(),
        })
    }

    /// The answer for `agent_id`, if it is one of this org's agents.
    fn agent(&self, message: &ValidateAgentRequest) -> Option<&AgentAnswer> {
        let same_org = Uuid::parse_str(&message.org_id).is_ok_and(|org| org == self.org_id);
        same_org
            .then(|| self.agents.get(&message.agent_id))
            .flatten()
    }

    /// Admin calls are recorded, then refused: no test of the fake's callers needs them.
    fn unserved<T>(&self, method: Method, request: &Request<T>) -> Status {
        self.recorder.record(Call::new(method, request.metadata()));
        Status::unimplemented("not served by the fake")
    }
}

fn denied(reason: &str) -> Status {
    refused(Code::PermissionDenied, reason)
}

fn refused(code: Code, reason: &str) -> Status {
    Status::with_error_details(
        code,
        "refused",
        ErrorDetails::with_error_info(reason, "svc.auth.v1", HashMap::new()),
    )
}

fn active(message: ValidateAgentRequest) -> Response<ValidateAgentResponse> {
    Response::new(ValidateAgentResponse {
        agent_id: message.agent_id,
        org_id: message.org_id,
        status: "active".to_owned(),
    })
}

#[tonic::async_trait]
impl AuthService for Scripted {
    async fn validate_token(
        &self,
        request: Request<ValidateTokenRequest>,
    ) -> Result<Response<ValidateTokenResponse>, Status> {
        self.recorder
            .record(Call::new(Method::ValidateToken, request.metadata()));
        match self.tokens.get(&request.get_ref().access_token) {
            None => Err(Status::unauthenticated("invalid token")),
            Some(TokenAnswer::Valid(grant)) => Ok(self.granted(grant)),
            Some(TokenAnswer::Slow(delay)) => {
                tokio::time::sleep(*delay).await;
                Ok(self.granted(&Grant::chat()))
            }
            Some(TokenAnswer::Fail(code)) => Err(Status::new(*code, FAILURE_MESSAGE)),
            Some(TokenAnswer::Refused(code, reason)) => Err(refused(*code, reason)),
        }
    }

    async fn validate_agent(
        &self,
        request: Request<ValidateAgentRequest>,
    ) -> Result<Response<ValidateAgentResponse>, Status> {
        let mut call = Call::new(Method::ValidateAgent, request.metadata());
        call.org_id = Some(request.get_ref().org_id.clone());
        call.agent_id = Some(request.get_ref().agent_id.clone());
        self.recorder.record(call);
        let message = request.into_inner();
        match self.agent(&message) {
            None => Err(denied(AGENT_NOT_AUTHORIZED)),
            Some(AgentAnswer::Active) => Ok(active(message)),
            Some(AgentAnswer::Slow(delay)) => {
                tokio::time::sleep(*delay).await;
                Ok(active(message))
            }
            Some(AgentAnswer::Denied(reason)) => Err(denied(reason)),
            Some(AgentAnswer::Fail(code)) => Err(Status::new(*code, FAILURE_MESSAGE)),
        }
    }

    async fn create_token(
        &self,
        request: Request<CreateTokenRequest>,
    ) -> Result<Response<CreateTokenResponse>, Status> {
        Err(self.unserved(Method::CreateToken, &request))
    }

    async fn revoke_token(
        &self,
        request: Request<RevokeTokenRequest>,
    ) -> Result<Response<RevokeTokenResponse>, Status> {
        Err(self.unserved(Method::RevokeToken, &request))
    }

    async fn list_tokens(
        &self,
        request: Request<ListTokensRequest>,
    ) -> Result<Response<ListTokensResponse>, Status> {
        Err(self.unserved(Method::ListTokens, &request))
    }

    async fn get_usage(
        &self,
        request: Request<GetUsageRequest>,
    ) -> Result<Response<GetUsageResponse>, Status> {
        Err(self.unserved(Method::GetUsage, &request))
    }

    async fn create_agent(
        &self,
        request: Request<v1::CreateAgentRequest>,
    ) -> Result<Response<v1::Agent>, Status> {
        Err(self.unserved(Method::CreateAgent, &request))
    }

    async fn get_agent(
        &self,
        request: Request<v1::GetAgentRequest>,
    ) -> Result<Response<v1::Agent>, Status> {
        Err(self.unserved(Method::GetAgent, &request))
    }

    async fn list_agents(
        &self,
        request: Request<v1::ListAgentsRequest>,
    ) -> Result<Response<v1::ListAgentsResponse>, Status> {
        Err(self.unserved(Method::ListAgents, &request))
    }

    async fn set_agent_status(
        &self,
        request: Request<v1::SetAgentStatusRequest>,
    ) -> Result<Response<v1::Agent>, Status> {
        Err(self.unserved(Method::SetAgentStatus, &request))
    }

    async fn set_agent_tools(
        &self,
        request: Request<v1::SetAgentToolsRequest>,
    ) -> Result<Response<v1::Agent>, Status> {
        Err(self.unserved(Method::SetAgentTools, &request))
    }

    async fn create_user(
        &self,
        request: Request<v1::CreateUserRequest>,
    ) -> Result<Response<v1::User>, Status> {
        Err(self.unserved(Method::CreateUser, &request))
    }

    async fn list_users(
        &self,
        request: Request<v1::ListUsersRequest>,
    ) -> Result<Response<v1::ListUsersResponse>, Status> {
        Err(self.unserved(Method::ListUsers, &request))
    }

    async fn list_audit_events(
        &self,
        request: Request<v1::ListAuditEventsRequest>,
    ) -> Result<Response<v1::ListAuditEventsResponse>, Status> {
        Err(self.unserved(Method::ListAuditEvents, &request))
    }

    async fn set_budget(
        &self,
        request: Request<v1::SetBudgetRequest>,
    ) -> Result<Response<v1::Budget>, Status> {
        Err(self.unserved(Method::SetBudget, &request))
    }

    async fn delete_budget(
        &self,
        request: Request<v1::DeleteBudgetRequest>,
    ) -> Result<Response<v1::DeleteBudgetResponse>, Status> {
        Err(self.unserved(Method::DeleteBudget, &request))
    }

    async fn list_budgets(
        &self,
        request: Request<v1::ListBudgetsRequest>,
    ) -> Result<Response<v1::ListBudgetsResponse>, Status> {
        Err(self.unserved(Method::ListBudgets, &request))
    }

    async fn get_budget_spend(
        &self,
        request: Request<ValidateTokenRequest>,
    ) -> Result<Response<v1::GetBudgetSpendResponse>, Status> {
        Err(self.unserved(Method::GetBudgetSpend, &request))
    }
}
