//! `svc`: see [`svc_cli`].

#[tokio::main]
async fn main() {
    let cli = svc_cli::cli::parse();
    std::process::exit(svc_cli::cli::run(cli).await);
}
