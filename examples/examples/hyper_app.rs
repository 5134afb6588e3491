//! svc-tower in a plain hyper 1 server, over in-memory validators.
//!
//! Run it:
//!
//! ```text
//! cargo run -p svc-examples --example hyper_app           # listens on 127.0.0.1:3001
//! ```
//!
//! Then, with the public demo identities of `Demo::well_known()`:
//!
//! ```text
//! # 200, the completion stub with the token's org and the agent
//! curl -i http://127.0.0.1:3001/v1/chat/completions \
//!   -H 'Authorization: Bearer svc_pat_0190f5a4-0000-7000-8000-0000000000a1_DemoChatToken' \
//!   -H 'X-SVC-Agent-ID: 0190f5a4-0000-7000-8000-0000000000b1' \
//!   -H 'Content-Type: application/json' -d '{"model":"svc-mock-1","messages":[]}'
//!
//! # 400 MISSING_AGENT_ID
//! curl -i http://127.0.0.1:3001/v1/chat/completions \
//!   -H 'Authorization: Bearer svc_pat_0190f5a4-0000-7000-8000-0000000000a1_DemoChatToken' -d '{}'
//!
//! # 403 AGENT_NOT_AUTHORIZED: an agent of another org
//! curl -i http://127.0.0.1:3001/v1/chat/completions \
//!   -H 'Authorization: Bearer svc_pat_0190f5a4-0000-7000-8000-0000000000a1_DemoChatToken' \
//!   -H 'X-SVC-Agent-ID: 0190f5a4-0000-7000-8000-0000000000b3' -d '{}'
//! ```
//!
//! `SVC_EXAMPLE_ADDR` changes the listen address.

use svc_examples::demo::Demo;
use svc_examples::hyper_app;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::var("SVC_EXAMPLE_ADDR").unwrap_or_else(|_| "127.0.0.1:3001".to_owned());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!(
        "hyper example listening on http://{}",
        listener.local_addr()?
    );
    hyper_app::serve(listener, &Demo::well_known()).await
}
