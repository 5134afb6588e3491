//! `svc.auth.v1.AuthService`: a thin adapter from proto messages to the [`Verifier`] and the
//! [`Store`].
//!
//! Tenancy is checked here a second time (the store checks it again): the org of every admin
//! call is the admin token's org, never one taken from the request; a reference to another
//! org's agent, user or token is PermissionDenied, never NotFound.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use svc_core::permissions::Permissions;
use svc_proto::v1;
use svc_proto::v1::auth_service_server::AuthService;
use tonic::metadata::MetadataMap;
use tonic::{Code, Request, Response, Status};
use tracing::Instrument;
use uuid::Uuid;

use crate::metrics::AuthMetrics;
use crate::pat::Pat;
use crate::store::{Agent, AgentStatus, AuditAction, AuditEntry, NewToken, Revocation, Store};
use crate::verify::{ValidToken, Verifier};

mod access;
mod agents;
mod audit;
mod budgets;
mod convert;
pub mod direct;
mod issuer;
pub mod reports;
pub mod status;
mod trace;
mod usage;
mod users;

use access::{Op, own_org};
use convert::{
    encode_cursor, from_timestamp, optional_text, page_cursor, parse_id, parse_optional_id,
    requested_limits, timestamp, token_metadata, validate_token_response,
};

pub use agents::MAX_REASON_CHARS;

/// ListTokens page size when the request names none.
pub const DEFAULT_PAGE_SIZE: u32 = 50;
/// Largest ListTokens page; larger requests are clamped.
pub const MAX_PAGE_SIZE: u32 = 500;
/// Longest token name, in characters.
pub const MAX_NAME_CHARS: usize = 256;
/// Longest org, agent or user name, in characters.
pub const MAX_DISPLAY_NAME_CHARS: usize = 128;

const CREATE_TOKEN: Op = Op::act(
    "CreateToken",
    Permissions::TOKEN_CREATE,
    "TOKEN_CREATE",
    AuditAction::TokenCreate,
);
const REVOKE_TOKEN: Op = Op::act(
    "RevokeToken",
    Permissions::TOKEN_REVOKE,
    "TOKEN_REVOKE",
    AuditAction::TokenRevoke,
);
const LIST_TOKENS: Op = Op::read("ListTokens", Permissions::TOKEN_LIST, "TOKEN_LIST");
const GET_USAGE: Op = Op::read("GetUsage", Permissions::USAGE_READ, "USAGE_READ");

/// The AuthService implementation.
pub struct AuthApi<S> {
    verifier: Arc<Verifier<S>>,
    metrics: AuthMetrics,
}

impl<S> std::fmt::Debug for AuthApi<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthApi").finish_non_exhaustive()
    }
}

impl<S: Store> AuthApi<S> {
    /// A service verifying with `verifier` and recording into `metrics`.
    pub fn new(verifier: Arc<Verifier<S>>, metrics: AuthMetrics) -> AuthApi<S> {
        AuthApi { verifier, metrics }
    }

    fn store(&self) -> &S {
        self.verifier.store()
    }

    /// Verifies the `authorization: Bearer <PAT>` metadata and checks the permission `op`
    /// needs; a refused act is recorded in the audit trail.
    async fn authorize(&self, op: &Op, metadata: &MetadataMap) -> Result<ValidToken, Status> {
        let bearer = bearer(metadata)?;
        let caller = self
            .verifier
            .verify(bearer)
            .await
            .map_err(|e| status::verify_error(op.name, e))?;
        if !caller.permissions.contains(op.needed) {
            let refusal = Status::permission_denied(format!(
                "the token lacks the {} permission",
                op.needed_name
            ));
            return Err(self.refused(op, &caller, refusal).await);
        }
        Ok(caller)
    }

    /// Runs the body of an act `caller` may attempt; a PermissionDenied it ends in (another
    /// org's id, permissions beyond the caller's) is recorded as a denied event.
    async fn audited<T>(
        &self,
        op: &Op,
        caller: &ValidToken,
        body: impl Future<Output = Result<T, Status>>,
    ) -> Result<T, Status> {
        match body.await {
            Err(refusal) if refusal.code() == Code::PermissionDenied => {
                Err(self.refused(op, caller, refusal).await)
            }
            other => other,
        }
    }

    /// Records that `caller` was refused `op` (when `op` is an act), and returns the refusal.
    /// A refusal that cannot be recorded is still a refusal: the caller gets it either way.
    async fn refused(&self, op: &Op, caller: &ValidToken, refusal: Status) -> Status {
        if let Some(action) = op.action {
            let entry =
                AuditEntry::denied(caller.token_id, action).detail("reason", refusal.message());
            if let Err(error) = self.store().record_audit(caller.org_id, entry).await {
                tracing::warn!(
                    operation = op.name,
                    error = %error,
                    "a refusal could not be recorded in the audit trail"
                );
            }
        }
        refusal
    }
}

/// The PAT of `authorization: Bearer <PAT>`.
fn bearer(metadata: &MetadataMap) -> Result<&str, Status> {
    let value = metadata
        .get("authorization")
        .ok_or_else(status::missing_token)?;
    let value = value.to_str().map_err(|_| status::invalid_token())?;
    match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => Ok(token.trim()),
        _ => Err(status::invalid_token()),
    }
}

#[tonic::async_trait]
impl<S: Store> AuthService for AuthApi<S> {
    async fn validate_token(
        &self,
        request: Request<v1::ValidateTokenRequest>,
    ) -> Result<Response<v1::ValidateTokenResponse>, Status> {
        svc_runtime::runtime::busy();
        let started = Instant::now();
        let span = trace::span("ValidateToken", request.metadata());
        let bearer = &request.get_ref().access_token;
        // A malformed agent id is not looked up: no verdict, and the caller's ValidateAgent
        // says what is wrong with it.
        let agent =
            (request.get_ref().agent_id.as_deref()).and_then(|agent| Uuid::try_parse(agent).ok());
        let (result, outcome) = async {
            if bearer.is_empty() {
                return ("unauthenticated", Err(status::missing_token()));
            }
            let started = Instant::now();
            match self.verifier.verify_with_agent(bearer, agent).await {
                Ok((token, found)) => {
                    tracing::debug!(
                        token_id = %token.token_id,
                        org_id = %token.org_id,
                        "token validated"
                    );
                    let mut response = validate_token_response(token);
                    if let (Some(agent_id), Some(found)) = (agent, found) {
                        response.agent = Some(self.agent_verdict(agent_id, found, started));
                    }
                    ("ok", Ok(Response::new(response)))
                }
                Err(error) if error.is_rejection() => (
                    "unauthenticated",
                    Err(status::verify_error("ValidateToken", error)),
                ),
                Err(error) => ("error", Err(status::verify_error("ValidateToken", error))),
            }
        }
        .instrument(span)
        .await;
        self.metrics
            .observe_validate_token(result, started.elapsed().as_secs_f64());
        outcome
    }

    async fn validate_agent(
        &self,
        request: Request<v1::ValidateAgentRequest>,
    ) -> Result<Response<v1::ValidateAgentResponse>, Status> {
        let started = Instant::now();
        let span = trace::span("ValidateAgent", request.metadata());
        let (result, outcome) = async {
            let (result, outcome) = self.check_agent(request.get_ref()).await;
            tracing::debug!(result, "agent checked");
            (result, outcome)
        }
        .instrument(span)
        .await;
        self.metrics
            .observe_validate_agent(result, started.elapsed().as_secs_f64());
        outcome.map(Response::new)
    }

    async fn create_token(
        &self,
        request: Request<v1::CreateTokenRequest>,
    ) -> Result<Response<v1::CreateTokenResponse>, Status> {
        let admin = self.authorize(&CREATE_TOKEN, request.metadata()).await?;
        self.audited(
            &CREATE_TOKEN,
            &admin,
            self.mint(&admin, request.into_inner()),
        )
        .await
        .map(Response::new)
    }

    async fn revoke_token(
        &self,
        request: Request<v1::RevokeTokenRequest>,
    ) -> Result<Response<v1::RevokeTokenResponse>, Status> {
        let admin = self.authorize(&REVOKE_TOKEN, request.metadata()).await?;
        self.audited(&REVOKE_TOKEN, &admin, async {
            let req = request.get_ref();
            let token_id = parse_id("token_id", &req.token_id)?;
            let audit =
                AuditEntry::ok(Some(admin.token_id), AuditAction::TokenRevoke).target(token_id);
            let revocation = Revocation {
                token_id,
                keep_issued: req.keep_issued,
                revoker: Some(admin.permissions),
            };
            let revoked = self
                .store()
                .revoke(admin.org_id, revocation, Some(audit))
                .await
                .map_err(|e| status::store_error(REVOKE_TOKEN.name, e))?
                .ok_or_else(|| Status::permission_denied("no such token in the caller's org"))?;
            tracing::info!(
                token_id = %token_id,
                org_id = %admin.org_id,
                revoked_by = %admin.token_id,
                issued_revoked = revoked.issued.len(),
                "token revoked"
            );
            Ok(v1::RevokeTokenResponse {
                token_id: revoked.token.token_id.to_string(),
                revoked_at: revoked.token.revoked_at.map(timestamp),
                issued_revoked: revoked.issued.iter().map(Uuid::to_string).collect(),
            })
        })
        .await
        .map(Response::new)
    }

    async fn list_tokens(
        &self,
        request: Request<v1::ListTokensRequest>,
    ) -> Result<Response<v1::ListTokensResponse>, Status> {
        let admin = self.authorize(&LIST_TOKENS, request.metadata()).await?;
        let req = request.into_inner();
        let page_size = page_size(req.page_size);
        let after = page_cursor(&req.page_token)?;
        // One extra row tells whether another page exists.
        let tokens = self
            .store()
            .list_tokens(admin.org_id, after, page_size + 1)
            .await
            .map_err(|e| status::store_error(LIST_TOKENS.name, e))?;
        let (tokens, next_page_token) =
            next_page(tokens, page_size, |last| encode_cursor(last.cursor()));
        Ok(Response::new(v1::ListTokensResponse {
            tokens: tokens.into_iter().map(token_metadata).collect(),
            next_page_token,
        }))
    }

    async fn get_usage(
        &self,
        request: Request<v1::GetUsageRequest>,
    ) -> Result<Response<v1::GetUsageResponse>, Status> {
        let caller = self.authorize(&GET_USAGE, request.metadata()).await?;
        usage::get_usage(self.store(), &caller, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn create_agent(
        &self,
        request: Request<v1::CreateAgentRequest>,
    ) -> Result<Response<v1::Agent>, Status> {
        let caller = self.authorize(&agents::CREATE, request.metadata()).await?;
        self.audited(&agents::CREATE, &caller, async {
            agents::create(self.store(), &caller, request.into_inner()).await
        })
        .await
        .map(Response::new)
    }

    async fn get_agent(
        &self,
        request: Request<v1::GetAgentRequest>,
    ) -> Result<Response<v1::Agent>, Status> {
        let caller = self.authorize(&agents::GET, request.metadata()).await?;
        agents::get(self.store(), &caller, request.get_ref())
            .await
            .map(Response::new)
    }

    async fn list_agents(
        &self,
        request: Request<v1::ListAgentsRequest>,
    ) -> Result<Response<v1::ListAgentsResponse>, Status> {
        let caller = self.authorize(&agents::LIST, request.metadata()).await?;
        agents::list(self.store(), &caller, request.get_ref())
            .await
            .map(Response::new)
    }

    async fn set_agent_status(
        &self,
        request: Request<v1::SetAgentStatusRequest>,
    ) -> Result<Response<v1::Agent>, Status> {
        let caller = self
            .authorize(&agents::SET_STATUS, request.metadata())
            .await?;
        self.audited(&agents::SET_STATUS, &caller, async {
            agents::set_status(self.store(), &caller, request.into_inner()).await
        })
        .await
        .map(Response::new)
    }

    async fn set_agent_tools(
        &self,
        request: Request<v1::SetAgentToolsRequest>,
    ) -> Result<Response<v1::Agent>, Status> {
        let caller = self
            .authorize(&agents::SET_TOOLS, request.metadata())
            .await?;
        self.audited(&agents::SET_TOOLS, &caller, async {
            agents::set_tools(self.store(), &caller, request.into_inner()).await
        })
        .await
        .map(Response::new)
    }

    async fn create_user(
        &self,
        request: Request<v1::CreateUserRequest>,
    ) -> Result<Response<v1::User>, Status> {
        let caller = self.authorize(&users::CREATE, request.metadata()).await?;
        self.audited(&users::CREATE, &caller, async {
            users::create(self.store(), &caller, request.into_inner()).await
        })
        .await
        .map(Response::new)
    }

    async fn list_users(
        &self,
        request: Request<v1::ListUsersRequest>,
    ) -> Result<Response<v1::ListUsersResponse>, Status> {
        let caller = self.authorize(&users::LIST, request.metadata()).await?;
        users::list(self.store(), &caller, request.get_ref())
            .await
            .map(Response::new)
    }

    async fn list_audit_events(
        &self,
        request: Request<v1::ListAuditEventsRequest>,
    ) -> Result<Response<v1::ListAuditEventsResponse>, Status> {
        let caller = self.authorize(&audit::LIST, request.metadata()).await?;
        audit::list(self.store(), &caller, request.get_ref())
            .await
            .map(Response::new)
    }

    async fn set_budget(
        &self,
        request: Request<v1::SetBudgetRequest>,
    ) -> Result<Response<v1::Budget>, Status> {
        let caller = self.authorize(&budgets::SET, request.metadata()).await?;
        self.audited(&budgets::SET, &caller, async {
            budgets::set(self.store(), &caller, request.into_inner()).await
        })
        .await
        .map(Response::new)
    }

    async fn delete_budget(
        &self,
        request: Request<v1::DeleteBudgetRequest>,
    ) -> Result<Response<v1::DeleteBudgetResponse>, Status> {
        let caller = self.authorize(&budgets::DELETE, request.metadata()).await?;
        self.audited(&budgets::DELETE, &caller, async {
            budgets::delete(self.store(), &caller, request.get_ref()).await
        })
        .await
        .map(Response::new)
    }

    async fn list_budgets(
        &self,
        request: Request<v1::ListBudgetsRequest>,
    ) -> Result<Response<v1::ListBudgetsResponse>, Status> {
        let caller = self.authorize(&budgets::LIST, request.metadata()).await?;
        budgets::list(self.store(), &caller)
            .await
            .map(Response::new)
    }

    async fn get_budget_spend(
        &self,
        request: Request<v1::ValidateTokenRequest>,
    ) -> Result<Response<v1::GetBudgetSpendResponse>, Status> {
        let span = trace::span("GetBudgetSpend", request.metadata());
        let bearer = &request.get_ref().access_token;
        if bearer.is_empty() {
            return Err(status::missing_token());
        }
        let agent =
            (request.get_ref().agent_id.as_deref()).and_then(|agent| Uuid::try_parse(agent).ok());
        async {
            // The token is the credential, as for ValidateToken; the budgets are the ones
            // ValidateToken answers for the same request.
            let (token, _) = self
                .verifier
                .verify_with_agent(bearer, agent)
                .await
                .map_err(|error| status::verify_error("GetBudgetSpend", error))?;
            budgets::spend(self.store(), &token).await
        }
        .instrument(span)
        .await
        .map(Response::new)
    }
}

/// A requested page size: the default for 0 or less, at most [`MAX_PAGE_SIZE`].
fn page_size(requested: i32) -> u32 {
    match u32::try_from(requested) {
        Ok(0) | Err(_) => DEFAULT_PAGE_SIZE,
        Ok(n) => n.min(MAX_PAGE_SIZE),
    }
}

/// Cuts rows fetched with one extra to `size`, and the cursor of the next page when the
/// extra row was there.
fn next_page<T>(mut rows: Vec<T>, size: u32, cursor: impl Fn(&T) -> String) -> (Vec<T>, String) {
    if rows.len() <= size as usize {
        return (rows, String::new());
    }
    rows.truncate(size as usize);
    let next = rows.last().map(cursor).unwrap_or_default();
    (rows, next)
}

impl<S: Store> AuthApi<S> {
    /// CreateToken's work once the caller holds TOKEN_CREATE: the request checked against the
    /// caller's own scope, the secret hashed, the token and its audit event stored together.
    async fn mint(
        &self,
        admin: &ValidToken,
        req: v1::CreateTokenRequest,
    ) -> Result<v1::CreateTokenResponse, Status> {
        let org_id = own_org(admin, &req.org_id)?;
        let user_id = parse_optional_id("user_id", req.user_id.as_deref())?;
        let agent_id = parse_optional_id("agent_id", req.agent_id.as_deref())?;
        let expires_at =
            match req.expires_at {
                None => None,
                Some(at) => Some(from_timestamp(&at).ok_or_else(|| {
                    Status::invalid_argument("expires_at is not a valid timestamp")
                })?),
            };
        if expires_at.is_some_and(|at| at <= Utc::now()) {
            return Err(Status::invalid_argument("expires_at is in the past"));
        }
        let name = optional_text("name", req.name, MAX_NAME_CHARS)?;
        if req.permissions & !admin.permissions.bits() != 0 {
            return Err(Status::permission_denied(
                "the requested permissions exceed the caller's",
            ));
        }
        let limits = requested_limits(req.rpm_limit, req.tpm_limit)?;
        let scope = issuer::within_issuer(admin, agent_id, expires_at, limits)?;

        let pat = Pat::generate(Uuid::new_v4());
        let secret_hash = self
            .verifier
            .hasher()
            .hash(pat.secret())
            .await
            .map_err(|e| status::hash_error(CREATE_TOKEN.name, e))?;
        let mut audit = AuditEntry::ok(Some(admin.token_id), AuditAction::TokenCreate)
            .target(pat.token_id())
            .detail("permissions", req.permissions.to_string());
        if let Some(agent_id) = scope.agent_id {
            audit = audit.detail("agent_id", agent_id.to_string());
        }
        if let Some(user_id) = user_id {
            audit = audit.detail("user_id", user_id.to_string());
        }
        let created = self
            .store()
            .create_token(
                org_id,
                NewToken {
                    token_id: pat.token_id(),
                    user_id,
                    agent_id: scope.agent_id,
                    permissions: Permissions::from_bits(req.permissions),
                    name,
                    secret_hash,
                    expires_at: scope.expires_at,
                    issuer_token_id: Some(admin.token_id),
                    limits: scope.limits,
                },
                Some(audit),
            )
            .await
            .map_err(|e| status::store_error(CREATE_TOKEN.name, e))?;
        tracing::info!(
            token_id = %created.token_id,
            org_id = %org_id,
            issued_by = %admin.token_id,
            "token created"
        );
        Ok(v1::CreateTokenResponse {
            token_id: created.token_id.to_string(),
            token: pat.expose(),
            created_at: Some(timestamp(created.created_at)),
            expires_at: created.expires_at.map(timestamp),
            permissions: created.permissions.bits(),
            agent_id: created.agent_id.map(|id| id.to_string()),
            rpm_limit: created.limits.rpm,
            tpm_limit: created.limits.tpm,
        })
    }

    /// ValidateAgent's answer about `agent_id` in the token's org, folded into ValidateToken;
    /// counted as an agent validation too.
    fn agent_verdict(
        &self,
        agent_id: Uuid,
        found: Option<Agent>,
        started: Instant,
    ) -> v1::AgentVerdict {
        let result = match &found {
            Some(agent) if agent.status == AgentStatus::Active => "ok",
            _ => "denied",
        };
        self.metrics
            .observe_validate_agent(result, started.elapsed().as_secs_f64());
        match found {
            Some(agent) => v1::AgentVerdict {
                agent_id: agent_id.to_string(),
                found: true,
                status: agent.status.as_str().to_owned(),
                tools: agent.tools,
            },
            None => v1::AgentVerdict {
                agent_id: agent_id.to_string(),
                ..v1::AgentVerdict::default()
            },
        }
    }

    async fn check_agent(
        &self,
        req: &v1::ValidateAgentRequest,
    ) -> (&'static str, Result<v1::ValidateAgentResponse, Status>) {
        let ids = parse_id("agent_id", &req.agent_id)
            .and_then(|agent_id| Ok((agent_id, parse_id("org_id", &req.org_id)?)));
        let (agent_id, org_id) = match ids {
            Ok(ids) => ids,
            Err(status) => return ("invalid", Err(status)),
        };
        match self.store().agent(org_id, agent_id).await {
            Ok(Some(agent)) if agent.status == AgentStatus::Active => (
                "ok",
                Ok(v1::ValidateAgentResponse {
                    agent_id: agent.agent_id.to_string(),
                    org_id: agent.org_id.to_string(),
                    status: agent.status.as_str().to_owned(),
                }),
            ),
            Ok(Some(_)) => (
                "denied",
                Err(status::agent_denied(
                    status::AGENT_SUSPENDED,
                    "the agent is not active",
                )),
            ),
            Ok(None) => (
                "denied",
                Err(status::agent_denied(
                    status::AGENT_NOT_AUTHORIZED,
                    "the agent is not authorized for this org",
                )),
            ),
            Err(error) => ("error", Err(status::store_error("ValidateAgent", error))),
        }
    }
}
