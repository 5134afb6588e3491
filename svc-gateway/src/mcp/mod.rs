//! MCP servers behind the gateway: `POST`, `GET` and `DELETE /mcp/{server}` (and
//! `/proxy/mcp/{server}`), the Streamable HTTP transport, under the same identity as chat.
//!
//! The route runs inside the chat stack (request id, envelope, body limit, PAT, agent, the
//! `MCP_TOOLS` permission, rate limits), then [`proxy`]:
//!
//! - the server is one of the registry file's `[[mcp_servers]]` (else 404 in the envelope);
//! - it is sent only the transport's own headers and those its entry names, never the
//!   client's `Authorization`, `X-SVC-Agent-ID` or any other credential;
//! - `tools/list` answers hold only the agent's granted tools ([`grants`]), JSON or streamed;
//!   a `tools/call` of a tool not granted never reaches the server and answers JSON-RPC
//!   error -32602, as for a tool that does not exist;
//! - the server's `Mcp-Session-Id` stays with the gateway: the client holds an id the gateway
//!   minted under its org ([`sessions`]), so any replica continues the session;
//! - every tool call (org, agent, token, server, tool, outcome, duration; never arguments or
//!   results) goes to the usage ledger's bounded writer and is counted in
//!   `svc_mcp_tool_calls_total{server, outcome}`.

pub mod grants;
pub mod messages;
mod proxy;
pub mod sessions;
pub mod sse;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Uri};
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::config::providers::McpServerEntry;
use crate::provider::transport::TlsError;

pub(crate) use proxy::handle;
pub use sessions::SessionMap;

/// The transport's session header.
pub static MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");

/// One registered server, ready to be called.
#[derive(Debug)]
pub(crate) struct Upstream {
    name: String,
    uri: Uri,
    timeout: Duration,
    /// The headers its entry names, values marked sensitive.
    headers: Vec<(HeaderName, HeaderValue)>,
}

/// The registered servers and the one pooled client that calls them.
#[derive(Clone)]
pub struct McpServers {
    servers: Arc<HashMap<String, Upstream>>,
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.servers.keys()).finish()
    }
}

/// Connection setup never waits longer than this, whatever a server's timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl McpServers {
    /// The servers of the registry file (checked at start, so each URL and header is valid).
    pub(crate) fn new(entries: &[McpServerEntry]) -> Result<McpServers, TlsError> {
        let mut servers = HashMap::with_capacity(entries.len());
        for entry in entries {
            let Ok(uri) = entry.url.parse::<Uri>() else {
                continue;
            };
            let headers = entry
                .headers
                .iter()
                .filter_map(|(name, value)| {
                    let value = crate::provider::transport::secret_header(value.expose())?;
                    Some((name.clone(), value))
                })
                .collect();
            servers.insert(
                entry.name.clone(),
                Upstream {
                    name: entry.name.clone(),
                    uri,
                    timeout: entry.timeout,
                    headers,
                },
            );
        }
        let client = crate::provider::transport::pooled_client(CONNECT_TIMEOUT)?;
        Ok(McpServers {
            servers: Arc::new(servers),
            client,
        })
    }

    /// Whether any server is registered (the routes exist either way: an unknown server is 404).
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }
}

/// Labels of `svc_mcp_tool_calls_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct CallLabels {
    server: String,
    outcome: &'static str,
}

/// `svc_mcp_tool_calls_total{server, outcome}`.
#[derive(Debug, Clone, Default)]
pub struct McpMetrics {
    calls: Family<CallLabels, Counter>,
}

impl McpMetrics {
    /// Registers the counter.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "svc_mcp_tool_calls",
            "MCP tool calls by server and outcome (ok, error, denied)",
            self.calls.clone(),
        );
    }

    fn count(&self, server: &str, outcome: messages::Outcome) {
        self.calls
            .get_or_create(&CallLabels {
                server: server.to_owned(),
                outcome: outcome.as_str(),
            })
            .inc();
    }
}

/// What the MCP handler needs.
#[derive(Clone, Debug)]
pub(crate) struct McpState {
    pub(crate) servers: McpServers,
    pub(crate) sessions: SessionMap,
    pub(crate) metrics: McpMetrics,
    /// Where each tool call is recorded, when the gateway keeps a ledger.
    pub(crate) ledger: Option<crate::ledger::Ledger>,
}

/// A 401 names the scheme it wants (`WWW-Authenticate: Bearer`), as MCP clients expect.
pub(crate) fn bearer_challenge<B>(mut response: http::Response<B>) -> http::Response<B> {
    if response.status() == http::StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer"),
        );
    }
    response
}
