//! `svc-harness`: the real binaries as separate processes, measured from outside.
//!
//! It starts a fake OpenAI-compatible upstream (this binary, `svc-harness upstream`), a fresh
//! PostgreSQL database on the local server, a key prefix on the local Redis, the
//! `svc-auth-server` binary (migrated and seeded through its own subcommands) and the
//! `svc-gateway` binary in live mode on the upstream. Then, for the same small chat completion
//! straight to the upstream and through the gateway:
//!
//! - closed loop at 1 and at 32 connections (each with one request in flight), with the CPU
//!   seconds each process used per request (`/proc/<pid>/stat`: the gateway, the auth server,
//!   the upstream, every PostgreSQL process, the Redis server) and the gateway's resident
//!   memory before and after; the Redis commands each request caused (`INFO commandstats`
//!   before and after); and, in a phase of its own at the same concurrency, the system calls
//!   per request of the gateway and the auth server (`strace -c -f`, else `perf trace -s`,
//!   attached for that phase only, since tracing slows every call);
//! - open loop at fixed rates (latency from each request's scheduled start, so a stall counts
//!   for every request queued behind it), up the rate list until the added p99 reaches 5 ms:
//!   the highest rate under it is the figure;
//! - a flood: the real token at one connection, alone and then while 16 connections send
//!   wrong secrets on its id and well-formed tokens with random ids as fast as they are
//!   answered (the gateway's per-address limit on failed authentications is off, so the flood
//!   reaches the auth server): its p99 each way;
//! - budgets: the added p50 and p99 at one connection without a money budget and then with an
//!   org budget, in the same run, and the Redis commands per call each way. The model has a
//!   price (the gateway reads its registry from a providers file in the log directory), so
//!   under the budget each call reserves its worst-case cost and settles what it spent.
//!
//! Everything listens on 127.0.0.1; everything it started is stopped, and the database and the
//! Redis keys are removed, when it ends.

mod budget;
pub mod open_loop;
pub mod procs;
pub mod redis_stats;
pub(crate) mod run;
pub mod syscalls;

pub use run::{
    ADDED_P99_BUDGET, DEFAULT_POSTGRES_URL, DEFAULT_REDIS_URL, HarnessConfig, Servers,
    check_bin_dir, run, serve_upstream,
};
