//! ValidateToken over loopback gRPC against the real PostgreSQL.
//!
//! `warm`: the same token again and again; the server reads the token row and compares a
//! remembered digest, no Argon2. `cold`: a token the server has never seen each iteration, so
//! every call runs Argon2id (m=19456 KiB, t=2, p=1). Target: warm p99 <= 1 ms.
//!
//! Run with `cargo bench -p svc-benches --bench validate_token` (PostgreSQL on 127.0.0.1:5432,
//! or `SVC_TEST_POSTGRES_URL`). Besides criterion's means, it prints p50/p99 from a plain
//! per-call loop, for comparing with the README.

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use svc_auth_server::config::Config;
use svc_auth_server::pat::Pat;
use svc_auth_server::seed::{self, SeedOptions};
use svc_auth_server::store::{NewToken, PgStore, Store};
use svc_auth_server::verify::Hasher;
use svc_auth_server::{RunningServer, Server};
use svc_proto::v1::ValidateTokenRequest;
use svc_proto::v1::auth_service_client::AuthServiceClient;
use svc_testkit::TestDb;
use tokio::runtime::Runtime;
use tonic::transport::Channel;
use uuid::Uuid;

const WARM_SAMPLES: usize = 5_000;
const COLD_SAMPLES: usize = 200;

struct Bench {
    _db: TestDb,
    _server: RunningServer,
    config: Config,
    org_id: Uuid,
    chat_token: String,
    client: AuthServiceClient<Channel>,
}

async fn setup() -> Bench {
    let db = TestDb::create().await;
    let config = Config::local(db.url());
    svc_auth_server::migrate::run(db.url(), &config.pool)
        .await
        .expect("migrate");
    let server = Server::start(config.clone()).await.expect("start");
    let seeded = seed::run_with_config(&config, &SeedOptions::default())
        .await
        .expect("seed");
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", server.grpc_addr))
        .expect("endpoint")
        .tcp_nodelay(true)
        .connect()
        .await
        .expect("connect");
    Bench {
        _db: db,
        _server: server,
        config,
        org_id: seeded.org_id,
        chat_token: seeded.chat_token,
        client: AuthServiceClient::new(channel),
    }
}

/// `n` tokens the server has never validated, hashed in parallel outside any timing.
async fn fresh_tokens(bench: &Bench, n: usize) -> Vec<String> {
    let store = PgStore::connect_lazy(bench.config.postgres_dsn.expose(), &bench.config.pool)
        .expect("store");
    let hasher = Hasher::new(bench.config.argon2, bench.config.hash_concurrency).expect("hasher");
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..n {
        let (store, hasher, org_id) = (store.clone(), hasher.clone(), bench.org_id);
        tasks.spawn(async move {
            let pat = Pat::generate(Uuid::new_v4());
            let secret_hash = hasher.hash(pat.secret()).await.expect("hash");
            store
                .create_token(
                    org_id,
                    NewToken {
                        token_id: pat.token_id(),
                        user_id: None,
                        agent_id: None,
                        permissions: svc_auth_server::seed::CHAT_PERMISSIONS,
                        name: None,
                        secret_hash,
                        expires_at: None,
                        issuer_token_id: None,
                        limits: Default::default(),
                    },
                    None,
                )
                .await
                .expect("store token");
            pat.expose()
        });
    }
    tasks.join_all().await
}

async fn validate(client: &mut AuthServiceClient<Channel>, token: &str) {
    client
        .validate_token(ValidateTokenRequest {
            access_token: token.to_owned(),
            agent_id: None,
        })
        .await
        .expect("a valid token");
}

fn percentiles(label: &str, mut samples: Vec<Duration>) {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "validate_token/{label}: p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms, max {:.3} ms (n={})",
        ms(at(0.50)),
        ms(at(0.90)),
        ms(at(0.99)),
        ms(samples[samples.len() - 1]),
        samples.len()
    );
}

fn validate_token(c: &mut Criterion) {
    let rt = Runtime::new().expect("runtime");
    let bench = rt.block_on(setup());
    // Under `cargo test --benches` each bench runs once: keep the percentile loops short too.
    let full_run = std::env::args().any(|arg| arg == "--bench");
    let (warm_n, cold_n) = if full_run {
        (WARM_SAMPLES, COLD_SAMPLES)
    } else {
        (20, 2)
    };

    let mut group = c.benchmark_group("validate_token");
    group.bench_function("warm", |b| {
        let mut client = bench.client.clone();
        rt.block_on(validate(&mut client, &bench.chat_token));
        b.to_async(&rt).iter(|| {
            let mut client = client.clone();
            let token = bench.chat_token.as_str();
            async move { validate(&mut client, token).await }
        });
    });
    // Per-call percentiles: criterion reports means only.
    rt.block_on(async {
        let mut client = bench.client.clone();
        let mut warm = Vec::with_capacity(warm_n);
        for _ in 0..warm_n {
            let started = Instant::now();
            validate(&mut client, &bench.chat_token).await;
            warm.push(started.elapsed());
        }
        percentiles("warm", warm);
    });

    group.sample_size(10);
    group.measurement_time(Duration::from_secs(3));
    group.bench_function("cold", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let tokens = fresh_tokens(&bench, iters as usize).await;
                let mut client = bench.client.clone();
                let started = Instant::now();
                for token in &tokens {
                    validate(&mut client, token).await;
                }
                started.elapsed()
            })
        });
    });
    rt.block_on(async {
        let mut client = bench.client.clone();
        let tokens = fresh_tokens(&bench, cold_n).await;
        let mut cold = Vec::with_capacity(cold_n);
        for token in &tokens {
            let started = Instant::now();
            validate(&mut client, token).await;
            cold.push(started.elapsed());
        }
        percentiles("cold", cold);
    });
    group.finish();
}

criterion_group!(benches, validate_token);
criterion_main!(benches);
