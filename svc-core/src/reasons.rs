//! The `google.rpc.ErrorInfo` the identity plane attaches to a refusal, which its clients
//! read to tell one refusal from another of the same gRPC code.

/// The `domain` of every ErrorInfo the identity plane sends.
pub const ERROR_DOMAIN: &str = "svc.auth.v1";
/// A PermissionDenied agent check: the agent is unknown or belongs to another org.
pub const AGENT_NOT_AUTHORIZED: &str = "AGENT_NOT_AUTHORIZED";
/// A PermissionDenied agent check: the agent is paused, suspended or archived.
pub const AGENT_SUSPENDED: &str = "AGENT_SUSPENDED";
/// An Unavailable ValidateToken that the token's own org earned: it holds its whole share of
/// the secrets being verified.
pub const COLD_SHARE_SPENT: &str = "COLD_SHARE_SPENT";
