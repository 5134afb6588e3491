//! What `svc dev` prints on stdout once it serves: the credentials, a curl command to
//! paste and an OpenAI Python SDK snippet. Nothing here goes through the logger: tokens are
//! shown to the developer who started the process, never logged.

use std::fmt::Write;
use std::net::SocketAddr;

use super::{DevIdentity, DevServer};

/// The first line of the curl command, which scripts (and the quickstart test) look for.
pub const CURL_PREFIX: &str = "curl ";

/// The whole banner.
pub fn banner(server: &DevServer) -> String {
    let identity = &server.identity;
    let base = base_url(server.http_addr);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "svc dev: gateway on {base}, auth gRPC on {}",
        server.grpc_addr
    );
    let _ = writeln!(
        out,
        "identity store: {} ({})",
        server.database.display(),
        if identity.reused { "reused" } else { "created" }
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "org id:      {}", identity.org_id);
    let _ = writeln!(out, "agent id:    {}", identity.agent_id);
    let _ = writeln!(out, "chat token:  {}", identity.chat_token);
    let _ = writeln!(
        out,
        "admin token: {} (every permission; gRPC metadata authorization: Bearer <token>)",
        identity.admin_token
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Manage it (svc agent, svc token, svc user, svc audit):"
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "  export SVC_AUTH_GRPC_ADDR={} SVC_ADMIN_TOKEN={}",
        server.grpc_addr, identity.admin_token
    );
    let _ = writeln!(out, "  svc agent pause {} --reason test", identity.agent_id);
    let _ = writeln!(out);
    let _ = writeln!(out, "Try it:");
    let _ = writeln!(out);
    out.push_str(&curl(server.http_addr, identity, &server.model));
    let _ = writeln!(out);
    let _ = writeln!(out, "With the OpenAI Python SDK (pip install openai):");
    let _ = writeln!(out);
    out.push_str(&python(server.http_addr, identity, &server.model));
    let _ = writeln!(out);
    let data_dir = server
        .database
        .parent()
        .map_or_else(|| ".".to_owned(), |dir| dir.display().to_string());
    let _ = writeln!(out, "Ctrl-C stops it; the data stays in {data_dir}.");
    out
}

/// The gateway's URL as a client on this machine reaches it.
fn base_url(addr: SocketAddr) -> String {
    if addr.ip().is_unspecified() {
        format!("http://127.0.0.1:{}", addr.port())
    } else {
        format!("http://{addr}")
    }
}

/// Quotes `value` for a POSIX shell.
fn shell_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// A POST /v1/chat/completions with every required header, ready to paste into a shell.
pub fn curl(http_addr: SocketAddr, identity: &DevIdentity, model: &str) -> String {
    let body = serde_json::json!({
        "model": model,
        "messages": [{"role": "user", "content": "Hello from svc dev"}],
    });
    format!(
        "{CURL_PREFIX}-sS {url} \\\n  \
         -H {auth} \\\n  \
         -H {agent} \\\n  \
         -H 'Content-Type: application/json' \\\n  \
         -d {body}\n",
        url = shell_quote(&format!("{}/v1/chat/completions", base_url(http_addr))),
        auth = shell_quote(&format!("Authorization: Bearer {}", identity.chat_token)),
        agent = shell_quote(&format!("X-SVC-Agent-ID: {}", identity.agent_id)),
        body = shell_quote(&body.to_string()),
    )
}

/// The same call through the official OpenAI Python client.
pub fn python(http_addr: SocketAddr, identity: &DevIdentity, model: &str) -> String {
    // JSON string literals are valid Python string literals.
    let literal = |value: &str| serde_json::Value::from(value).to_string();
    format!(
        "from openai import OpenAI\n\
         \n\
         client = OpenAI(\n    \
             base_url={base},\n    \
             api_key={token},\n    \
             default_headers={{\"X-SVC-Agent-ID\": {agent}}},\n\
         )\n\
         reply = client.chat.completions.create(\n    \
             model={model},\n    \
             messages=[{{\"role\": \"user\", \"content\": \"Hello from svc dev\"}}],\n\
         )\n\
         print(reply.choices[0].message.content)\n",
        base = literal(&format!("{}/v1", base_url(http_addr))),
        token = literal(&identity.chat_token),
        agent = literal(&identity.agent_id.to_string()),
        model = literal(model),
    )
}

#[cfg(test)]
mod tests;
