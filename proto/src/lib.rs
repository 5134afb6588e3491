//! Generated types for `svc.auth.v1.AuthService`, the contract between the svc identity plane
//! and anything that validates tokens against it.
//!
//! The client (feature `client`) is what `svc-tower`'s gRPC validators use; the server (feature
//! `server`) is what `svc-auth-server` implements.

#![allow(unreachable_pub, clippy::all)]

/// `svc.auth.v1`: messages, the `PermissionBit` enum and the `AuthService` client and server.
pub mod v1 {
    tonic::include_proto!("svc.auth.v1");
}

/// The encoded `FileDescriptorSet` of the proto, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    tonic::include_file_descriptor_set!("svc_auth_v1_descriptor");
