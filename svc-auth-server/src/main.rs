//! `svc-auth-server`: see [`svc_auth_server::cli`].

/// mimalloc: with the system allocator, malloc and free took about 7% of the gateway's CPU at
/// 32 connections (`svc-harness` under `perf`), for a request's many small, short-lived
/// allocations.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    svc_auth_server::cli::main()
}
