//! The gateway assembled: dependencies built from the configuration, then the route table and
//! the layer stack around it.

use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::time::Duration;

use axum::Router;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry as PromRegistry;
use svc_runtime::health::Readiness;
use svc_runtime::shutdown::Drain;
use svc_tower::agent::AgentCheckLayer;
use svc_tower::auth::{AuthFailureLimit, PatAuthLayer, RequirePermissionLayer};
use svc_tower::body_limit::BodyLimitLayer;
use svc_tower::context::Permissions;
use svc_tower::envelope::ErrorEnvelopeLayer;
use svc_tower::error::ErrorCode;
use svc_tower::grpc::GrpcAuthClient;
use svc_tower::idempotency::{
    IdempotencyLayer, IdempotencyStore, MemoryIdempotencyStore, RedisIdempotencyStore,
};
use svc_tower::metrics::ProxyMetrics;
use svc_tower::rate_limit::{
    MemoryTokenBudgetStore, NoopRateLimitStore, OrgRateLimitLayer, RateLimitStore,
    RedisRateLimitStore, RedisTokenBudgetStore, TokenBudgetStore,
};
use svc_tower::request_id::RequestIdLayer;
use svc_tower::store::{RedisPool, StoreError};
use tower::ServiceBuilder;
use tower::util::{Either, MapResponseLayer};
use tower_http::timeout::RequestBodyTimeoutLayer;

use crate::access_log::{AccessLogLayer, IdentityLayer};
use crate::accounting::{Accounting, Holder};
use crate::budget::CostMeter;
use crate::config::Config;
use crate::forward::Forward;
use crate::http_metrics::HttpMetrics;
use crate::ledger::{Ledger, LedgerMetrics, LedgerSink, PgLedger};
use crate::mcp::{McpMetrics, McpServers, SessionMap};
use crate::provider::{Registry, live};
use crate::readiness::{self, AuthGrpcChecker, RedisChecker};
use crate::request::Endpoint;
use crate::routes::{self, count_tokens::CountState, forward::ForwardState, models::ModelsState};
use crate::server::{self, Running};
use crate::session::{self, CheckpointWriter, SessionStore, WriterTask};
use crate::usage::TokenMetrics;

/// How much longer than the provider timeout an idempotency claim lives.
pub const PENDING_TTL_MARGIN: Duration = Duration::from_secs(30);

/// Why the gateway could not start. Each names what is at fault, never a secret.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The provider could not be built.
    #[error(transparent)]
    Provider(#[from] live::BuildError),
    /// `REDIS_URL` could not be used.
    #[error("REDIS_URL: {0}")]
    Redis(#[source] StoreError),
    /// `POSTGRES_DSN` could not be used.
    #[error(transparent)]
    Sessions(#[from] session::store::InvalidDsn),
    /// The auth service channel could not be set up.
    #[error(transparent)]
    Auth(#[from] crate::auth::AuthSetupError),
    /// The listen address could not be bound.
    #[error("cannot listen on the configured address")]
    Bind(#[source] std::io::Error),
}

/// The gateway, built but not yet serving.
///
/// Building connects to nothing: the auth channel, the Redis pool and the PostgreSQL pool
/// all dial lazily, so a gateway starts while a dependency is down, reports it on `/ready`,
/// and recovers on its own.
pub struct Gateway {
    config: Arc<Config>,
    auth: GrpcAuthClient,
    registry: Registry,
    redis: Option<RedisPool>,
    /// Session checkpoints (with `POSTGRES_DSN`), and the task that writes them.
    checkpoints: Option<(CheckpointWriter, WriterTask)>,
    ledger: Option<Ledger>,
    ledger_metrics: LedgerMetrics,
    /// The registry file's MCP servers.
    mcp: McpServers,
    mcp_metrics: McpMetrics,
    metrics: ProxyMetrics,
    tokens: TokenMetrics,
    /// Prices calls for the ledger (and counts unpriced ones).
    cost: CostMeter,
    http_metrics: HttpMetrics,
    prometheus: Arc<PromRegistry>,
    readiness: Arc<Readiness>,
    rate_limit: Option<Arc<dyn RateLimitStore>>,
    token_budget: Option<Arc<dyn TokenBudgetStore>>,
    /// When the gateway was built (Unix seconds).
    started: i64,
    /// The shutdown this gateway follows: `/ready` fails once it starts, streams end at its
    /// deadline.
    drain: Drain,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("listen", &self.config.listen)
            .field("registry", &self.registry)
            .field("redis", &self.redis.is_some())
            .field("sessions", &self.checkpoints.is_some())
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// Builds every dependency the configuration names. Call it inside a Tokio runtime (the
    /// auth channel spawns its worker there).
    pub fn new(config: Config) -> Result<Gateway, StartError> {
        let registry = Registry::from_config(&config.provider)?;
        let mcp_entries = config
            .provider
            .file
            .as_ref()
            .map(|file| &file.mcp_servers[..]);
        let mcp =
            McpServers::new(mcp_entries.unwrap_or_default()).map_err(live::BuildError::from)?;
        let redis = match &config.redis_url {
            Some(url) => Some(RedisPool::new(url.expose()).map_err(StartError::Redis)?),
            None => None,
        };
        let sessions = match &config.postgres_dsn {
            Some(dsn) => Some(SessionStore::connect_lazy(dsn.expose())?),
            None => None,
        };
        let channel = crate::auth::channel(&config.auth)?;
        let auth = crate::auth::client(channel.clone(), &config.auth);
        let readiness = Arc::new(readiness::readiness(
            AuthGrpcChecker::from_channel(channel),
            RedisChecker::new(redis.clone()),
        ));

        let metrics = ProxyMetrics::new();
        let mut prometheus = PromRegistry::default();
        metrics.register(&mut prometheus);
        let tokens = TokenMetrics::default();
        tokens.register(&mut prometheus);
        let cost = CostMeter::new(registry.clone());
        cost.register(&mut prometheus);
        let ledger_metrics = LedgerMetrics::default();
        ledger_metrics.register(&mut prometheus);
        let mcp_metrics = McpMetrics::default();
        mcp_metrics.register(&mut prometheus);
        // With PostgreSQL the ledger shares the sessions' pool: the same role, which may
        // insert ledger rows and read none.
        let ledger = sessions.as_ref().map(|sessions| {
            let sink: Arc<dyn LedgerSink> = Arc::new(PgLedger::new(sessions.pool().clone()));
            Ledger::start(
                sink,
                config.ledger_buffer,
                config.ledger_batch,
                ledger_metrics.clone(),
            )
        });
        let checkpoints = sessions.map(CheckpointWriter::start);
        let http_metrics = HttpMetrics::new();
        http_metrics.register(&mut prometheus);
        registry.metrics().register(&mut prometheus);
        let process_up = Gauge::<i64, AtomicI64>::default();
        process_up.set(1);
        prometheus.register(
            "svc_process_up",
            "1 while the process is serving",
            process_up,
        );

        Ok(Gateway {
            config: Arc::new(config),
            auth,
            registry,
            redis,
            checkpoints,
            ledger,
            ledger_metrics,
            mcp,
            mcp_metrics,
            metrics,
            tokens,
            cost,
            http_metrics,
            prometheus: Arc::new(prometheus),
            readiness,
            rate_limit: None,
            token_budget: None,
            started: chrono::Utc::now().timestamp(),
            drain: Drain::new(),
        })
    }

    /// Replaces the provider registry (tests point it at a fake upstream). Its provider
    /// metrics are not exported: the Prometheus registry was built with the first one.
    pub fn with_registry(mut self, registry: Registry) -> Gateway {
        self.cost = self.cost.with_registry(registry.clone());
        self.registry = registry;
        self
    }

    /// Replaces the per-org limiter (the embedded dev mode limits in process, without Redis).
    pub fn with_rate_limit_store(mut self, store: Arc<dyn RateLimitStore>) -> Gateway {
        self.rate_limit = Some(store);
        self
    }

    /// Writes the usage ledger to `sink` (the embedded dev mode keeps it in its own store)
    /// instead of PostgreSQL.
    pub fn with_ledger_sink(mut self, sink: Arc<dyn LedgerSink>) -> Gateway {
        self.ledger = Some(Ledger::start(
            sink,
            self.config.ledger_buffer,
            self.config.ledger_batch,
            self.ledger_metrics.clone(),
        ));
        self
    }

    /// The ledger's metrics (records written, dropped, pending).
    pub fn ledger_metrics(&self) -> &LedgerMetrics {
        &self.ledger_metrics
    }

    /// Replaces the tokens-per-minute store (the embedded dev mode counts in process).
    pub fn with_token_budget_store(mut self, store: Arc<dyn TokenBudgetStore>) -> Gateway {
        self.token_budget = Some(store);
        self
    }

    /// Tokens per minute and budgets: shared in Redis; without `REDIS_URL`, budgets are
    /// counted in this process and token limits not at all (SPEC's no-op limiter), unless a
    /// store was given.
    fn holder(&self) -> Holder {
        let (store, shared): (Arc<dyn TokenBudgetStore>, bool) =
            match (&self.token_budget, &self.redis) {
                (Some(store), _) => (store.clone(), true),
                (None, Some(pool)) => (
                    Arc::new(RedisTokenBudgetStore::new(
                        pool.clone(),
                        self.config.redis_key_prefix.clone(),
                    )),
                    true,
                ),
                (None, None) => (Arc::new(MemoryTokenBudgetStore::new()), false),
            };
        let holder = Holder::new(
            store,
            self.config.rate_limit_tpm,
            self.config.default_completion_tokens,
            self.config.rate_limit_tpm_timeout,
            self.cost.clone(),
        )
        .budget_fail_open(self.config.budget_fail_open)
        .spend_source(Arc::new(self.auth.clone()))
        .drain(self.drain.clone());
        if shared {
            holder
        } else {
            holder.budgets_only()
        }
    }

    /// Replaces the `/ready` checkers (the embedded dev mode has no Redis to check).
    pub fn with_readiness(mut self, readiness: Readiness) -> Gateway {
        self.readiness = Arc::new(readiness);
        self
    }

    /// The configuration the gateway runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The metric handles, for embedding the gateway in a larger process.
    pub fn metrics(&self) -> &ProxyMetrics {
        &self.metrics
    }

    /// Whether the token store counts requests in the keys the rate limiter does: both are
    /// this gateway's own, in one Redis.
    fn counts_with_reservation(&self) -> bool {
        self.redis.is_some() && self.rate_limit.is_none() && self.token_budget.is_none()
    }

    /// The per-org limiter: shared in Redis, or a no-op without `REDIS_URL`.
    fn rate_limit_store(&self) -> Arc<dyn RateLimitStore> {
        if let Some(store) = &self.rate_limit {
            return store.clone();
        }
        match &self.redis {
            Some(pool) => Arc::new(RedisRateLimitStore::new(
                pool.clone(),
                self.config.redis_key_prefix.clone(),
            )),
            None => Arc::new(NoopRateLimitStore),
        }
    }

    /// Idempotency records: shared in Redis, or in this process without `REDIS_URL`.
    fn idempotency_store(&self) -> Arc<dyn IdempotencyStore> {
        match &self.redis {
            Some(pool) => Arc::new(RedisIdempotencyStore::new(
                pool.clone(),
                self.config.redis_key_prefix.clone(),
            )),
            None => Arc::new(MemoryIdempotencyStore::new()),
        }
    }

    /// The provider call itself.
    fn forward(&self) -> Forward {
        Forward::new(self.registry.clone(), self.config.error_docs_base.clone())
            .drain(self.drain.clone())
    }

    /// The provider call with its accounting.
    fn accounting(&self) -> Accounting {
        Accounting::new(
            self.forward(),
            self.holder(),
            self.tokens.clone(),
            self.cost.clone(),
            self.ledger.clone(),
            self.checkpoints.as_ref().map(|(writer, _)| writer.clone()),
        )
    }

    /// MCP sessions: shared in Redis, or in this process without `REDIS_URL`.
    fn mcp_sessions(&self) -> SessionMap {
        match &self.redis {
            Some(pool) => SessionMap::Redis {
                pool: pool.clone(),
                prefix: self.config.redis_key_prefix.clone(),
            },
            None => SessionMap::memory(),
        }
    }

    /// Idempotency over the provider routes' calls.
    fn idempotency(&self) -> routes::forward::IdempotencyLayer {
        IdempotencyLayer::new(self.idempotency_store())
            // A claim must outlive the slowest chain of provider calls, or a retry would run
            // it twice.
            .pending_ttl(self.registry.chain_timeout() + PENDING_TTL_MARGIN)
            .metrics(self.metrics.clone())
            // An answer cut off mid-body came from a failing provider.
            .broken_body_error(ErrorCode::ProviderUnavailable)
            // A route and its alias are one route: a retry through the alias replays.
            .route_fn(|parts| match Endpoint::from_path(parts.uri.path()) {
                Some(endpoint) => endpoint.route().to_owned(),
                None => parts.uri.path().to_owned(),
            })
    }

    /// Rejected tokens per client address, shared by every protected route; `None` when
    /// `SVC_AUTH_FAILURES_PER_MINUTE=0`. Forged tokens are free to make (the checksum is
    /// public) and each would cost the auth service a database read.
    fn auth_failure_limit(&self) -> Option<AuthFailureLimit> {
        let per_minute = self.config.auth_failures_per_minute;
        // The serve loop puts the peer's SocketAddr in the extensions, where the limit
        // looks by default.
        let limit = AuthFailureLimit::per_minute(per_minute);
        let limit = match &self.config.trusted_proxy_header {
            Some(header) => limit.trusted_header(header.clone()),
            None => limit,
        };
        (per_minute > 0).then_some(limit)
    }

    /// The route table inside the layer stack.
    pub fn router(&self) -> Router {
        let config = &self.config;
        let mut pat_auth = PatAuthLayer::new(self.auth.clone())
            .metrics(self.metrics.clone())
            .prefetch_agent()
            .refusal_delay(config.auth_refusal_delay);
        if let Some(limit) = self.auth_failure_limit() {
            pat_auth = pat_auth.failure_limit(limit);
        }
        let agent_check = AgentCheckLayer::new(self.auth.clone());
        let rate_limit = OrgRateLimitLayer::new(self.rate_limit_store(), config.rate_limit_rpm)
            .metrics(self.metrics.clone());
        let early_rate_limit = rate_limit.early();
        let idempotency = self.idempotency();
        let accounting = self.accounting();
        // A provider call that will reserve tokens or money counts its request in the same
        // script as its reservation, once its body is parsed: one script per call, not two.
        // Not a call with an Idempotency-Key: a replay reserves nothing, yet counts.
        let provider_rate_limit = if self.counts_with_reservation() {
            let metered = accounting.clone();
            rate_limit.clone().count_later_when(move |org, headers| {
                !headers.contains_key(&crate::validate::IDEMPOTENCY_KEY) && metered.meters(org)
            })
        } else {
            rate_limit.clone()
        };

        // A provider-backed route, outermost first. `route_layer`, so a wrong method is a 405
        // before any authentication.
        let provider_route = |endpoint: Endpoint, permission: RequirePermissionLayer| {
            let state = ForwardState {
                endpoint,
                idempotency: idempotency.clone(),
                accounting: accounting.clone(),
            };
            post(routes::forward::forward)
                .with_state(state)
                .route_layer(
                    ServiceBuilder::new()
                        // Sessions first: every answer, rejections included, echoes the id.
                        .layer(session::SessionLayer)
                        // A body that stops arriving is a 408 when the handler reads it, so a
                        // trickle cannot hold the connection.
                        .layer(RequestBodyTimeoutLayer::new(config.http.body_read_timeout))
                        // A declared oversize body is refused before any I/O, a streamed one as
                        // the handler reads it.
                        .layer(BodyLimitLayer::new(config.max_request_body_bytes))
                        // A token authenticated before: its org's limit is asked at the same
                        // moment as the auth service, and given back if the call is refused.
                        .layer(early_rate_limit.clone())
                        // The token, before anything that costs more than a header check.
                        .layer(pat_auth.clone())
                        // The token's org, agent and id onto every answer, for the access log.
                        .layer(IdentityLayer)
                        // The agent, with the token's org (never the client's word for it).
                        .layer(agent_check.clone())
                        // The agent too, for the access log.
                        .layer(IdentityLayer)
                        // The route's permission: a 403 costs no Redis round trip and no provider.
                        .layer(permission)
                        // The limit is per org, known only after authentication; it runs before
                        // the body is parsed, so a refused request costs one Redis round trip,
                        // unless its count waits for the reservation (above).
                        .layer(provider_rate_limit.clone()),
                )
        };
        let chat = provider_route(
            Endpoint::ChatCompletions,
            RequirePermissionLayer::chat_completions(),
        );
        let responses = provider_route(
            Endpoint::Responses,
            RequirePermissionLayer::chat_completions(),
        );
        let embeddings = provider_route(
            Endpoint::Embeddings,
            RequirePermissionLayer::new(Permissions::EMBEDDINGS),
        );
        // Anthropic's Messages API generates like chat and needs the same permission.
        let messages = provider_route(
            Endpoint::Messages,
            RequirePermissionLayer::chat_completions(),
        );
        // Counting tokens spends none: the chat permission, no rate limit, no idempotency.
        let count_tokens = post(routes::count_tokens::count_tokens)
            .with_state(CountState {
                forward: self.forward(),
            })
            .route_layer(
                ServiceBuilder::new()
                    .layer(RequestBodyTimeoutLayer::new(config.http.body_read_timeout))
                    .layer(BodyLimitLayer::new(config.max_request_body_bytes))
                    .layer(pat_auth.clone())
                    .layer(IdentityLayer)
                    .layer(agent_check.clone())
                    .layer(IdentityLayer)
                    .layer(RequirePermissionLayer::chat_completions()),
            );
        // MCP servers: the chat stack with the MCP_TOOLS permission, and a 401 that names the
        // scheme, as the MCP authorization rules ask.
        let mcp = axum::routing::on(
            axum::routing::MethodFilter::POST
                .or(axum::routing::MethodFilter::GET)
                .or(axum::routing::MethodFilter::DELETE),
            crate::mcp::handle,
        )
        .with_state(crate::mcp::McpState {
            servers: self.mcp.clone(),
            sessions: self.mcp_sessions(),
            metrics: self.mcp_metrics.clone(),
            ledger: self.ledger.clone(),
        })
        .route_layer(
            ServiceBuilder::new()
                .map_response(crate::mcp::bearer_challenge)
                .layer(RequestBodyTimeoutLayer::new(config.http.body_read_timeout))
                .layer(BodyLimitLayer::new(config.max_request_body_bytes))
                .layer(early_rate_limit.clone())
                .layer(pat_auth.clone())
                .layer(agent_check.clone())
                .layer(RequirePermissionLayer::new(Permissions::MCP_TOOLS))
                .layer(rate_limit.clone()),
        );
        let probe = get(routes::probe::auth_probe).route_layer(
            ServiceBuilder::new()
                // A valid token and agent are all the probe needs: no permission bit.
                .layer(early_rate_limit)
                .layer(pat_auth.clone())
                .layer(IdentityLayer)
                .layer(agent_check.clone())
                .layer(IdentityLayer)
                .layer(rate_limit),
        );
        // The model list is what clients call to test a connection: a valid token and agent,
        // no permission bit, and no rate limit, so a health poll never spends the org's budget.
        let models_state = ModelsState {
            registry: self.registry.clone(),
            created: self.started,
        };
        let identified = ServiceBuilder::new()
            .layer(pat_auth)
            .layer(IdentityLayer)
            .layer(agent_check)
            .layer(IdentityLayer);
        let models = get(routes::models::list)
            .with_state(models_state.clone())
            .route_layer(identified.clone());
        let model = get(routes::models::retrieve)
            .with_state(models_state)
            .route_layer(identified);
        let ops = Router::new()
            .route("/health", get(routes::ops::health))
            .route(
                "/ready",
                get(routes::ops::ready).with_state((self.readiness.clone(), self.drain.clone())),
            )
            .route(
                "/metrics",
                get(routes::ops::metrics).with_state(self.prometheus.clone()),
            )
            .route("/openapi.json", get(routes::openapi::document));

        let mut router = Router::new();
        for (endpoint, route) in [
            (Endpoint::ChatCompletions, chat),
            (Endpoint::Responses, responses),
            (Endpoint::Embeddings, embeddings),
            (Endpoint::Messages, messages),
        ] {
            router = router
                .route(endpoint.route(), route.clone())
                .route(endpoint.alias(), route);
        }
        router
            .route(Endpoint::CountTokens.route(), count_tokens.clone())
            .route(Endpoint::CountTokens.alias(), count_tokens)
            .route("/v1/models", models.clone())
            .route("/proxy/v1/models", models)
            .route("/v1/models/{*model}", model.clone())
            .route("/proxy/v1/models/{*model}", model)
            .route("/v1/orgs/{org_id}/auth-probe", probe)
            .route("/mcp/{server}", mcp.clone())
            .route("/proxy/mcp/{server}", mcp)
            .merge(ops)
            .method_not_allowed_fallback(routes::method_not_allowed)
            .fallback(routes::not_found)
            .layer(
                ServiceBuilder::new()
                    // Outermost: every response, errors included, carries the request id,
                    // the trace id and the response time.
                    .layer(
                        RequestIdLayer::new()
                            .request_id_header(config.request_id_header.clone())
                            .trace_id_header(config.trace_id_header.clone()),
                    )
                    // Right inside RequestId, which chose the trace id: the exported span of
                    // the request carries that id, and its status is the final one. Only with
                    // trace export: a pass-through middleware still costs every request a
                    // clone of the stack below and a boxed future.
                    .layer(if config.otel.endpoint.is_some() {
                        Either::Left(axum::middleware::from_fn_with_state(
                            crate::request_span::Export {
                                trust_inbound_sampling: config.trust_inbound_sampling,
                            },
                            crate::request_span::record,
                        ))
                    } else {
                        Either::Right(MapResponseLayer::new(IntoResponse::into_response))
                    })
                    // Renders every ApiError rejection below it as the envelope, in one place,
                    // and turns a panic into a 500.
                    .layer(ErrorEnvelopeLayer::new().docs_base(config.error_docs_base.clone()))
                    // Right inside the envelope, where a rejection's error code is still in the
                    // response: one line per request, refusals included (SVC_ACCESS_LOG).
                    .layer(AccessLogLayer::new(config.access_log))
                    // Right inside the envelope, where a rejection's error code is still in the
                    // response: reports 5xx answers and panics when SENTRY_DSN is set.
                    .option_layer(
                        config
                            .sentry_dsn
                            .is_some()
                            .then(|| axum::middleware::from_fn(crate::error_report::report)),
                    )
                    // Counts final statuses by route template, rejections included, and the
                    // gateway's own cost of each provider call.
                    .layer(self.http_metrics.clone()),
            )
    }

    /// The shutdown this gateway follows (started by [`Running::shutdown`] or drop).
    pub fn drain(&self) -> &Drain {
        &self.drain
    }

    /// Binds the configured address and serves until [`Running::shutdown`] (or drop).
    pub async fn start(mut self) -> Result<Running, StartError> {
        let router = self.router();
        // The writer task ends once the router, the last holder of its queue, is gone.
        let writer = self.checkpoints.take().map(|(_, task)| task);
        server::serve(
            router,
            self.config.listen,
            self.config.http,
            self.drain.clone(),
        )
        .await
        .map(|running| running.with_writer(writer))
        .map_err(StartError::Bind)
    }
}

/// The router for `config`: what `main` serves, and what tests call in process.
pub fn app(config: Config) -> Result<Router, StartError> {
    Ok(Gateway::new(config)?.router())
}
