//! `svc`: see [`svc_cli`].

/// mimalloc: with the system allocator, malloc and free took about 7% of the gateway's CPU at
/// 32 connections (`svc-harness` under `perf`), for a request's many small, short-lived
/// allocations.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    let cli = svc_cli::cli::parse();
    std::process::exit(svc_cli::cli::run(cli).await);
}
