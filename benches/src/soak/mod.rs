//! `svc-soak`: steady load through two gateways and two auth servers while their dependencies
//! fail one at a time.
//!
//! Like [`crate::harness`] it runs the real `svc-auth-server` and `svc-gateway` binaries as
//! separate processes on a fresh PostgreSQL database and a fresh Redis key prefix, all on
//! 127.0.0.1. Redis, PostgreSQL, each auth server and the upstream (in this process, recording
//! every request) are reached through loopback [`FaultProxy`]s, and each gateway's
//! `SVC_AUTH_GRPC_ADDR` lists the proxies of both auth servers. Over the run
//! ([`plan::schedule`]) Redis is cut for 10 s, one auth server for 5 s, PostgreSQL for 5 s,
//! and the upstream answers later than `SVC_PROVIDER_TIMEOUT` for 5 s, one after the other.
//!
//! Every request is a non-streaming chat completion with its own Idempotency-Key. Afterwards
//! ([`verdict::report`]): no key reached the upstream twice, every answer was one SPEC.md
//! allows for the faults it overlapped, a request sent after each restore was served within
//! 1 s, and neither gateway's resident memory grew past a bound after warm-up. Everything it
//! started is stopped by process id, and the database and keys are removed, when it ends.

pub mod plan;
pub mod traffic;
pub mod upstream;
pub mod verdict;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderValue};
use svc_testkit::FaultProxy;
use tokio::time::Instant;
use url::Url;

use crate::harness::procs::{Proc, rss_kib, run_once, wait_until};
use svc_testkit::try_free_port as free_port;

use crate::harness::run::{listening, with_scratch};
use crate::load::client::{self, Target};
use crate::load::upstream::{MODEL, PROVIDER_KEY};
use plan::{Fault, Window};
use traffic::Caller;
use upstream::RecordingUpstream;
use verdict::{Evidence, Memory};

/// How a run is made.
#[derive(Debug, Clone)]
pub struct SoakConfig {
    /// Where `svc-auth-server` and `svc-gateway` are.
    pub bin_dir: PathBuf,
    pub postgres_url: String,
    pub redis_url: String,
    /// Length of the load.
    pub seconds: u64,
    /// Requests per second, over both gateways.
    pub rate: u32,
    /// The gateways' `SVC_PROVIDER_TIMEOUT`; the slow upstream answers 1 s after it.
    pub provider_timeout: Duration,
    /// How much a gateway's resident memory may grow after warm-up.
    pub rss_tolerance_kib: u64,
    pub log_dir: PathBuf,
    /// Where to write every request's outcome as CSV, when set.
    pub outcomes: Option<PathBuf>,
}

/// Runs the soak; `Ok(false)` when a property failed, `Err` when the stack did not start.
pub async fn run(config: &SoakConfig) -> Result<bool, String> {
    with_scratch(
        &config.postgres_url,
        &config.redis_url,
        |dsn: String, prefix: String| async move { soak(config, &dsn, &prefix).await },
    )
    .await
}

/// The loopback address a URL names, its default port when it has none.
fn socket_of(url: &Url, default_port: u16) -> Result<SocketAddr, String> {
    let host = url.host_str().ok_or_else(|| format!("{url}: no host"))?;
    (host, url.port().unwrap_or(default_port))
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("{host}: does not resolve"))
}

/// `url` with its host and port replaced by `proxy`'s, and a proxy in front of the original.
async fn behind_proxy(url: &str, default_port: u16) -> Result<(String, FaultProxy), String> {
    let mut url = Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
    let proxy = FaultProxy::start(socket_of(&url, default_port)?).await;
    url.set_host(Some("127.0.0.1"))
        .and_then(|()| {
            url.set_port(Some(proxy.addr().port()))
                .map_err(|()| url::ParseError::InvalidPort)
        })
        .map_err(|e| e.to_string())?;
    Ok((url.to_string(), proxy))
}

fn port() -> Result<u16, String> {
    free_port().map_err(|e| format!("a free port: {e}"))
}

/// The switches the faults throw.
struct Switches {
    redis: FaultProxy,
    auth: FaultProxy,
    postgres: FaultProxy,
    upstream: Arc<RecordingUpstream>,
}

impl Switches {
    fn set(&self, fault: Fault, on: bool) {
        let proxy = match fault {
            Fault::Redis => &self.redis,
            Fault::OneAuthServer => &self.auth,
            Fault::Postgres => &self.postgres,
            Fault::SlowUpstream => return self.upstream.set_slow(on),
        };
        if on { proxy.cut() } else { proxy.restore() }
    }
}

async fn soak(config: &SoakConfig, dsn: &str, prefix: &str) -> Result<bool, String> {
    let auth_bin = config.bin_dir.join("svc-auth-server");
    let gateway_bin = config.bin_dir.join("svc-gateway");
    let log = |name: &str| config.log_dir.join(format!("svc-soak-{name}.log"));
    let quiet = ("SVC_LOG_LEVEL", "ERROR".to_owned());

    let direct = ("POSTGRES_DSN", dsn.to_owned());
    run_once(&auth_bin, &["migrate"], &[direct.clone(), quiet.clone()])
        .map_err(|e| format!("svc-auth-server migrate: {e}"))?;
    let seed = run_once(&auth_bin, &["seed"], &[direct, quiet.clone()])
        .map_err(|e| format!("svc-auth-server seed: {e}"))?;
    let seed: serde_json::Value =
        serde_json::from_str(&seed).map_err(|e| format!("seed output: {e}"))?;
    let caller = Caller {
        token: seed["chat_token"].as_str().unwrap_or_default().to_owned(),
        agent: seed["agents"][0]["agent_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    };

    let upstream = Arc::new(
        RecordingUpstream::start(config.provider_timeout + Duration::from_secs(1))
            .await
            .map_err(|e| format!("upstream: {e}"))?,
    );
    let upstream_proxy = FaultProxy::start(upstream.addr()).await;
    let (proxied_dsn, postgres) = behind_proxy(dsn, 5432).await?;
    let (proxied_redis, redis) = behind_proxy(&config.redis_url, 6379).await?;

    let mut procs = Vec::new();
    let mut auth_proxies = Vec::new();
    let mut listeners = Vec::new();
    for name in ["svc-auth-server-a", "svc-auth-server-b"] {
        let grpc = port()?;
        procs.push(spawn(
            name,
            &auth_bin,
            &[
                ("POSTGRES_DSN", proxied_dsn.clone()),
                quiet.clone(),
                ("SVC_BIND_ADDR", "127.0.0.1".to_owned()),
                ("SVC_PORT", port()?.to_string()),
                ("SVC_GRPC_PORT", grpc.to_string()),
            ],
            &["serve"],
            &log(name),
        )?);
        listeners.push((name, grpc));
        auth_proxies.push(FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], grpc))).await);
    }
    let auth_list = auth_proxies
        .iter()
        .map(|p| p.addr().to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut gateways = Vec::new();
    for name in ["svc-gateway-a", "svc-gateway-b"] {
        let http = port()?;
        procs.push(spawn(
            name,
            &gateway_bin,
            &[
                quiet.clone(),
                ("SVC_PORT", http.to_string()),
                ("SVC_AUTH_GRPC_ADDR", auth_list.clone()),
                ("REDIS_URL", proxied_redis.clone()),
                ("SVC_REDIS_KEY_PREFIX", prefix.to_owned()),
                (
                    "SVC_PROVIDER_BASE_URL",
                    format!("http://{}/v1", upstream_proxy.addr()),
                ),
                ("SVC_PROVIDER_API_KEY", PROVIDER_KEY.to_owned()),
                ("SVC_PROVIDER_MODELS", MODEL.to_owned()),
                (
                    "SVC_PROVIDER_TIMEOUT",
                    format!("{}ms", config.provider_timeout.as_millis()),
                ),
                ("SVC_RATE_LIMIT_RPM", "100000000".to_owned()),
                // Room for each auth server's one cold Argon2id run of the token on a busy
                // machine; a warm validation takes well under a millisecond.
                ("SVC_AUTH_VALIDATE_TIMEOUT", "1s".to_owned()),
            ],
            &[],
            &log(name),
        )?);
        listeners.push((name, http));
        gateways.push(SocketAddr::from(([127, 0, 0, 1], http)));
    }
    for (name, port) in &listeners {
        if !wait_until(Duration::from_secs(30), || listening(*port)).await {
            return Err(format!(
                "{name} did not listen on 127.0.0.1:{port}; see {}",
                log(name).display()
            ));
        }
    }
    warm(&gateways, &caller).await?;

    let total = Duration::from_secs(config.seconds);
    let windows = plan::schedule(total);
    let switches = Switches {
        redis,
        auth: auth_proxies.swap_remove(0),
        postgres,
        upstream: upstream.clone(),
    };
    let gateway_pids: Vec<(&str, u32)> = procs
        .iter()
        .filter(|p| p.name.starts_with("svc-gateway"))
        .map(|p| (p.name, p.pid()))
        .collect();
    println!(
        "svc-soak: {} s at {} req/s through 2 gateways and 2 auth servers; machine {} cores; \
         SVC_PROVIDER_TIMEOUT {} ms",
        config.seconds,
        config.rate,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        config.provider_timeout.as_millis()
    );
    let start = Instant::now() + Duration::from_millis(100);
    let faults = tokio::spawn(inject(switches, windows.clone(), start));
    let warm_rss = tokio::spawn({
        let pids = gateway_pids.clone();
        let at = start + plan::warm_up(total);
        async move {
            tokio::time::sleep_until(at).await;
            pids.iter()
                .map(|&(_, pid)| rss_kib(pid).unwrap_or(0))
                .collect::<Vec<_>>()
        }
    });
    let outcomes = traffic::run(&gateways, &caller, config.rate, total, start).await;
    let _ = faults.await;
    let warm_rss = warm_rss.await.unwrap_or_default();
    let mut alive = true;
    for proc in &mut procs {
        if !proc.alive() {
            println!(
                "{} exited during the run; see {}",
                proc.name,
                log(proc.name).display()
            );
            alive = false;
        }
    }
    let memory = gateway_pids
        .iter()
        .zip(warm_rss)
        .map(|(&(name, pid), after_warm_up)| Memory {
            name: name.to_owned(),
            after_warm_up,
            at_end: rss_kib(pid).unwrap_or(u64::MAX),
        })
        .collect();
    if let Some(path) = &config.outcomes {
        traffic::write_csv(path, &outcomes).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let (upstream_calls, keys_twice) = upstream.tally();
    println!();
    let pass = verdict::report(&Evidence {
        outcomes: &outcomes,
        windows: &windows,
        upstream_calls,
        keys_twice,
        memory,
        rss_tolerance_kib: config.rss_tolerance_kib,
    });
    drop(procs);
    Ok(pass && alive)
}

fn spawn(
    name: &'static str,
    program: &Path,
    env: &[(&str, String)],
    args: &[&str],
    log: &Path,
) -> Result<Proc, String> {
    Proc::spawn(name, program, args, env, log).map_err(|e| format!("{name}: {e}"))
}

/// Throws each fault's switch at its cut and back at its restore.
async fn inject(switches: Switches, windows: Vec<Window>, start: Instant) {
    for window in windows {
        tokio::time::sleep_until(start + window.cut).await;
        switches.set(window.fault, true);
        tokio::time::sleep_until(start + window.restore).await;
        switches.set(window.fault, false);
    }
}

/// Each auth server pays the token's one cold Argon2id run before the load starts: answers
/// from both gateways until each has served a run of them (the balancer spreads them over
/// both auth servers).
async fn warm(gateways: &[SocketAddr], caller: &Caller) -> Result<(), String> {
    let mut headers = HeaderMap::new();
    let bearer = HeaderValue::from_str(&format!("Bearer {}", caller.token))
        .map_err(|_| "the seeded token is not a header value")?;
    headers.insert(AUTHORIZATION, bearer);
    headers.insert(
        "x-svc-agent-id",
        HeaderValue::from_str(&caller.agent).map_err(|_| "the agent id is not a header value")?,
    );
    for &addr in gateways {
        let target = Target {
            name: "gateway",
            addr,
            headers: headers.clone(),
        };
        let mut served = 0;
        let mut last = Ok(());
        for _ in 0..100 {
            last = client::check(&target, false).await;
            served = if last.is_ok() { served + 1 } else { 0 };
            if served == 10 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        last.map_err(|e| format!("the gateway on {addr} does not answer: {e}"))?;
    }
    Ok(())
}
