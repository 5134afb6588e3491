//! Balancing over every address of `SVC_AUTH_GRPC_ADDR`: tonic's balanced channel (power of
//! two choices over the live endpoints), fed by a discovery task.
//!
//! The task resolves every listed name every `SVC_AUTH_GRPC_RESOLVE_INTERVAL`, so a DNS name
//! follows the replicas behind it. It also watches each address's gRPC health
//! (`grpc.health.v1.Health/Watch` of the auth service): an address whose connection drops, or
//! whose server reports NOT_SERVING while it shuts down, leaves the set at once, so only the
//! calls in flight on it fail; it comes back when it serves again. A server without the health
//! service counts as up while it answers. When no address is up, every known address stays in
//! the set: calls then fail fast with the transport error instead of waiting for a deadline.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tonic::Code;
use tonic::transport::channel::Change;
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// The service whose health is watched.
pub const HEALTH_SERVICE: &str = "svc.auth.v1.AuthService";

/// How soon an address that is down is tried again.
pub const RETRY: Duration = Duration::from_secs(1);

/// Pending changes the balancer has not taken yet, at most.
const CHANGES: usize = 1024;

/// A listed `host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    pub(super) host: String,
    pub(super) port: u16,
}

/// Builds the endpoint of one resolved address of `host`.
pub(super) type MakeEndpoint = Arc<dyn Fn(SocketAddr, &str) -> Option<Endpoint> + Send + Sync>;

/// A channel balanced over every address of `targets`. Call it inside a Tokio runtime.
pub(super) fn channel(
    targets: Vec<Target>,
    make: MakeEndpoint,
    resolve_every: Duration,
) -> Channel {
    let (channel, changes) = Channel::balance_channel::<SocketAddr>(CHANGES);
    let (reports, reported) = mpsc::channel(CHANGES);
    let discovery = Discovery {
        targets,
        make,
        changes,
        reports,
        known: HashMap::new(),
        inserted: HashSet::new(),
    };
    tokio::spawn(discovery.run(reported, resolve_every));
    channel
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Health {
    /// Not heard of yet: in the set, so the first calls need not wait for the watch.
    Unknown,
    Up,
    Down,
}

struct Known {
    health: Health,
    endpoint: Endpoint,
    watcher: JoinHandle<()>,
}

struct Discovery {
    targets: Vec<Target>,
    make: MakeEndpoint,
    changes: mpsc::Sender<Change<SocketAddr, Endpoint>>,
    reports: mpsc::Sender<(SocketAddr, bool)>,
    known: HashMap<SocketAddr, Known>,
    inserted: HashSet<SocketAddr>,
}

impl Discovery {
    async fn run(mut self, mut reported: mpsc::Receiver<(SocketAddr, bool)>, every: Duration) {
        let mut resolve = tokio::time::interval(every);
        resolve.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let changes = self.changes.clone();
        loop {
            tokio::select! {
                _ = resolve.tick() => self.resolve().await,
                Some((addr, up)) = reported.recv() => {
                    if let Some(known) = self.known.get_mut(&addr) {
                        known.health = if up { Health::Up } else { Health::Down };
                    }
                }
                // Every clone of the channel is gone: nothing left to balance.
                () = changes.closed() => break,
            }
            if self.publish().await.is_err() {
                break;
            }
        }
        for known in self.known.values() {
            known.watcher.abort();
        }
    }

    /// Resolves every target; addresses that appeared are watched, those that vanished are
    /// forgotten. A lookup that fails keeps what the last one found.
    async fn resolve(&mut self) {
        let mut found: HashMap<SocketAddr, &str> = HashMap::new();
        let mut failed = false;
        for target in &self.targets {
            match tokio::net::lookup_host((target.host.as_str(), target.port)).await {
                Ok(addrs) => found.extend(addrs.map(|addr| (addr, target.host.as_str()))),
                Err(error) => {
                    failed = true;
                    tracing::warn!(host = %target.host, error = %error, "auth service name did not resolve");
                }
            }
        }
        if !failed {
            self.known.retain(|addr, known| {
                let keep = found.contains_key(addr);
                if !keep {
                    known.watcher.abort();
                }
                keep
            });
        }
        for (addr, host) in found {
            if self.known.contains_key(&addr) {
                continue;
            }
            let Some(endpoint) = (self.make)(addr, host) else {
                continue;
            };
            let watcher = tokio::spawn(watch(endpoint.clone(), addr, self.reports.clone()));
            let known = Known {
                health: Health::Unknown,
                endpoint,
                watcher,
            };
            self.known.insert(addr, known);
        }
    }

    /// Brings the balancer's set to the addresses that are not down (or every address, when
    /// all are).
    async fn publish(&mut self) -> Result<(), ()> {
        let live: HashSet<SocketAddr> = self
            .known
            .iter()
            .filter(|(_, known)| known.health != Health::Down)
            .map(|(addr, _)| *addr)
            .collect();
        let wanted = if live.is_empty() {
            self.known.keys().copied().collect()
        } else {
            live
        };
        for gone in self.inserted.difference(&wanted) {
            self.changes
                .send(Change::Remove(*gone))
                .await
                .map_err(drop)?;
        }
        for new in wanted.difference(&self.inserted) {
            if let Some(known) = self.known.get(new) {
                let change = Change::Insert(*new, known.endpoint.clone());
                self.changes.send(change).await.map_err(drop)?;
            }
        }
        self.inserted = wanted;
        Ok(())
    }
}

/// Reports whether `addr` serves, for as long as the discovery task keeps it.
async fn watch(endpoint: Endpoint, addr: SocketAddr, reports: mpsc::Sender<(SocketAddr, bool)>) {
    loop {
        watch_once(&endpoint, addr, &reports).await;
        if reports.send((addr, false)).await.is_err() {
            return;
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// Follows `addr`'s health until its connection fails.
async fn watch_once(
    endpoint: &Endpoint,
    addr: SocketAddr,
    reports: &mpsc::Sender<(SocketAddr, bool)>,
) {
    let Ok(channel) = endpoint.connect().await else {
        return;
    };
    let mut client = HealthClient::new(channel);
    let request = || HealthCheckRequest {
        service: HEALTH_SERVICE.to_owned(),
    };
    match client.watch(request()).await {
        Ok(stream) => {
            let mut stream = stream.into_inner();
            while let Ok(Some(message)) = stream.message().await {
                // Anything but SERVING (a server draining, say) ends the watch: the open stream
                // would otherwise hold that server's shutdown until its grace runs out.
                if message.status != ServingStatus::Serving as i32
                    || reports.send((addr, true)).await.is_err()
                {
                    return;
                }
            }
        }
        // No health service: up for as long as it answers at all.
        Err(status) if status.code() == Code::Unimplemented => loop {
            if reports.send((addr, true)).await.is_err() {
                return;
            }
            tokio::time::sleep(RETRY).await;
            match client.check(request()).await {
                Err(status) if status.code() != Code::Unimplemented => return,
                _ => {}
            }
        },
        Err(_) => {}
    }
}
