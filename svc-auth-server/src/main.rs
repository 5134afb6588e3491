//! `svc-auth-server`: see [`svc_auth_server::cli`].

fn main() -> std::process::ExitCode {
    svc_auth_server::cli::main()
}
