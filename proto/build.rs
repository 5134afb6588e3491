//! Compiles `svc/auth/v1/auth.proto` with protox, a pure-Rust protobuf compiler, so building
//! needs no system `protoc`.

use std::{env, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "svc/auth/v1/auth.proto";
    println!("cargo:rerun-if-changed={proto}");

    let descriptors = protox::compile([proto], ["."])?;
    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    let descriptor_path = out_dir.join("svc_auth_v1_descriptor.bin");
    std::fs::write(
        &descriptor_path,
        prost::Message::encode_to_vec(&descriptors),
    )?;

    tonic_prost_build::configure()
        .build_client(env::var_os("CARGO_FEATURE_CLIENT").is_some())
        .build_server(env::var_os("CARGO_FEATURE_SERVER").is_some())
        .build_transport(false)
        .compile_fds(descriptors)?;
    Ok(())
}
