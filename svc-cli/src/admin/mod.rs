//! What every admin command shares: the configuration, one client carrying the admin token,
//! paging, and how a result becomes output and an exit code.
//!
//! Exit codes: 0 done, 1 the auth server refused or could not be reached
//! (`error: <RPC>: <status>`), 2 bad usage or configuration (one line on stderr).

mod config;
mod pages;

pub use config::{AdminConfig, CALL_TIMEOUT, SVC_ADMIN_TOKEN, ServerArgs};
pub(crate) use pages::{PagedRequest, PagedResponse};

use svc_proto::v1::ValidateTokenRequest;
use svc_proto::v1::auth_service_client::AuthServiceClient;
use svc_runtime::Secret;
use svc_runtime::config::EXIT_CONFIG;
use tonic::metadata::AsciiMetadataValue;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

use crate::args::PageArgs;
use crate::output::status_line;

/// Why a command did not complete.
#[derive(Debug)]
pub enum Failure {
    /// The configuration or an argument could not be used (a TLS file, the admin token's
    /// bytes, a time out of range).
    Config(String),
    /// The named call failed.
    Call(&'static str, Status),
}

/// Runs one admin command with the server `args` name (and the rest of the environment),
/// prints its output or its failure, and says how to exit.
pub async fn main(
    args: &ServerArgs,
    command: impl AsyncFnOnce(&Admin) -> Result<String, Failure>,
) -> i32 {
    let result = async {
        let environment = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
        let config = AdminConfig::from_vars(&args.vars(environment))
            .map_err(|error| Failure::Config(error.to_string()))?;
        command(&Admin::connect(&config)?).await
    };
    exit_code(result.await)
}

/// Prints what a command produced, or its failure as one line, and says how to exit.
fn exit_code(result: Result<String, Failure>) -> i32 {
    match result {
        Ok(text) => {
            print!("{text}");
            0
        }
        Err(Failure::Config(line)) => {
            eprintln!("error: {line}");
            i32::from(EXIT_CONFIG)
        }
        Err(Failure::Call(rpc, status)) => {
            eprintln!("error: {rpc}: {}", status_line(&status));
            1
        }
    }
}

/// A client of the configured auth server whose calls carry the admin token.
pub struct Admin {
    client: AuthServiceClient<Channel>,
    bearer: AsciiMetadataValue,
    token: Secret,
}

impl Admin {
    /// A lazily connecting client of the configured auth server.
    pub fn connect(config: &AdminConfig) -> Result<Admin, Failure> {
        let channel = config
            .auth
            .channel()
            .map_err(|error| Failure::Config(error.to_string()))?;
        let mut bearer =
            AsciiMetadataValue::try_from(format!("Bearer {}", config.admin_token.expose()))
                .map_err(|_| {
                    Failure::Config(format!("{SVC_ADMIN_TOKEN}: not a valid header value"))
                })?;
        bearer.set_sensitive(true);
        Ok(Admin {
            client: AuthServiceClient::new(channel),
            bearer,
            token: config.admin_token.clone(),
        })
    }

    /// Calls `rpc` with `message`, the admin token and the deadline: `send` names the client
    /// method, as in `async |mut client, request| client.get_agent(request).await`.
    pub(crate) async fn call<T, R>(
        &self,
        rpc: &'static str,
        message: T,
        send: impl AsyncFnOnce(AuthServiceClient<Channel>, Request<T>) -> Result<Response<R>, Status>,
    ) -> Result<R, Failure> {
        let mut request = Request::new(message);
        request.set_timeout(CALL_TIMEOUT);
        request
            .metadata_mut()
            .insert("authorization", self.bearer.clone());
        send(self.client.clone(), request)
            .await
            .map(Response::into_inner)
            .map_err(|status| Failure::Call(rpc, status))
    }

    /// Every page of a listing (up to `most` items), or the one page `paging` asks for; the
    /// cursor returned is where the reading stopped, if more remain.
    pub(crate) async fn list<Q, R>(
        &self,
        rpc: &'static str,
        paging: &PageArgs,
        most: usize,
        request: Q,
        send: impl AsyncFn(AuthServiceClient<Channel>, Request<Q>) -> Result<Response<R>, Status>,
    ) -> Result<(Vec<R::Item>, Option<String>), Failure>
    where
        Q: PagedRequest,
        R: PagedResponse,
    {
        let page_size = paging.page_size.unwrap_or(0);
        pages::pages(rpc, paging, most, |page_token| {
            let request = request.clone().at_page(page_size, page_token);
            let send = &send;
            async move { Ok(self.call(rpc, request, send).await?.into_page()) }
        })
        .await
    }

    /// The admin token's own org, from ValidateToken (which takes the token in its body).
    pub(crate) async fn org(&self) -> Result<String, Failure> {
        let mut request = Request::new(ValidateTokenRequest {
            access_token: self.token.expose().to_owned(),
            agent_id: None,
        });
        request.set_timeout(CALL_TIMEOUT);
        let validated = self
            .client
            .clone()
            .validate_token(request)
            .await
            .map_err(|status| Failure::Call("ValidateToken", status))?;
        Ok(validated.into_inner().org_id)
    }
}
