//! svc-tower in an axum app, over in-memory validators.
//!
//! Run it:
//!
//! ```text
//! cargo run -p svc-examples --example axum_app            # listens on 127.0.0.1:3000
//! ```
//!
//! Then, with the public demo identities of `Demo::well_known()`:
//!
//! ```text
//! # 200, the completion stub with the token's org and the agent
//! curl -i http://127.0.0.1:3000/v1/chat/completions \
//!   -H 'Authorization: Bearer svc_pat_0190f5a4-0000-7000-8000-0000000000a1_DemoChatToken' \
//!   -H 'X-SVC-Agent-ID: 0190f5a4-0000-7000-8000-0000000000b1' \
//!   -H 'Content-Type: application/json' -d '{"model":"svc-mock-1","messages":[]}'
//!
//! # 401 MISSING_TOKEN, as the JSON error envelope
//! curl -i -X POST http://127.0.0.1:3000/v1/chat/completions
//!
//! # 403 INSUFFICIENT_PERMISSIONS: the list-only token
//! curl -i http://127.0.0.1:3000/v1/chat/completions \
//!   -H 'Authorization: Bearer svc_pat_0190f5a4-0000-7000-8000-0000000000a2_DemoListToken' \
//!   -H 'X-SVC-Agent-ID: 0190f5a4-0000-7000-8000-0000000000b1' -d '{}'
//!
//! # 403 AGENT_SUSPENDED: the paused agent; GET /v1/whoami needs no permission
//! curl -i http://127.0.0.1:3000/v1/whoami \
//!   -H 'Authorization: Bearer svc_pat_0190f5a4-0000-7000-8000-0000000000a2_DemoListToken' \
//!   -H 'X-SVC-Agent-ID: 0190f5a4-0000-7000-8000-0000000000b2'
//! ```
//!
//! `SVC_EXAMPLE_ADDR` changes the listen address.

use svc_examples::axum_app;
use svc_examples::demo::Demo;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::var("SVC_EXAMPLE_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!(
        "axum example listening on http://{}",
        listener.local_addr()?
    );
    axum_app::serve(listener, &Demo::well_known()).await
}
