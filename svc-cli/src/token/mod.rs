//! `svc token create | list | revoke`: token administration against any auth server.
//!
//! The auth server is reached as the gateway reaches it ([`svc_runtime::auth_client`]:
//! `SVC_AUTH_GRPC_ADDR` and the `SVC_AUTH_GRPC_TLS_*` files), with the admin PAT from
//! `SVC_ADMIN_TOKEN` in every call's `authorization` metadata. `create` without `--org-id`
//! asks ValidateToken which org the admin token belongs to. Output is lines for a person, or
//! one JSON document with `--json`; `create` prints the new token's plaintext once, and it is
//! never shown again.
//!
//! Exit codes: 0 done, 1 the auth server refused or could not be reached, 2 bad usage or
//! configuration (one line on stderr).

pub(crate) mod args;
pub(crate) mod output;
mod permissions;

use std::future::Future;
use std::time::{Duration, SystemTime};

use prost_types::Timestamp;
use svc_proto::v1::auth_service_client::AuthServiceClient;
use svc_proto::v1::{
    CreateTokenRequest, ListTokensRequest, RevokeTokenRequest, TokenMetadata, ValidateTokenRequest,
};
use svc_runtime::Secret;
use svc_runtime::auth_client::AuthClientConfig;
use svc_runtime::config::{ConfigError, EXIT_CONFIG, Environment, Vars};
use tonic::metadata::AsciiMetadataValue;
use tonic::transport::Channel;
use tonic::{Request, Status};

pub use args::{CreateArgs, Expiry, Format, TokenCommand, parse};

/// The admin PAT every call carries.
pub const SVC_ADMIN_TOKEN: &str = "SVC_ADMIN_TOKEN";
/// The deadline of one call: CreateToken hashes a secret with Argon2id on the server.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The most pages `list` reads before it stops trusting the cursor.
const MAX_PAGES: usize = 10_000;

const USAGE: &str = "\
usage: svc token create [--permissions chat,embeddings,token_create,token_revoke,token_list,usage_read|BITS]
                        [--org-id UUID] [--agent-id UUID] [--user-id UUID]
                        [--expires-in DURATION (90m, 720h) | --expires-at RFC3339] [--name NAME]
                        [--rpm N] [--tpm N] [--json]
       svc token list [--page-size N] [--page-token CURSOR] [--json]
       svc token revoke TOKEN_ID [--json]

Needs SVC_AUTH_GRPC_ADDR and SVC_ADMIN_TOKEN (and SVC_AUTH_GRPC_TLS_CA, _CERT, _KEY for TLS).
create defaults to --permissions chat, the admin token's org and no expiry; --rpm and --tpm
give the token its own requests and tokens per minute (at most the admin token's); list without
--page-size or --page-token prints every page.";

/// How `svc token` reaches the auth server.
#[derive(Debug, Clone)]
pub struct TokenConfig {
    /// The address and TLS files, as the gateway reads them.
    pub auth: AuthClientConfig,
    /// `SVC_ADMIN_TOKEN`.
    pub admin_token: Secret,
}

impl TokenConfig {
    /// Reads the variables; production refuses plaintext as the gateway does.
    pub fn from_vars(vars: &Vars) -> Result<TokenConfig, ConfigError> {
        let environment = vars.parse_or("SVC_ENV", Environment::default(), Environment::parse)?;
        let production = environment == Environment::Production;
        let auth = AuthClientConfig::from_vars(vars, production, CALL_TIMEOUT)?;
        let admin_token = vars.required(SVC_ADMIN_TOKEN)?;
        if !admin_token.starts_with("svc_pat_") {
            return Err(ConfigError::new(SVC_ADMIN_TOKEN, "is not a svc_pat_ token"));
        }
        Ok(TokenConfig {
            auth,
            admin_token: Secret::new(admin_token),
        })
    }
}

/// Runs `svc token` with the arguments after `token`; returns the exit code.
pub async fn main(args: &[String]) -> i32 {
    let (command, format) = match parse(args) {
        Ok(parsed) => parsed,
        Err(problem) => {
            eprintln!("error: {problem} (see svc token --help)");
            return i32::from(EXIT_CONFIG);
        }
    };
    if command == TokenCommand::Help {
        println!("{USAGE}");
        return 0;
    }
    let config = match TokenConfig::from_vars(&Vars::from_env()) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("error: {error}");
            return i32::from(EXIT_CONFIG);
        }
    };
    exit_code(run(&config, command, format).await)
}

/// Prints what a command produced, or its failure as one line, and says how to exit.
pub(crate) fn exit_code(result: Result<String, Failure>) -> i32 {
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
            eprintln!("error: {rpc}: {}", output::status_line(&status));
            1
        }
    }
}

/// Why a command did not complete.
#[derive(Debug)]
pub enum Failure {
    /// The configuration could not be used (a TLS file, the admin token's bytes).
    Config(String),
    /// The named call failed.
    Call(&'static str, Status),
}

/// Runs one command and returns what to print.
pub async fn run(
    config: &TokenConfig,
    command: TokenCommand,
    format: Format,
) -> Result<String, Failure> {
    let admin = Admin::connect(config)?;
    match command {
        TokenCommand::Create(args) => {
            let created = admin.create(args).await?;
            Ok(output::created(&created, format))
        }
        TokenCommand::List {
            page_size,
            page_token,
        } => {
            let (tokens, next) = admin.list(page_size, page_token).await?;
            Ok(output::listed(&tokens, next.as_deref(), format))
        }
        TokenCommand::Revoke(token_id) => {
            let request = RevokeTokenRequest {
                token_id: token_id.to_string(),
            };
            let revoked = admin
                .client
                .clone()
                .revoke_token(admin.request(request))
                .await
                .map_err(|status| Failure::Call("RevokeToken", status))?
                .into_inner();
            Ok(output::revoked(&revoked, format))
        }
        TokenCommand::Help => Ok(format!("{USAGE}\n")),
    }
}

/// A token just created, with the org it was created in.
#[derive(Debug)]
pub struct Created {
    /// The org.
    pub org_id: String,
    /// CreateToken's answer, plaintext included.
    pub response: svc_proto::v1::CreateTokenResponse,
}

pub(crate) struct Admin {
    pub(crate) client: AuthServiceClient<Channel>,
    bearer: AsciiMetadataValue,
    token: Secret,
}

impl Admin {
    /// A client of the configured auth server carrying the admin token.
    pub(crate) fn connect(config: &TokenConfig) -> Result<Admin, Failure> {
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

    pub(crate) fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        request.set_timeout(CALL_TIMEOUT);
        request
            .metadata_mut()
            .insert("authorization", self.bearer.clone());
        request
    }

    async fn create(&self, args: CreateArgs) -> Result<Created, Failure> {
        let org_id = match args.org_id {
            Some(org_id) => org_id.to_string(),
            None => self.admin_org().await?,
        };
        let expires_at = match args.expiry {
            Expiry::Never => None,
            Expiry::In(duration) => Some(Timestamp::from(SystemTime::now() + duration)),
            Expiry::At(at) => Some(Timestamp {
                seconds: at.timestamp(),
                nanos: i32::try_from(at.timestamp_subsec_nanos()).unwrap_or(0),
            }),
        };
        let request = CreateTokenRequest {
            org_id: org_id.clone(),
            user_id: args.user_id.map(|id| id.to_string()),
            agent_id: args.agent_id.map(|id| id.to_string()),
            permissions: args.permissions.bits(),
            expires_at,
            name: args.name,
            rpm_limit: args.rpm,
            tpm_limit: args.tpm,
        };
        let response = self
            .client
            .clone()
            .create_token(self.request(request))
            .await
            .map_err(|status| Failure::Call("CreateToken", status))?
            .into_inner();
        Ok(Created { org_id, response })
    }

    /// The admin token's own org, from ValidateToken.
    async fn admin_org(&self) -> Result<String, Failure> {
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

    /// One page when either paging option is given, else every page.
    async fn list(
        &self,
        page_size: Option<i32>,
        page_token: Option<String>,
    ) -> Result<(Vec<TokenMetadata>, Option<String>), Failure> {
        pages(
            "ListTokens",
            page_size,
            page_token,
            |page_token| async move {
                let request = ListTokensRequest {
                    page_size: page_size.unwrap_or(0),
                    page_token,
                };
                let page = self
                    .client
                    .clone()
                    .list_tokens(self.request(request))
                    .await
                    .map_err(|status| Failure::Call("ListTokens", status))?
                    .into_inner();
                Ok((page.tokens, page.next_page_token))
            },
        )
        .await
    }
}

/// One page when either paging option is given (and the next page's cursor, if any), else
/// every page, following each `next_page_token` from `fetch`.
pub(crate) async fn pages<T, F, Fut>(
    rpc: &'static str,
    page_size: Option<i32>,
    page_token: Option<String>,
    mut fetch: F,
) -> Result<(Vec<T>, Option<String>), Failure>
where
    F: FnMut(String) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, String), Failure>>,
{
    let one_page = page_size.is_some() || page_token.is_some();
    let mut cursor = page_token.unwrap_or_default();
    let mut items = Vec::new();
    for _ in 0..MAX_PAGES {
        let (page, next) = fetch(cursor).await?;
        items.extend(page);
        if one_page {
            return Ok((items, Some(next).filter(|next| !next.is_empty())));
        }
        if next.is_empty() {
            return Ok((items, None));
        }
        cursor = next;
    }
    Err(Failure::Call(
        rpc,
        Status::internal("the cursor never ended"),
    ))
}
