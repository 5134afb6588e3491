//! The gateway's readiness checkers: the auth service over gRPC and Redis, both critical.
//!
//! They run in parallel under svc-tower's budgets (500 ms each, 750 ms overall). Failure
//! messages are fixed phrases: `/ready` is unauthenticated, so it never shows an address,
//! a URL or an error text from a dependency.

use futures_util::future::BoxFuture;
use svc_proto::v1::ValidateTokenRequest;
use svc_proto::v1::auth_service_client::AuthServiceClient;
use svc_runtime::health::{Checker, Readiness};
use svc_tower::store::RedisPool;
use tonic::Code;
use tonic::transport::Channel;

/// A well-formed PAT that names no token: the auth service answers Unauthenticated, which
/// proves it is up without touching any real credential.
pub const PROBE_TOKEN: &str =
    "svc_pat_00000000-0000-0000-0000-000000000000_svcreadinessprobe0000000000000000000000000000";

/// `auth_grpc`: ValidateToken with [`PROBE_TOKEN`]; OK or Unauthenticated count as reachable.
#[derive(Debug, Clone)]
pub struct AuthGrpcChecker {
    client: AuthServiceClient<Channel>,
}

impl AuthGrpcChecker {
    /// A checker sharing an existing channel.
    pub fn from_channel(channel: Channel) -> AuthGrpcChecker {
        AuthGrpcChecker {
            client: AuthServiceClient::new(channel),
        }
    }
}

impl Checker for AuthGrpcChecker {
    fn name(&self) -> &str {
        "auth_grpc"
    }

    fn check(&self) -> BoxFuture<'_, Result<(), String>> {
        let mut client = self.client.clone();
        Box::pin(async move {
            let request = ValidateTokenRequest {
                access_token: PROBE_TOKEN.to_owned(),
                agent_id: None,
            };
            match client.validate_token(request).await {
                Ok(_) => Ok(()),
                Err(status) => match status.code() {
                    Code::Unauthenticated => Ok(()),
                    Code::Unavailable | Code::Unknown => Err("auth service unreachable".to_owned()),
                    Code::DeadlineExceeded => Err("auth service timed out".to_owned()),
                    _ => Err("auth service answered with an error".to_owned()),
                },
            }
        })
    }
}

/// `redis`: PING. Without `REDIS_URL` it always fails: the deployment runs without shared
/// rate limits and idempotency, which SPEC counts as not ready.
#[derive(Debug, Clone)]
pub struct RedisChecker {
    pool: Option<RedisPool>,
}

impl RedisChecker {
    /// A checker on `pool`, or one that always fails when there is none.
    pub fn new(pool: Option<RedisPool>) -> RedisChecker {
        RedisChecker { pool }
    }
}

impl Checker for RedisChecker {
    fn name(&self) -> &str {
        "redis"
    }

    fn check(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            match &self.pool {
                None => Err("REDIS_URL is not configured".to_owned()),
                Some(pool) => pool.ping().await.map_err(|_| "PING failed".to_owned()),
            }
        })
    }
}

/// Both checkers with SPEC's budgets.
pub fn readiness(auth: AuthGrpcChecker, redis: RedisChecker) -> Readiness {
    Readiness::new(vec![Box::new(auth), Box::new(redis)])
}
