//! Token management over gRPC with the generated client: CreateToken with the admin PAT as
//! `authorization` metadata, ListTokens page by page, RevokeToken, then ValidateToken refusing
//! the revoked token.
//!
//! Run it against a local auth server (PostgreSQL on 127.0.0.1:5432):
//!
//! ```text
//! createdb -h 127.0.0.1 -U postgres svc_dev
//! export POSTGRES_DSN=postgres://postgres@127.0.0.1:5432/svc_dev
//! cargo run -p svc-auth-server -- migrate
//! cargo run -p svc-auth-server -- seed        # prints JSON; copy its admin_token
//! cargo run -p svc-auth-server &              # gRPC on 127.0.0.1:9091
//!
//! SVC_ADMIN_TOKEN='svc_pat_...' cargo run -p svc-examples --example grpc_admin
//! ```
//!
//! `SVC_AUTH_GRPC_ADDR` (default `127.0.0.1:9091`) points it elsewhere; `SVC_EXAMPLE_PAGE_SIZE`
//! (default 2) sets the ListTokens page size. The created token's plaintext is never printed.

use std::process::ExitCode;

use svc_examples::grpc_admin::{self, Walkthrough};

const DEFAULT_ADDR: &str = "127.0.0.1:9091";
const DEFAULT_PAGE_SIZE: i32 = 2;

#[tokio::main]
async fn main() -> ExitCode {
    let Ok(admin_token) = std::env::var("SVC_ADMIN_TOKEN") else {
        eprintln!(
            "error: set SVC_ADMIN_TOKEN to the admin_token printed by `svc-auth-server seed`"
        );
        return ExitCode::from(2);
    };
    let addr = std::env::var("SVC_AUTH_GRPC_ADDR").unwrap_or_else(|_| DEFAULT_ADDR.to_owned());
    let page_size = match std::env::var("SVC_EXAMPLE_PAGE_SIZE") {
        Ok(value) => match value.parse() {
            Ok(size) => size,
            Err(_) => {
                eprintln!("error: SVC_EXAMPLE_PAGE_SIZE must be an integer");
                return ExitCode::from(2);
            }
        },
        Err(_) => DEFAULT_PAGE_SIZE,
    };

    let result = async {
        let channel = grpc_admin::connect(&addr).await?;
        grpc_admin::run(channel, &admin_token, page_size).await
    }
    .await;
    match result {
        Ok(walkthrough) => {
            print(&walkthrough);
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn print(w: &Walkthrough) {
    println!("admin token's org: {}", w.org_id);
    println!(
        "CreateToken: token_id {} (permissions {:#b}); the plaintext was returned once and is not shown",
        w.created.token_id, w.created.permissions
    );
    println!("ValidateToken (new token): ok, org {}", w.validated_org_id);
    for (n, page) in w.pages.iter().enumerate() {
        println!("ListTokens page {}: {} token(s)", n + 1, page.len());
        for token in page {
            let name = token.name.as_deref().unwrap_or("-");
            let revoked = if token.revoked_at.is_some() {
                " revoked"
            } else {
                ""
            };
            println!(
                "  {} {name} permissions {:#b}{revoked}",
                token.token_id, token.permissions
            );
        }
    }
    match &w.revoked_at {
        Some(at) => println!("RevokeToken: revoked at {at}"),
        None => println!("RevokeToken: revoked"),
    }
    println!("ValidateToken (revoked token): {:?}", w.after_revoke);
}
