//! svc-tower's integration tests, one binary: the gRPC client against a fake auth service (in
//! plaintext and over mutual TLS), the Redis stores through a cluster failover, and the
//! crate's own shape (its features and its module graph). The backend modules compile with
//! their feature. `cargo test -p svc-tower --all-features --test it -- MODULE::` runs one.

mod feature_hygiene;
mod grpc_client;
mod grpc_tls;
mod module_graph;
mod redis_cluster_failover;
