//! One harness run, start to stop.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderValue};
use svc_auth_server::pat::Pat;
use svc_testkit::try_free_port as free_port;
use uuid::Uuid;

use super::open_loop;
use super::procs::{CpuMark, Proc, pids_named, rss_kib, run_once, wait_until};
use super::redis_stats::CommandStats;
use super::syscalls::{Counts, Tracer};
use crate::load::client::{self, Plan, Target};
use crate::load::postgres::FreshDatabase;
use crate::load::redis_keys::RedisKeys;
use crate::load::upstream::{MODEL, PROVIDER_KEY, Upstream};
use crate::load::{LoadError, PhaseStats};

/// What the added p99 must stay under for a rate to count.
pub const ADDED_P99_BUDGET: Duration = Duration::from_millis(5);

/// How a run is made.
#[derive(Debug, Clone)]
pub struct HarnessConfig {
    /// Where `svc-auth-server` and `svc-gateway` are (a release build's `target/release`).
    pub bin_dir: PathBuf,
    /// This binary, started again as the upstream.
    pub harness_bin: PathBuf,
    /// A PostgreSQL maintenance database on this machine.
    pub postgres_url: String,
    /// The local Redis.
    pub redis_url: String,
    /// Requests per closed-loop phase and target.
    pub requests: usize,
    /// Seconds per open-loop phase and target.
    pub seconds: u64,
    /// Open-loop rates, in requests per second, lowest first.
    pub rates: Vec<u32>,
    /// Where the services' logs go.
    pub log_dir: PathBuf,
    /// Variables set for both services on top of the harness's own (`--env NAME=VALUE`), to
    /// measure a setting.
    pub service_env: Vec<(String, String)>,
    /// Requests of the phase, after each closed-loop one, whose system calls are counted (0:
    /// none).
    pub syscall_requests: usize,
    /// Only the closed-loop phases: no open loop, no flood.
    pub closed_only: bool,
}

/// Serves the fake upstream on `port` until killed.
pub async fn serve_upstream(port: u16) -> std::io::Result<()> {
    let upstream = Upstream::start_on(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).await?;
    std::future::pending::<()>().await;
    drop(upstream);
    Ok(())
}

pub(crate) fn listening(port: u16) -> bool {
    std::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok()
}

/// The processes whose CPU a phase is charged with.
struct Group {
    gateway: u32,
    auth: u32,
    upstream: u32,
    redis: Option<u32>,
}

impl Group {
    fn all(&self) -> Vec<(&'static str, Vec<u32>)> {
        vec![
            ("gateway", vec![self.gateway]),
            ("auth server", vec![self.auth]),
            ("PostgreSQL", pids_named("postgres")),
            ("Redis", self.redis.into_iter().collect()),
            ("upstream", vec![self.upstream]),
        ]
    }
}

/// A closed-loop phase through the gateway with its CPU bill.
struct Costed {
    direct: PhaseStats,
    gateway: PhaseStats,
    cpu_ms_per_request: Vec<(&'static str, f64)>,
    /// Redis commands the timed phase caused, when Redis answered `INFO`.
    redis: Option<CommandStats>,
    /// The gateway's and the auth server's system calls in a traced phase of their own.
    syscalls: Syscalls,
}

/// What the traced phase found.
enum Syscalls {
    /// `--syscall-requests 0`.
    Skipped,
    /// Neither strace nor perf is on `PATH`.
    NoTracer,
    /// Each service's counts, or why there are none, over `requests`.
    Counted {
        tracer: Tracer,
        requests: usize,
        per_service: Vec<(&'static str, Result<Counts, String>)>,
    },
}

/// Runs everything and prints the report; `Err` names what could not start.
pub async fn run(config: &HarnessConfig) -> Result<(), String> {
    with_scratch(
        &config.postgres_url,
        &config.redis_url,
        |dsn: String, prefix: String| async move { measure(config, &dsn, &prefix).await },
    )
    .await
}

/// The servers a run creates its scratch database and Redis keys on: `--postgres-url` or
/// `SVC_TEST_POSTGRES_URL`, `--redis-url` or `REDIS_URL`.
#[derive(Debug, Clone, clap::Args)]
pub struct Servers {
    /// The PostgreSQL maintenance database (a fresh database is created beside it)
    #[arg(long, env = "SVC_TEST_POSTGRES_URL", value_name = "URL", hide_env_values = true,
          default_value = DEFAULT_POSTGRES_URL)]
    pub postgres_url: String,
    /// The Redis server (keys under a fresh prefix)
    #[arg(long, env = "REDIS_URL", value_name = "URL", hide_env_values = true,
          default_value = DEFAULT_REDIS_URL)]
    pub redis_url: String,
}

/// The PostgreSQL maintenance database when `SVC_TEST_POSTGRES_URL` is unset.
pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";
/// The Redis server when `REDIS_URL` is unset.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";

/// Runs `body` with the URL of a fresh database and a fresh Redis key prefix, and removes both
/// after it, whatever it returned, and on Ctrl-C or SIGTERM, which end `body` early (dropping
/// it kills the processes it started).
pub(crate) async fn with_scratch<T, F, Fut>(
    postgres_url: &str,
    redis_url: &str,
    body: F,
) -> Result<T, String>
where
    F: FnOnce(String, String) -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let database = FreshDatabase::create(postgres_url)
        .await
        .map_err(|e| e.to_string())?;
    let keys = RedisKeys::open(redis_url)
        .await
        .map_err(|e| e.to_string())?;
    let outcome = tokio::select! {
        biased;
        () = svc_runtime::shutdown::shutdown_signal() => Err(LoadError::Interrupted.to_string()),
        outcome = body(database.url().to_owned(), keys.prefix().to_owned()) => outcome,
    };
    let _ = keys.delete_all().await;
    let _ = database.drop_now().await;
    outcome
}

/// Where the gateway reads the upstream's key.
const PROVIDER_KEY_VAR: &str = "SVC_HARNESS_PROVIDER_KEY";

/// The gateway's registry: the upstream, and its model at a price, so that under a budget each
/// call reserves and settles money as a priced model's calls do (an unpriced one reserves
/// nothing, and its reservation only reads the counter).
fn providers_file(upstream_port: u16) -> String {
    format!(
        "[[providers]]\nname = \"upstream\"\nkind = \"openai\"\n\
         base_url = \"http://127.0.0.1:{upstream_port}/v1\"\napi_key_env = \"{PROVIDER_KEY_VAR}\"\n\n\
         [[models]]\nname = \"{MODEL}\"\ntargets = [\"upstream\"]\nprice = {{ input = 1, output = 2 }}\n"
    )
}

async fn measure(config: &HarnessConfig, dsn: &str, prefix: &str) -> Result<(), String> {
    let auth_bin = config.bin_dir.join("svc-auth-server");
    let gateway_bin = config.bin_dir.join("svc-gateway");
    let log = |name: &str| config.log_dir.join(format!("{name}.log"));
    let quiet = ("SVC_LOG_LEVEL", "ERROR".to_owned());

    let upstream_port = free_port().map_err(|e| e.to_string())?;
    let upstream = Proc::spawn(
        "upstream",
        &config.harness_bin,
        &["upstream", "--port", &upstream_port.to_string()],
        &[],
        &log("upstream"),
    )
    .map_err(|e| format!("upstream: {e}"))?;

    let dsn_env = ("POSTGRES_DSN", dsn.to_owned());
    run_once(&auth_bin, &["migrate"], &[dsn_env.clone(), quiet.clone()])
        .map_err(|e| format!("svc-auth-server migrate: {e}"))?;
    let seed = run_once(&auth_bin, &["seed"], &[dsn_env.clone(), quiet.clone()])
        .map_err(|e| format!("svc-auth-server seed: {e}"))?;
    let seed: serde_json::Value =
        serde_json::from_str(&seed).map_err(|e| format!("seed output: {e}"))?;
    let token = seed["chat_token"].as_str().unwrap_or_default().to_owned();
    let admin_token = seed["admin_token"].as_str().unwrap_or_default().to_owned();
    let agent = seed["agents"][0]["agent_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();

    let (grpc_port, auth_http) = (
        free_port().map_err(|e| e.to_string())?,
        free_port().map_err(|e| e.to_string())?,
    );
    let extra = || {
        config
            .service_env
            .iter()
            .map(|(name, value)| (name.as_str(), value.clone()))
    };
    let auth_env: Vec<_> = [
        dsn_env,
        quiet.clone(),
        ("SVC_BIND_ADDR", "127.0.0.1".to_owned()),
        ("SVC_PORT", auth_http.to_string()),
        ("SVC_GRPC_PORT", grpc_port.to_string()),
    ]
    .into_iter()
    .chain(extra())
    .collect();
    let auth = Proc::spawn(
        "svc-auth-server",
        &auth_bin,
        &["serve"],
        &auth_env,
        &log("svc-auth-server"),
    )
    .map_err(|e| format!("svc-auth-server: {e}"))?;
    let gateway_port = free_port().map_err(|e| e.to_string())?;
    let providers = config.log_dir.join("providers.toml");
    std::fs::write(&providers, providers_file(upstream_port))
        .map_err(|e| format!("{}: {e}", providers.display()))?;
    let gateway_env: Vec<_> = [
        quiet,
        ("SVC_PORT", gateway_port.to_string()),
        ("SVC_AUTH_GRPC_ADDR", format!("127.0.0.1:{grpc_port}")),
        ("REDIS_URL", config.redis_url.clone()),
        ("SVC_REDIS_KEY_PREFIX", prefix.to_owned()),
        ("SVC_PROVIDERS_FILE", providers.display().to_string()),
        (PROVIDER_KEY_VAR, PROVIDER_KEY.to_owned()),
        ("SVC_RATE_LIMIT_RPM", "100000000".to_owned()),
        // The flood phase comes from this one address: the gateway's per-address limit
        // on failed authentications would stop it before the auth server, and the real
        // token with it.
        ("SVC_AUTH_FAILURES_PER_MINUTE", "0".to_owned()),
        // Room for the token's one cold Argon2id run on a loaded machine; a warm
        // validation takes well under a millisecond either way.
        ("SVC_AUTH_VALIDATE_TIMEOUT", "1s".to_owned()),
    ]
    .into_iter()
    .chain(extra())
    .collect();
    let gateway = Proc::spawn(
        "svc-gateway",
        &gateway_bin,
        &[],
        &gateway_env,
        &log("svc-gateway"),
    )
    .map_err(|e| format!("svc-gateway: {e}"))?;
    for (name, port) in [
        ("upstream", upstream_port),
        ("svc-auth-server", grpc_port),
        ("svc-gateway", gateway_port),
    ] {
        if !wait_until(Duration::from_secs(30), || listening(port)).await {
            return Err(format!(
                "{name} did not listen on 127.0.0.1:{port}; see {}",
                log(name).display()
            ));
        }
    }

    let direct = Target {
        name: "direct",
        addr: SocketAddr::from((Ipv4Addr::LOCALHOST, upstream_port)),
        headers: HeaderMap::new(),
    };
    let mut headers = HeaderMap::new();
    let bearer = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|e| e.to_string())?;
    headers.insert(AUTHORIZATION, bearer);
    headers.insert(
        "x-svc-agent-id",
        HeaderValue::from_str(&agent).map_err(|e| e.to_string())?,
    );
    let through = Target {
        name: "gateway",
        addr: SocketAddr::from((Ipv4Addr::LOCALHOST, gateway_port)),
        headers,
    };
    // The token's first use pays its one Argon2id run; a cold start may answer 503 meanwhile.
    let mut warm = Err(String::new());
    for _ in 0..50 {
        warm = client::check(&through, false).await;
        if warm.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    warm.map_err(|e| {
        format!(
            "the gateway does not answer: {e}; see {} and {}",
            log("svc-gateway").display(),
            log("svc-auth-server").display()
        )
    })?;
    client::check(&direct, false).await?;

    let group = Group {
        gateway: gateway.pid(),
        auth: auth.pid(),
        upstream: upstream.pid(),
        redis: redis_pid(&config.redis_url).await,
    };
    let rss_start = rss_kib(group.gateway);
    println!(
        "svc-harness: machine {} cores; gateway, auth server, upstream, PostgreSQL and Redis as separate processes on 127.0.0.1",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
    println!(
        "closed loop ({} requests per phase after {} warm-up):",
        config.requests,
        config.requests / 10
    );
    let tracer = Tracer::find();
    for concurrency in [1, 32] {
        let costed = closed_loop(config, &direct, &through, &group, concurrency, tracer).await;
        print_closed(concurrency, &costed);
    }
    if !config.closed_only {
        open_loop_and_flood(config, &direct, &through, &token).await?;
        println!();
        // Last: the budget stays set for the rest of the run.
        super::budget::cost_of_budgets(
            config.requests,
            &direct,
            &through,
            grpc_port,
            &admin_token,
            &config.redis_url,
        )
        .await?;
    }
    let rss_end = rss_kib(group.gateway);
    if let (Some(start), Some(end)) = (rss_start, rss_end) {
        println!(
            "gateway resident memory: {:.1} MiB at the start, {:.1} MiB at the end",
            start as f64 / 1024.0,
            end as f64 / 1024.0
        );
    }
    drop((gateway, auth, upstream));
    Ok(())
}

/// The open-loop rates, up to the first whose added p99 passes the budget, then the flood.
async fn open_loop_and_flood(
    config: &HarnessConfig,
    direct: &Target,
    through: &Target,
    token: &str,
) -> Result<(), String> {
    println!();
    println!(
        "open loop ({} s per rate; latency from each request's scheduled start):",
        config.seconds
    );
    println!(
        "{:>8}  {:>34}  {:>34}  {:>9}",
        "req/s", "direct p50/p90/p99/p99.9 ms", "gateway p50/p90/p99/p99.9 ms", "added p99"
    );
    let mut best = None;
    for &rate in &config.rates {
        let window = Duration::from_secs(config.seconds);
        let d = open_loop::run(direct, rate, window).await;
        let g = open_loop::run(through, rate, window).await;
        let added = g.p99.saturating_sub(d.p99);
        println!(
            "{rate:>8}  {:>34}  {:>34}  {:>7.2} ms{}",
            quantiles(&d),
            quantiles(&g),
            ms(added),
            failures(&g)
        );
        if added >= ADDED_P99_BUDGET || g.failed() > 0 || d.failed() > 0 {
            break;
        }
        best = Some(rate);
    }
    match best {
        Some(rate) => println!("highest rate with added p99 under 5 ms: {rate} req/s"),
        None => println!("highest rate with added p99 under 5 ms: none of those tried"),
    }
    println!();
    flood(config, through, token).await
}

/// `requests` straight to the upstream and then through the gateway at one connection, each
/// after a tenth as many to warm up.
pub(crate) async fn run_phase(
    direct: &Target,
    through: &Target,
    requests: usize,
) -> (PhaseStats, PhaseStats) {
    let plan = |requests| Plan {
        requests,
        concurrency: 1,
        idempotency: false,
        deadline: tokio::time::Instant::now() + Duration::from_secs(120),
    };
    client::run(direct, plan(requests / 10)).await;
    let direct_stats = client::run(direct, plan(requests)).await;
    client::run(through, plan(requests / 10)).await;
    (direct_stats, client::run(through, plan(requests)).await)
}

async fn closed_loop(
    config: &HarnessConfig,
    direct: &Target,
    through: &Target,
    group: &Group,
    concurrency: usize,
    tracer: Option<Tracer>,
) -> Costed {
    let plan = |requests| Plan {
        requests,
        concurrency,
        idempotency: false,
        deadline: tokio::time::Instant::now() + Duration::from_secs(120),
    };
    client::run(direct, plan(config.requests / 10)).await;
    let direct_stats = client::run(direct, plan(config.requests)).await;
    client::run(through, plan(config.requests / 10)).await;
    let processes = group.all();
    let marks: Vec<CpuMark> = processes
        .iter()
        .map(|(_, pids)| CpuMark::of(pids))
        .collect();
    let redis_before = CommandStats::read(&config.redis_url).await;
    let gateway = client::run(through, plan(config.requests)).await;
    let redis_after = CommandStats::read(&config.redis_url).await;
    let answered = gateway.ok.max(1) as f64;
    let cpu_ms_per_request = processes
        .iter()
        .zip(&marks)
        .map(|((name, _), mark)| {
            // PostgreSQL backends come and go: read the current set again.
            let pids = if *name == "PostgreSQL" {
                pids_named("postgres")
            } else {
                group
                    .all()
                    .into_iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, p)| p)
                    .unwrap_or_default()
            };
            (*name, mark.since(&pids) * 1000.0 / answered)
        })
        .collect();
    let redis = redis_before
        .zip(redis_after)
        .map(|(before, after)| before.until(&after));
    let syscalls = match (config.syscall_requests, tracer) {
        (0, _) => Syscalls::Skipped,
        (_, None) => Syscalls::NoTracer,
        (requests, Some(tracer)) => {
            let per_service = count_syscalls(config, tracer, through, group, plan(requests)).await;
            Syscalls::Counted {
                tracer,
                requests,
                per_service,
            }
        }
    };
    Costed {
        direct: direct_stats,
        gateway,
        cpu_ms_per_request,
        redis,
        syscalls,
    }
}

/// Runs `plan` through the gateway with a tracer on the gateway and on the auth server, and
/// returns what each counted.
async fn count_syscalls(
    config: &HarnessConfig,
    tracer: Tracer,
    through: &Target,
    group: &Group,
    plan: Plan,
) -> Vec<(&'static str, Result<Counts, String>)> {
    let services = [("gateway", group.gateway), ("auth server", group.auth)];
    let attached: Vec<_> = services
        .iter()
        .map(|&(name, pid)| {
            let out = config.log_dir.join(format!(
                "svc-harness-syscalls-{pid}-{}.txt",
                std::process::id()
            ));
            (name, tracer.attach(pid, &out).map_err(|e| e.to_string()))
        })
        .collect();
    super::syscalls::Counting::settle().await;
    client::run(through, plan).await;
    let mut counted = Vec::new();
    for (name, counting) in attached {
        let counts = match counting {
            Ok(counting) => counting.finish().await,
            Err(error) => Err(format!("{}: {error}", tracer.describe())),
        };
        counted.push((name, counts));
    }
    counted
}

/// Connections flooding wrong secrets on the real token's id, and as many flooding forged ids.
const FLOOD_CONNECTIONS: usize = 8;

/// The real token at one connection, alone and then while `2 * FLOOD_CONNECTIONS` connections
/// send wrong secrets on its id and well-formed tokens with random ids as fast as they are
/// answered: its p99 each way, measured in this one run.
async fn flood(config: &HarnessConfig, through: &Target, token: &str) -> Result<(), String> {
    let token_id = Pat::parse(token)
        .map_err(|e| format!("the seeded token: {e}"))?
        .token_id();
    let plan = Plan {
        requests: config.requests,
        concurrency: 1,
        idempotency: false,
        deadline: tokio::time::Instant::now() + Duration::from_secs(120),
    };
    let quiet = client::run(through, plan).await;

    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicUsize::new(0));
    let floods: Vec<_> = (0..2 * FLOOD_CONNECTIONS)
        .map(|i| {
            let bearer = move || {
                let id = if i < FLOOD_CONNECTIONS {
                    token_id
                } else {
                    Uuid::new_v4()
                };
                Pat::generate(id).expose()
            };
            tokio::spawn(client::flood(
                through.clone(),
                bearer,
                stop.clone(),
                answered.clone(),
            ))
        })
        .collect();
    let under_way = wait_until(Duration::from_secs(10), || {
        answered.load(Ordering::Relaxed) >= 100
    })
    .await;
    let started = std::time::Instant::now();
    let before = answered.load(Ordering::Relaxed);
    let flooded = client::run(through, plan).await;
    let flood_rate =
        (answered.load(Ordering::Relaxed) - before) as f64 / started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for flood in floods {
        let _ = flood.await;
    }
    if !under_way {
        return Err("the flood never got answers".to_owned());
    }
    println!(
        "flood ({FLOOD_CONNECTIONS} connections of wrong secrets on the real token's id, \
         {FLOOD_CONNECTIONS} of forged ids, {flood_rate:.0} refusals/s; the real token on 1 connection):"
    );
    println!(
        "  alone       p50/p90/p99/p99.9 {} ms{}",
        quantiles(&quiet),
        failures(&quiet)
    );
    println!(
        "  flooded     p50/p90/p99/p99.9 {} ms{}",
        quantiles(&flooded),
        failures(&flooded)
    );
    println!(
        "  real token's p99 with the flood: {:.1}x its p99 alone",
        flooded.p99.as_secs_f64() / quiet.p99.as_secs_f64().max(f64::EPSILON)
    );
    Ok(())
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn quantiles(stats: &PhaseStats) -> String {
    format!(
        "{:.2} / {:.2} / {:.2} / {:.2}",
        ms(stats.p50),
        ms(stats.p90),
        ms(stats.p99),
        ms(stats.p999)
    )
}

fn failures(stats: &PhaseStats) -> String {
    if stats.failed() == 0 {
        String::new()
    } else {
        format!("  ({} failed: {:?})", stats.failed(), stats.failures)
    }
}

fn print_closed(concurrency: usize, costed: &Costed) {
    let (d, g) = (&costed.direct, &costed.gateway);
    println!("  {concurrency} connection(s):");
    println!(
        "    direct   p50/p90/p99/p99.9 {} ms, {:.0} req/s{}",
        quantiles(d),
        d.throughput,
        failures(d)
    );
    println!(
        "    gateway  p50/p90/p99/p99.9 {} ms, {:.0} req/s{}",
        quantiles(g),
        g.throughput,
        failures(g)
    );
    println!(
        "    added    p50 {:.3} ms, p99 {:.3} ms",
        ms(g.p50.saturating_sub(d.p50)),
        ms(g.p99.saturating_sub(d.p99))
    );
    let total: f64 = costed
        .cpu_ms_per_request
        .iter()
        .filter(|(n, _)| *n != "upstream")
        .map(|(_, v)| v)
        .sum();
    let parts: Vec<String> = costed
        .cpu_ms_per_request
        .iter()
        .map(|(n, v)| format!("{n} {v:.3}"))
        .collect();
    println!(
        "    CPU ms per request: {} (all but the upstream: {total:.3})",
        parts.join(", ")
    );
    match &costed.redis {
        Some(redis) => println!(
            "    Redis commands per request (INFO commandstats, the whole server; a script's own calls count): {}",
            redis.per_request(g.ok)
        ),
        None => println!("    Redis commands per request: INFO commandstats did not answer"),
    }
    match &costed.syscalls {
        Syscalls::Skipped => {}
        Syscalls::NoTracer => println!(
            "    system calls per request: neither strace nor perf is installed, not counted"
        ),
        Syscalls::Counted {
            tracer,
            requests,
            per_service,
        } => {
            println!(
                "    system calls per request ({}, a traced phase of {requests} requests of its own):",
                tracer.describe()
            );
            for (name, counts) in per_service {
                match counts {
                    Ok(counts) => println!("      {name:<12} {}", counts.per_request(*requests, 8)),
                    Err(error) => println!("      {name:<12} not counted: {error}"),
                }
            }
        }
    }
}

/// The Redis server's process id, from `INFO server`, when it runs on this machine.
async fn redis_pid(url: &str) -> Option<u32> {
    let client = redis::Client::open(url).ok()?;
    let mut connection = client.get_multiplexed_async_connection().await.ok()?;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut connection)
        .await
        .ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|v| v.trim().parse().ok())
}

/// `bin_dir` holds both service binaries.
pub fn check_bin_dir(bin_dir: &Path) -> Result<(), String> {
    for name in ["svc-auth-server", "svc-gateway"] {
        if !bin_dir.join(name).is_file() {
            return Err(format!(
                "{}: no {name} here; build the binaries of this profile first (`cargo build --bins`, with `--release` for a release one)",
                bin_dir.display()
            ));
        }
    }
    Ok(())
}
