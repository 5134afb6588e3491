//! [`GrpcAuthClient`]: the [`TokenValidator`] and [`AgentValidator`] that ask
//! `svc.auth.v1.AuthService` over one shared tonic channel, and ValidateToken over a connection
//! of its own when the service is one address.

pub mod coalesce;
mod direct;

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::FutureExt;
use http::HeaderValue;

use svc_proto::v1::auth_service_client::AuthServiceClient;
use svc_proto::v1::{self, ValidateAgentRequest, ValidateTokenRequest, ValidateTokenResponse};
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};
use tonic_types::StatusExt;
use uuid::Uuid;

use crate::agent::{AgentError, AgentValidator};
use crate::auth::{TokenError, TokenValidator};
use crate::context::{
    AgentStanding, AgentVerdict, Budget, BudgetPeriod, BudgetTarget, OrgContext, Permissions,
    TokenLimits,
};
use crate::trace_context::{self, TRACEPARENT};

/// The default deadline of each call.
pub(crate) const DEFAULT_VALIDATE_TIMEOUT: Duration = Duration::from_millis(50);

/// The default TCP connect timeout of the channel.
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// How often the channel pings an HTTP/2 connection, idle or not: a peer that vanished
/// without a reset is noticed within this plus [`KEEPALIVE_TIMEOUT`], not when TCP gives up.
pub(crate) const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);

/// How long a keepalive ping may go unanswered before the connection is dropped.
pub(crate) const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(5);

/// TCP keepalive on the channel's socket, for the middleboxes that drop idle flows.
pub(crate) const TCP_KEEPALIVE: Duration = Duration::from_secs(30);

use svc_core::reasons::{
    AGENT_SUSPENDED as REASON_AGENT_SUSPENDED, COLD_SHARE_SPENT as REASON_COLD_SHARE_SPENT,
};

/// The address of the auth service could not be used.
#[derive(Debug, thiserror::Error)]
pub enum GrpcClientError {
    /// Not `host:port` or `http(s)://host:port`.
    #[error("invalid auth service address: {0}")]
    InvalidAddress(String),
    /// The TLS material was refused.
    #[error("invalid TLS configuration for the auth service client")]
    Tls(#[source] tonic::transport::Error),
    /// The TLS material was refused for ValidateToken's own connection.
    #[error("invalid TLS configuration for the auth service client: {0}")]
    TokenTls(&'static str),
}

/// A client of `svc.auth.v1.AuthService`, cheap to clone: every clone shares one channel (and
/// ValidateToken's connection, when it has one).
///
/// The channel connects lazily (the first call pays the connect) and reconnects by itself;
/// TCP_NODELAY is on, so a call does not wait on the server's delayed ACK. Each call carries a
/// deadline (50 ms unless set with
/// [`validate_timeout`](GrpcAuthClient::validate_timeout)), sent to the server as
/// `grpc-timeout` and enforced locally as well.
///
/// Mapping, ValidateToken: OK is the [`OrgContext`]; Unauthenticated is
/// [`TokenError::Invalid`]; DeadlineExceeded or the local deadline is
/// [`TokenError::Timeout`]; Unavailable with the `ErrorInfo` reason `COLD_SHARE_SPENT` is
/// [`TokenError::Throttled`]; another Unavailable or transport failure is
/// [`TokenError::Unavailable`]; anything else, or an OK carrying malformed ids, is
/// [`TokenError::Internal`]. ValidateAgent: PermissionDenied is [`AgentError::Suspended`] when
/// its `ErrorInfo` reason is `AGENT_SUSPENDED`, else [`AgentError::NotAuthorized`] (so is
/// NotFound); InvalidArgument is [`AgentError::InvalidArgument`]; everything else, deadline
/// included, is [`AgentError::Unavailable`].
///
/// Trace context: inside [`trace_context::scope`] (PatAuth and AgentCheck run their validators
/// there with the request's [`TraceId`](crate::request_id::TraceId)), each call carries W3C
/// `traceparent` metadata with that trace id, a fresh parent id and the sampled flag, so the
/// auth service's spans and logs join the trace the client sees in `X-Trace-ID`. Inside
/// [`trace_context::scope_parent`] (the request carried a tracer's
/// [`TraceParent`](trace_context::TraceParent) extension) each call carries that parent as is,
/// its sampling decision included.
///
/// Build it inside a Tokio runtime (the channel spawns its worker there).
#[derive(Debug, Clone)]
pub struct GrpcAuthClient {
    client: AuthServiceClient<Channel>,
    /// ValidateToken's own connection, when set.
    direct: Option<direct::DirectCalls>,
    timeout: Duration,
}

impl GrpcAuthClient {
    /// A plaintext client of `addr` (`host:port` or
    /// `http(s)://host:port`), not yet connected. When `addr` is an IP address and port,
    /// ValidateToken goes over a connection of its own (see
    /// [`with_token_connection`](GrpcAuthClient::with_token_connection)).
    pub fn connect_lazy(addr: &str) -> Result<GrpcAuthClient, GrpcClientError> {
        let client = GrpcAuthClient::from_channel(GrpcAuthClient::endpoint(addr)?.connect_lazy());
        Ok(match socket_addr(addr, "http://") {
            Some(socket) => client.with_token_connection(socket),
            None => client,
        })
    }

    /// A mutual-TLS client of `addr`, trusting `ca_pem` and presenting `identity` (certificate
    /// and key, PEM) when given.
    ///
    /// `addr` is `https://host:port`, or `host:port` meaning the same; `http://` is refused
    /// with [`GrpcClientError::InvalidAddress`], because tonic would connect in plaintext and
    /// leave the TLS settings unused. The server certificate must name `host`. When `host` is
    /// an IP address, ValidateToken goes over a TLS connection of its own (see
    /// [`with_token_connection_tls`](GrpcAuthClient::with_token_connection_tls)).
    #[cfg(feature = "grpc-tls")]
    pub fn connect_lazy_tls(
        addr: &str,
        ca_pem: &[u8],
        identity: Option<(&[u8], &[u8])>,
    ) -> Result<GrpcAuthClient, GrpcClientError> {
        let client = GrpcAuthClient::from_channel(
            GrpcAuthClient::tls_endpoint(addr, ca_pem, identity)?.connect_lazy(),
        );
        match socket_addr(addr, "https://") {
            Some(socket) => {
                let name = socket.ip().to_string();
                client.with_token_connection_tls(socket, &name, ca_pem, identity)
            }
            None => Ok(client),
        }
    }

    /// The endpoint [`connect_lazy_tls`](GrpcAuthClient::connect_lazy_tls) uses:
    /// [`endpoint`](GrpcAuthClient::endpoint)'s settings, over TLS.
    #[cfg(feature = "grpc-tls")]
    pub fn tls_endpoint(
        addr: &str,
        ca_pem: &[u8],
        identity: Option<(&[u8], &[u8])>,
    ) -> Result<Endpoint, GrpcClientError> {
        use tonic::transport::{Certificate, ClientTlsConfig, Identity};

        let addr = addr.trim();
        let addr = if addr.contains("://") {
            addr.to_owned()
        } else {
            format!("https://{addr}")
        };
        if !addr.starts_with("https://") {
            return Err(GrpcClientError::InvalidAddress(addr));
        }
        let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca_pem));
        if let Some((cert, key)) = identity {
            tls = tls.identity(Identity::from_pem(cert, key));
        }
        GrpcAuthClient::endpoint(&addr)?
            .tls_config(tls)
            .map_err(GrpcClientError::Tls)
    }

    /// The endpoint [`connect_lazy`](GrpcAuthClient::connect_lazy) uses: TCP_NODELAY,
    /// a 1 s connect timeout, HTTP/2 keepalive pings every 10 s (idle too, 5 s to answer) and
    /// TCP keepalive after 30 s. Adjust it and hand the channel to
    /// [`from_channel`](GrpcAuthClient::from_channel) for anything else.
    pub fn endpoint(addr: &str) -> Result<Endpoint, GrpcClientError> {
        let addr = addr.trim();
        let uri = if addr.contains("://") {
            addr.to_owned()
        } else {
            format!("http://{addr}")
        };
        let endpoint = Endpoint::from_shared(uri)
            .map_err(|_| GrpcClientError::InvalidAddress(addr.to_owned()))?;
        let uri = endpoint.uri();
        let scheme_ok = matches!(uri.scheme_str(), Some("http" | "https"));
        if !scheme_ok || uri.host().is_none_or(str::is_empty) || uri.port_u16().is_none() {
            return Err(GrpcClientError::InvalidAddress(addr.to_owned()));
        }
        Ok(endpoint
            .tcp_nodelay(true)
            .connect_timeout(DEFAULT_CONNECT_TIMEOUT)
            .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT)
            .keep_alive_while_idle(true)
            .tcp_keepalive(Some(TCP_KEEPALIVE)))
    }

    /// A client over an existing channel.
    pub fn from_channel(channel: Channel) -> GrpcAuthClient {
        GrpcAuthClient {
            client: AuthServiceClient::new(channel),
            direct: None,
            timeout: DEFAULT_VALIDATE_TIMEOUT,
        }
    }

    /// ValidateToken, the call every protected request makes, goes over an HTTP/2
    /// connection of its own to `addr`, driven by `h2` without tonic's channel: about 20,000
    /// instructions a call less. It keeps the channel's settings (TCP_NODELAY,
    /// the connect timeout, HTTP/2 and TCP keepalive) and dials anew when the connection is
    /// gone. The other calls stay on the channel. Over TLS, see
    /// `with_token_connection_tls`; for an auth service at several addresses, leave it unset.
    pub fn with_token_connection(mut self, addr: SocketAddr) -> GrpcAuthClient {
        self.direct = Some(direct::DirectCalls::new(addr, None));
        self
    }

    /// [`with_token_connection`](GrpcAuthClient::with_token_connection) over TLS: trusting
    /// `ca_pem`, presenting `identity` (certificate and key, PEM) when given, and expecting a
    /// certificate that names `server_name` (the address itself, or the name it was reached by).
    #[cfg(feature = "grpc-tls")]
    pub fn with_token_connection_tls(
        mut self,
        addr: SocketAddr,
        server_name: &str,
        ca_pem: &[u8],
        identity: Option<(&[u8], &[u8])>,
    ) -> Result<GrpcAuthClient, GrpcClientError> {
        let tls = direct::TokenTls::new(server_name, ca_pem, identity)
            .map_err(GrpcClientError::TokenTls)?;
        self.direct = Some(direct::DirectCalls::new(addr, Some(tls)));
        Ok(self)
    }

    /// Whether ValidateToken has a connection of its own.
    pub fn has_token_connection(&self) -> bool {
        self.direct.is_some()
    }

    /// Sets the deadline of each ValidateToken and ValidateAgent call.
    pub fn validate_timeout(mut self, timeout: Duration) -> GrpcAuthClient {
        self.timeout = timeout;
        self
    }

    /// The deadline of each call.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Runs one call under the deadline; `Err(None)` is the local deadline.
    ///
    /// A combinator, not an `async fn`: an `async fn` would hold `request` twice, as its
    /// argument and inside the timeout, and a call's future is boxed and moved on every request.
    fn call<T, Fut>(&self, request: Fut) -> impl Future<Output = Result<T, Option<Status>>>
    where
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        tokio::time::timeout(self.timeout, request).map(|answer| match answer {
            Ok(Ok(response)) => Ok(response.into_inner()),
            Ok(Err(status)) => Err(Some(status)),
            Err(_elapsed) => Err(None),
        })
    }

    /// A request with the deadline and, inside a request's trace, its `traceparent`.
    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request.set_timeout(self.timeout);
        if let Some(parent) = trace_context::current_parent()
            && let Ok(value) = MetadataValue::try_from(&parent.encode()[..])
        {
            request.metadata_mut().insert(TRACEPARENT.as_str(), value);
        }
        request
    }
}

impl GrpcAuthClient {
    /// GetBudgetSpend: the budgets a call with `token` (acting as `agent`) draws on, each with
    /// what it spent in its current period, from the usage ledger.
    pub async fn budget_spend(
        &self,
        token: &str,
        agent: Option<Uuid>,
    ) -> Result<Vec<(Budget, i64)>, TokenError> {
        let request = self.request(ValidateTokenRequest {
            access_token: token.to_owned(),
            agent_id: agent.map(|agent| agent.hyphenated().to_string()),
        });
        let mut client = self.client.clone();
        match self.call(client.get_budget_spend(request)).await {
            Ok(response) => (response.budgets.iter())
                .map(|wire| Some((budget(wire)?, wire.spent_usd_micros?)))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    tracing::warn!("GetBudgetSpend answered OK with a malformed budget");
                    TokenError::Internal
                }),
            Err(None) => Err(TokenError::Timeout),
            Err(Some(status)) => Err(token_error(&status)),
        }
    }
}

/// `addr` as an IP address and port, with or without `scheme`.
fn socket_addr(addr: &str, scheme: &str) -> Option<SocketAddr> {
    let bare = addr.trim();
    let bare = bare.strip_prefix(scheme).unwrap_or(bare);
    bare.trim_end_matches('/').parse().ok()
}

/// A budget as the server sends it; `None` when it is malformed.
fn budget(wire: &v1::Budget) -> Option<Budget> {
    let id = match wire.target_id.as_str() {
        "" => None,
        id => Some(Uuid::try_parse(id).ok()?),
    };
    Some(Budget {
        target: BudgetTarget::parse(&wire.scope, id).ok()?,
        limit_usd_micros: wire.limit_usd_micros,
        period: BudgetPeriod::parse(&wire.period).ok()?,
    })
}

impl TokenValidator for GrpcAuthClient {
    async fn validate(&self, token: &str) -> Result<OrgContext, TokenError> {
        self.validate_with_agent(token, None)
            .await
            .map(|(context, _)| context)
    }

    /// One ValidateToken call carrying the agent id; the server answers for both.
    async fn validate_with_agent(
        &self,
        token: &str,
        agent: Option<Uuid>,
    ) -> Result<(OrgContext, Option<AgentVerdict>), TokenError> {
        let message = ValidateTokenRequest {
            access_token: token.to_owned(),
            agent_id: agent.map(|agent| agent.hyphenated().to_string()),
        };
        let answer = match &self.direct {
            Some(direct) => {
                let traceparent = trace_context::current_parent()
                    .and_then(|parent| HeaderValue::from_bytes(&parent.encode()[..]).ok());
                let call = direct.validate_token(&message, self.timeout, traceparent);
                self.call(call.map(|answer| answer.map(tonic::Response::new)))
                    .await
            }
            None => {
                let mut client = self.client.clone();
                self.call(client.validate_token(self.request(message)))
                    .await
            }
        };
        match answer {
            Ok(response) => {
                let verdict = agent.zip(response.agent.as_ref()).and_then(agent_verdict);
                let context = org_context(response).ok_or_else(|| {
                    tracing::warn!("ValidateToken answered OK with malformed ids");
                    TokenError::Internal
                })?;
                Ok((context, verdict))
            }
            Err(None) => Err(TokenError::Timeout),
            Err(Some(status)) => Err(token_error(&status)),
        }
    }
}

/// The server's answer about the agent that was asked about; a reply naming another agent is
/// ignored (AgentCheck then asks ValidateAgent itself).
fn agent_verdict((asked, verdict): (Uuid, &v1::AgentVerdict)) -> Option<AgentVerdict> {
    if Uuid::try_parse(&verdict.agent_id).ok()? != asked {
        return None;
    }
    let standing = match (verdict.found, verdict.status.as_str()) {
        (false, _) => AgentStanding::NotInOrg,
        (true, "active") => AgentStanding::Active,
        (true, _) => AgentStanding::Inactive,
    };
    Some(AgentVerdict {
        agent_id: asked,
        standing,
        tools: verdict.tools.iter().cloned().collect(),
    })
}

impl AgentValidator for GrpcAuthClient {
    async fn validate(&self, org_id: Uuid, agent_id: &str) -> Result<(), AgentError> {
        let request = self.request(ValidateAgentRequest {
            agent_id: agent_id.to_owned(),
            org_id: org_id.to_string(),
        });
        let mut client = self.client.clone();
        match self.call(client.validate_agent(request)).await {
            // The server only answers OK for an active agent of this org; a reply saying
            // otherwise is believed in the stricter sense.
            Ok(response)
                if matches!(
                    response.status.as_str(),
                    "paused" | "suspended" | "archived"
                ) =>
            {
                Err(AgentError::Suspended)
            }
            Ok(response)
                if !response.org_id.is_empty() && response.org_id != org_id.to_string() =>
            {
                Err(AgentError::NotAuthorized)
            }
            Ok(_) => Ok(()),
            Err(None) => Err(AgentError::Unavailable),
            Err(Some(status)) => Err(agent_error(&status)),
        }
    }
}

fn org_context(response: ValidateTokenResponse) -> Option<OrgContext> {
    fn optional(id: Option<String>) -> Option<Option<Uuid>> {
        match id.as_deref() {
            None | Some("") => Some(None),
            Some(id) => Uuid::try_parse(id).ok().map(Some),
        }
    }
    // A budget the gateway cannot read must not pass as no budget: the answer is refused.
    let budgets = (response.budgets.iter())
        .map(budget)
        .collect::<Option<Vec<_>>>()?;
    let context = OrgContext::new(
        Uuid::try_parse(&response.org_id).ok()?,
        Permissions::from_bits(response.permissions),
        Uuid::try_parse(&response.token_id).ok()?,
    );
    Some(
        context
            .with_user(optional(response.user_id)?)
            .with_agent(optional(response.agent_id)?)
            // A limit of 0 would refuse everything; the server never issues one, so it is
            // read as no limit of the token's own.
            .with_limits(TokenLimits {
                requests_per_minute: response.rpm_limit.filter(|n| *n > 0),
                tokens_per_minute: response.tpm_limit.filter(|n| *n > 0),
            })
            .with_budgets(budgets),
    )
}

fn token_error(status: &Status) -> TokenError {
    let err = match status.code() {
        Code::Unauthenticated => return TokenError::Invalid,
        Code::DeadlineExceeded => TokenError::Timeout,
        Code::Unavailable if error_reason(status).as_deref() == Some(REASON_COLD_SHARE_SPENT) => {
            TokenError::Throttled
        }
        // Connection refused, reset or closed surface as Unavailable, Unknown or Cancelled.
        Code::Unavailable | Code::Unknown | Code::Cancelled => TokenError::Unavailable,
        _ => TokenError::Internal,
    };
    // The code only: the message may echo what the server saw.
    tracing::debug!(code = ?status.code(), "ValidateToken failed");
    err
}

fn error_reason(status: &Status) -> Option<String> {
    let details = status.get_error_details();
    details.error_info().map(|info| info.reason.clone())
}

fn agent_error(status: &Status) -> AgentError {
    match status.code() {
        Code::PermissionDenied => match error_reason(status).as_deref() {
            Some(REASON_AGENT_SUSPENDED) => AgentError::Suspended,
            _ => AgentError::NotAuthorized,
        },
        Code::NotFound => AgentError::NotAuthorized,
        Code::InvalidArgument => AgentError::InvalidArgument,
        code => {
            tracing::debug!(?code, "ValidateAgent failed");
            AgentError::Unavailable
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every protected request boxes this future and moves it as it is wrapped: it stays
    /// small only while dialing is boxed and no wrapper holds it twice (it was 19,848 bytes).
    #[tokio::test]
    async fn a_validation_future_is_small() {
        let client = GrpcAuthClient::connect_lazy("127.0.0.1:9091").unwrap();
        assert!(client.has_token_connection());
        let validation = client.validate_with_agent("svc_pat_x", None);
        assert!(
            size_of_val(&validation) <= 2048,
            "{}",
            size_of_val(&validation)
        );
    }

    #[tokio::test]
    async fn accepts_both_address_forms() {
        for addr in [
            "127.0.0.1:9091",
            "http://127.0.0.1:9091",
            "https://auth.internal:443",
            "localhost:9091",
        ] {
            assert!(GrpcAuthClient::endpoint(addr).is_ok(), "{addr}");
        }
        for addr in [
            "",
            "127.0.0.1",
            "ftp://127.0.0.1:21",
            "http://:9091",
            "not an address",
        ] {
            assert!(GrpcAuthClient::endpoint(addr).is_err(), "{addr}");
        }
        let client = GrpcAuthClient::connect_lazy("127.0.0.1:9091").unwrap();
        assert_eq!(client.timeout(), DEFAULT_VALIDATE_TIMEOUT);
        let client = client.validate_timeout(Duration::from_secs(2));
        assert_eq!(client.timeout(), Duration::from_secs(2));
    }

    #[tokio::test]
    async fn calls_carry_the_scoped_trace_as_traceparent() {
        use crate::request_id::TraceId;

        let client = GrpcAuthClient::connect_lazy("127.0.0.1:9091").unwrap();
        let outside = client.request(());
        assert!(outside.metadata().get("traceparent").is_none());

        let trace = TraceId::random();
        let (first, second) = trace_context::scope(Some(trace), async {
            (client.request(()), client.request(()))
        })
        .await;
        let parent = |request: &tonic::Request<()>| {
            request
                .metadata()
                .get("traceparent")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
                .expect("traceparent metadata")
        };
        let (first, second) = (parent(&first), parent(&second));
        assert_eq!(TraceId::from_traceparent(first.as_bytes()), Some(trace));
        assert_eq!(TraceId::from_traceparent(second.as_bytes()), Some(trace));
        assert!(first.ends_with("-01"));
        assert_ne!(first, second, "each call has its own parent id");
    }

    #[tokio::test]
    async fn calls_carry_a_scoped_parent_with_its_sampling_decision() {
        use crate::request_id::TraceId;
        use crate::trace_context::TraceParent;

        let client = GrpcAuthClient::connect_lazy("127.0.0.1:9091").unwrap();
        let trace = TraceId::random();
        for sampled in [false, true] {
            let span = TraceParent::new(trace, 0x00f067aa0ba902b7, sampled).unwrap();
            let request =
                trace_context::scope_parent(Some(span), async { client.request(()) }).await;
            let flags = if sampled { "01" } else { "00" };
            assert_eq!(
                request
                    .metadata()
                    .get("traceparent")
                    .and_then(|v| v.to_str().ok()),
                Some(format!("00-{trace}-00f067aa0ba902b7-{flags}").as_str())
            );
        }
    }

    #[test]
    fn endpoint_sets_nodelay_connect_timeout_and_keepalive() {
        let endpoint = GrpcAuthClient::endpoint("127.0.0.1:9091").unwrap();
        assert!(endpoint.get_tcp_nodelay());
        assert_eq!(
            endpoint.get_connect_timeout(),
            Some(DEFAULT_CONNECT_TIMEOUT)
        );
        assert_eq!(endpoint.get_tcp_keepalive(), Some(TCP_KEEPALIVE));
    }

    #[test]
    fn an_unavailable_the_tokens_org_earned_is_throttled() {
        use std::collections::HashMap;
        use tonic_types::ErrorDetails;
        let with_reason = |reason: &str| {
            let info = ErrorDetails::with_error_info(
                reason,
                "svc.auth.v1",
                HashMap::<String, String>::new(),
            );
            Status::with_error_details(Code::Unavailable, "busy", info)
        };
        assert_eq!(
            token_error(&with_reason(REASON_COLD_SHARE_SPENT)),
            TokenError::Throttled
        );
        assert_eq!(
            token_error(&with_reason("SOMETHING_ELSE")),
            TokenError::Unavailable
        );
        assert_eq!(
            token_error(&Status::unavailable("busy")),
            TokenError::Unavailable
        );
    }
}
