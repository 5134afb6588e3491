//! How the admin commands reach the auth server: as the gateway reaches it
//! ([`svc_runtime::auth_client`]), with the admin PAT from `SVC_ADMIN_TOKEN`.
//!
//! The address, the token and the TLS files are clap arguments read from their variables, so
//! `--help` lists them (the token's value never shows). The rest of what the auth client reads
//! (`SVC_ENV`, `SVC_GRPC_ALLOW_PLAINTEXT`, ...) comes from the environment as it is; both go
//! through [`AdminConfig::from_vars`], the one place that validates them.

use std::time::Duration;

use clap::Args;
use svc_runtime::Secret;
use svc_runtime::auth_client::{
    AuthClientConfig, SVC_AUTH_GRPC_ADDR, SVC_AUTH_GRPC_TLS_CA, SVC_AUTH_GRPC_TLS_CERT,
    SVC_AUTH_GRPC_TLS_KEY,
};
use svc_runtime::config::{ConfigError, Environment, Vars};

/// The admin PAT every call carries.
pub const SVC_ADMIN_TOKEN: &str = "SVC_ADMIN_TOKEN";
/// The deadline of one call: CreateToken hashes a secret with Argon2id on the server.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the auth server is and the token to show it, on every admin command.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Auth server")]
pub struct ServerArgs {
    /// The auth server's gRPC address: host:port or http(s)://host:port, or several
    /// comma-separated (with SVC_ENV=production, https:// unless SVC_GRPC_ALLOW_PLAINTEXT=true)
    #[arg(long, global = true, value_name = "ADDR", env = SVC_AUTH_GRPC_ADDR)]
    auth_grpc_addr: Option<String>,
    /// The admin token (svc_pat_...) every call carries; prefer the variable, since arguments
    /// are visible to other users of the machine
    #[arg(
        long,
        global = true,
        value_name = "PAT",
        env = SVC_ADMIN_TOKEN,
        hide_env_values = true,
        value_parser = secret
    )]
    admin_token: Option<Secret>,
    /// CA of the auth server's certificate (with an https:// address)
    #[arg(long, global = true, value_name = "FILE", env = SVC_AUTH_GRPC_TLS_CA)]
    auth_grpc_tls_ca: Option<String>,
    /// Client certificate, for mutual TLS
    #[arg(long, global = true, value_name = "FILE", env = SVC_AUTH_GRPC_TLS_CERT)]
    auth_grpc_tls_cert: Option<String>,
    /// Client key, for mutual TLS
    #[arg(long, global = true, value_name = "FILE", env = SVC_AUTH_GRPC_TLS_KEY)]
    auth_grpc_tls_key: Option<String>,
}

fn secret(value: &str) -> Result<Secret, String> {
    Ok(Secret::new(value))
}

impl ServerArgs {
    /// `environment` with these arguments in place of their variables.
    pub fn vars(&self, environment: impl IntoIterator<Item = (String, String)>) -> Vars {
        let given = [
            (SVC_AUTH_GRPC_ADDR, self.auth_grpc_addr.clone()),
            (
                SVC_ADMIN_TOKEN,
                self.admin_token
                    .as_ref()
                    .map(|token| token.expose().to_owned()),
            ),
            (SVC_AUTH_GRPC_TLS_CA, self.auth_grpc_tls_ca.clone()),
            (SVC_AUTH_GRPC_TLS_CERT, self.auth_grpc_tls_cert.clone()),
            (SVC_AUTH_GRPC_TLS_KEY, self.auth_grpc_tls_key.clone()),
        ];
        let given = given
            .into_iter()
            .filter_map(|(name, value)| Some((name.to_owned(), value?)));
        // Later pairs win: an argument over its variable.
        Vars::from_pairs(environment.into_iter().chain(given))
    }
}

/// How an admin command reaches the auth server, validated.
#[derive(Debug, Clone)]
pub struct AdminConfig {
    /// The address and TLS files, as the gateway reads them.
    pub auth: AuthClientConfig,
    /// `SVC_ADMIN_TOKEN`.
    pub admin_token: Secret,
}

impl AdminConfig {
    /// Reads the variables; production refuses plaintext as the gateway does.
    pub fn from_vars(vars: &Vars) -> Result<AdminConfig, ConfigError> {
        let environment = vars.parse_or("SVC_ENV", Environment::default(), Environment::parse)?;
        let production = environment == Environment::Production;
        let auth = AuthClientConfig::from_vars(vars, production, CALL_TIMEOUT)?;
        let admin_token = vars.required(SVC_ADMIN_TOKEN)?;
        if !admin_token.starts_with("svc_pat_") {
            return Err(ConfigError::new(SVC_ADMIN_TOKEN, "is not a svc_pat_ token"));
        }
        Ok(AdminConfig {
            auth,
            admin_token: Secret::new(admin_token),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn arguments_take_the_place_of_their_variables() {
        let args = ServerArgs {
            auth_grpc_addr: Some("127.0.0.1:9091".to_owned()),
            ..ServerArgs::default()
        };
        let environment = pairs(&[
            (SVC_AUTH_GRPC_ADDR, "10.0.0.1:1"),
            (SVC_ADMIN_TOKEN, "svc_pat_x_y"),
        ]);
        let config = AdminConfig::from_vars(&args.vars(environment)).unwrap();
        assert_eq!(config.auth.endpoints, ["http://127.0.0.1:9091"]);
        assert_eq!(config.admin_token.expose(), "svc_pat_x_y");
    }

    #[test]
    fn the_token_must_be_a_pat_and_never_shows() {
        let vars = Vars::from_pairs(pairs(&[
            (SVC_AUTH_GRPC_ADDR, "127.0.0.1:9091"),
            (SVC_ADMIN_TOKEN, "hunter2"),
        ]));
        let error = AdminConfig::from_vars(&vars).unwrap_err();
        assert_eq!(error.variable, SVC_ADMIN_TOKEN);
        assert!(!error.to_string().contains("hunter2"));
        let args = ServerArgs {
            admin_token: Some(Secret::new("svc_pat_a_b")),
            ..ServerArgs::default()
        };
        assert!(!format!("{args:?}").contains("svc_pat_a_b"));
    }

    #[test]
    fn production_refuses_plaintext() {
        let vars = Vars::from_pairs(pairs(&[
            ("SVC_ENV", "production"),
            (SVC_AUTH_GRPC_ADDR, "127.0.0.1:9091"),
            (SVC_ADMIN_TOKEN, "svc_pat_x_y"),
        ]));
        let error = AdminConfig::from_vars(&vars).unwrap_err();
        assert_eq!(error.variable, SVC_AUTH_GRPC_ADDR);
    }
}
