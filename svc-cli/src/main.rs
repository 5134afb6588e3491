//! `svc`: see [`svc_cli`].

const USAGE: &str = "\
usage: svc dev
       svc token create | list | revoke [OPTIONS] [--json]
       svc usage [--by token|agent|model|day] [--since DURATION|RFC3339] [OPTIONS] [--json]

  dev    the auth server (embedded store) and the gateway in one process, for development
  token  create, list and revoke tokens on an auth server (svc token --help)
  usage  the org's usage totals from the ledger (svc usage --help)

Configuration comes from the environment (SVC_PORT, SVC_DEV_DATA_DIR, ...).";

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    let code = match args.first().map(String::as_str) {
        Some("dev") => svc_cli::dev::main(&args[1..]).await,
        Some("token") => svc_cli::token::main(&args[1..]).await,
        Some("usage") => svc_cli::usage::main(&args[1..]).await,
        Some("help" | "-h" | "--help") => {
            println!("{USAGE}");
            0
        }
        Some(other) => {
            eprintln!("error: unknown command {other:?} (see svc --help)");
            2
        }
        None => {
            eprintln!("error: a command is required (see svc --help)");
            2
        }
    };
    std::process::exit(code);
}
