//! Verifies that the agent named by `X-SVC-Agent-ID` belongs to the token's org and is
//! active, and records it in the [`OrgContext`](crate::context::OrgContext).
//!
//! ```
//! use std::convert::Infallible;
//! use http::{Request, Response, StatusCode};
//! use svc_tower::agent::{AgentCheckLayer, AgentError};
//! use svc_tower::context::{OrgContext, Permissions};
//! use tower::{Layer, ServiceExt, service_fn};
//! use uuid::Uuid;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let agent = Uuid::now_v7();
//! let validator = move |_org: Uuid, agent_id: &str| {
//!     let known = agent_id == agent.to_string();
//!     async move { if known { Ok(()) } else { Err(AgentError::NotAuthorized) } }
//! };
//! let svc = AgentCheckLayer::new(validator).layer(service_fn(|req: Request<()>| async move {
//!     let agent_id = req.extensions().get::<OrgContext>().unwrap().agent_id.unwrap();
//!     Ok::<_, Infallible>(Response::new(agent_id.to_string()))
//! }));
//!
//! // PatAuth puts the context there in a real stack.
//! let context = OrgContext::new(Uuid::now_v7(), Permissions::CHAT_COMPLETIONS, Uuid::now_v7());
//! let mut request = Request::builder().header("x-svc-agent-id", agent.to_string()).body(()).unwrap();
//! request.extensions_mut().insert(context.clone());
//! let response = svc.clone().oneshot(request).await.unwrap();
//! assert_eq!(response.status(), StatusCode::OK);
//!
//! let mut request = Request::new(());
//! request.extensions_mut().insert(context);
//! let response = svc.oneshot(request).await.unwrap();
//! assert_eq!(response.status(), StatusCode::BAD_REQUEST); // MISSING_AGENT_ID
//! # }
//! ```
//!
//! # What it answers
//!
//! | request | answer |
//! |---|---|
//! | no [`OrgContext`](crate::context::OrgContext) (no PatAuth before it) | 401 `MISSING_TOKEN` |
//! | no `X-SVC-Agent-ID` | 400 `MISSING_AGENT_ID` |
//! | not one UUID, or [`AgentError::InvalidArgument`] | 400 `VALIDATION_ERROR`, field `X-SVC-Agent-ID` `INVALID_FORMAT` |
//! | the token is bound to another agent | 403 `AGENT_NOT_AUTHORIZED` |
//! | [`AgentError::NotAuthorized`] | 403 `AGENT_NOT_AUTHORIZED` |
//! | [`AgentError::Suspended`] | 403 `AGENT_SUSPENDED` |
//! | [`AgentError::Unavailable`] | 503 `AUTH_UNAVAILABLE`, `Retry-After: 1` |
//! | valid | the inner service, with `OrgContext::agent_id` set |
//!
//! The org is the token's, from the OrgContext, never from a header, path or body.
//!
//! # Where it goes
//!
//! Right after PatAuth, before the rate limit and the handler: everything after it can trust
//! `OrgContext::agent_id`.

mod service;
mod validator;

pub use service::{AgentCheck, AgentCheckLayer, AgentIdCheck, X_SVC_AGENT_ID};
pub use validator::{AgentError, AgentValidator};
