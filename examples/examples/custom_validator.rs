//! PatAuth over a validator of your own (an in-process key table behind a closure), with
//! RequirePermission on the chat route of a small axum app.
//!
//! Run it:
//!
//! ```text
//! cargo run -p svc-examples --example custom_validator    # listens on 127.0.0.1:3002
//! ```
//!
//! Then, with the two public demo tokens it loads:
//!
//! ```text
//! # 200: the chat token holds CHAT_COMPLETIONS
//! curl -i -X POST http://127.0.0.1:3002/v1/chat/completions \
//!   -H 'Authorization: Bearer svc_pat_0190f5a4-0000-7000-8000-0000000000c1_DemoChatKey'
//!
//! # 403 INSUFFICIENT_PERMISSIONS: the list-only token lacks CHAT_COMPLETIONS ...
//! curl -i -X POST http://127.0.0.1:3002/v1/chat/completions \
//!   -H 'Authorization: Bearer svc_pat_0190f5a4-0000-7000-8000-0000000000c2_DemoListKey'
//!
//! # ... yet GET /v1/whoami needs only a valid token: 200
//! curl -i http://127.0.0.1:3002/v1/whoami \
//!   -H 'Authorization: Bearer svc_pat_0190f5a4-0000-7000-8000-0000000000c2_DemoListKey'
//!
//! # 401 INVALID_TOKEN: PAT-shaped, but not in the table
//! curl -i http://127.0.0.1:3002/v1/whoami \
//!   -H 'Authorization: Bearer svc_pat_0190f5a4-0000-7000-8000-0000000000c9_Unknown'
//! ```
//!
//! `SVC_EXAMPLE_ADDR` changes the listen address.

use svc_examples::custom_validator::{self, KeyTable};
use svc_tower::context::Permissions;
use uuid::Uuid;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    // Public demo identities, for local trials only.
    let org_id = Uuid::from_u128(0x0190f5a4_0000_7000_8000_000000000002);
    let keys = KeyTable::new();
    keys.insert(
        "svc_pat_0190f5a4-0000-7000-8000-0000000000c1_DemoChatKey".to_owned(),
        Uuid::from_u128(0x0190f5a4_0000_7000_8000_0000000000c1),
        org_id,
        Permissions::CHAT_COMPLETIONS,
    );
    keys.insert(
        "svc_pat_0190f5a4-0000-7000-8000-0000000000c2_DemoListKey".to_owned(),
        Uuid::from_u128(0x0190f5a4_0000_7000_8000_0000000000c2),
        org_id,
        Permissions::TOKEN_LIST,
    );

    let addr = std::env::var("SVC_EXAMPLE_ADDR").unwrap_or_else(|_| "127.0.0.1:3002".to_owned());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!(
        "custom validator example listening on http://{}",
        listener.local_addr()?
    );
    custom_validator::serve(listener, &keys).await
}
