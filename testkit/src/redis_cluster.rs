//! A real Redis Cluster on loopback for the tests that need one: three primaries and three
//! replicas started by `scripts/redis-cluster` from the installed redis-server, stopped by
//! their process ids when dropped, and in any case when the test process exits.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Hash slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// A running cluster; every node answers on 127.0.0.1.
#[derive(Debug)]
pub struct RedisCluster {
    dir: PathBuf,
    nodes: Vec<SocketAddr>,
}

/// One line of `CLUSTER NODES`, as far as the tests need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    pub id: String,
    pub addr: SocketAddr,
    /// Whether it serves as a primary (a replica names its primary in `primary_id`).
    pub primary: bool,
    pub primary_id: Option<String>,
    /// Flagged `fail` (or `fail?`) by the node that was asked.
    pub failing: bool,
    /// Inclusive slot ranges it serves.
    pub slots: Vec<(u16, u16)>,
}

fn script() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scripts/redis-cluster"
    ))
}

impl RedisCluster {
    /// Starts a cluster of its own. Blocks for the few seconds the cluster takes to form.
    pub fn start() -> RedisCluster {
        let dir = std::env::temp_dir().join(format!(
            "svc-redis-cluster-{}",
            uuid::Uuid::new_v4().simple()
        ));
        let output = Command::new(script())
            .arg("start")
            .arg(&dir)
            .arg(std::process::id().to_string())
            .output()
            .expect("run scripts/redis-cluster");
        assert!(
            output.status.success(),
            "scripts/redis-cluster start failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let nodes = String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|line| line.trim().parse().expect("a node address"))
            .collect::<Vec<SocketAddr>>();
        assert_eq!(nodes.len(), 6, "six nodes");
        RedisCluster { dir, nodes }
    }

    /// One cluster for the whole test binary, for tests that only read and write their own
    /// keys (random org ids and key prefixes keep them apart) and kill no node. It stops when
    /// the test process exits.
    pub fn shared() -> &'static RedisCluster {
        static SHARED: OnceLock<RedisCluster> = OnceLock::new();
        SHARED.get_or_init(RedisCluster::start)
    }

    /// Every node, primaries and replicas, as started.
    pub fn nodes(&self) -> &[SocketAddr] {
        &self.nodes
    }

    /// `redis://` URLs of every node, comma-separated: a cluster `REDIS_URL`.
    pub fn url(&self) -> String {
        self.nodes
            .iter()
            .map(|node| format!("redis://{node}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `CLUSTER NODES` as seen by `via`, or `None` when it does not answer.
    pub fn topology(&self, via: SocketAddr) -> Option<Vec<ClusterNode>> {
        let output = cli(via, &["CLUSTER", "NODES"])?;
        Some(output.lines().filter_map(parse_node).collect())
    }

    /// The primary serving `slot`, according to `via`.
    pub fn primary_of(&self, via: SocketAddr, slot: u16) -> Option<SocketAddr> {
        self.topology(via)?
            .into_iter()
            .find(|node| {
                node.primary
                    && !node.failing
                    && node.slots.iter().any(|&(a, b)| (a..=b).contains(&slot))
            })
            .map(|node| node.addr)
    }

    /// Whether every live primary's replicas are online and have applied all it wrote, so a
    /// failover now loses nothing acknowledged before.
    pub fn replicas_in_sync(&self) -> bool {
        let mut replicas = 0;
        for &node in &self.nodes {
            let Some(info) = cli(node, &["INFO", "replication"]) else {
                continue;
            };
            if !info.contains("role:master") {
                continue;
            }
            let field = |line: &str, name: &str| {
                line.split([',', ':'])
                    .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=').map(str::to_owned))
            };
            let offset = info
                .lines()
                .find_map(|l| l.trim().strip_prefix("master_repl_offset:"))
                .map(str::to_owned);
            for line in info
                .lines()
                .filter(|l| l.starts_with("slave") && l.contains(":ip="))
            {
                replicas += 1;
                if field(line, "state").as_deref() != Some("online")
                    || field(line, "offset") != offset
                {
                    return false;
                }
            }
        }
        replicas > 0
    }

    /// The process id of `node`, from the pid file it wrote.
    pub fn pid(&self, node: SocketAddr) -> Option<u32> {
        std::fs::read_to_string(self.dir.join(format!("{}.pid", node.port())))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Kills `node` with SIGKILL, as a crash would, by its own process id.
    pub fn kill(&self, node: SocketAddr) {
        let pid = self.pid(node).expect("the node's pid file");
        let status = Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -9 {pid}");
        let _ = std::fs::remove_file(self.dir.join(format!("{}.pid", node.port())));
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").arg(&self.dir).status();
    }
}

fn cli(node: SocketAddr, args: &[&str]) -> Option<String> {
    let output = Command::new("redis-cli")
        .args(["-h", &node.ip().to_string(), "-p", &node.port().to_string()])
        .args(args)
        .output()
        .ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    (output.status.success() && !text.starts_with("Could not connect") && !text.is_empty())
        .then_some(text)
}

/// `<id> <ip:port@bus> <flags> <primary> <ping> <pong> <epoch> <link> <slot>...`
fn parse_node(line: &str) -> Option<ClusterNode> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let [id, addr, flags, primary_id, _, _, _, _, slots @ ..] = fields.as_slice() else {
        return None;
    };
    let addr = addr.split(['@', ',']).next()?.parse().ok()?;
    let flags: Vec<&str> = flags.split(',').collect();
    let slots = slots
        .iter()
        .filter(|s| !s.starts_with('['))
        .filter_map(|s| match s.split_once('-') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => s.parse().ok().map(|n| (n, n)),
        })
        .collect();
    Some(ClusterNode {
        id: (*id).to_owned(),
        addr,
        primary: flags.contains(&"master"),
        primary_id: (*primary_id != "-").then(|| (*primary_id).to_owned()),
        failing: flags.iter().any(|f| f.starts_with("fail")),
        slots,
    })
}

/// The slot of `key`: CRC16 (XMODEM) of its hash tag, or of the whole key without one.
pub fn key_slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let tagged = bytes
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let close = bytes[open + 1..].iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &bytes[open + 1..open + 1 + close])
        })
        .unwrap_or(bytes);
    let mut crc: u16 = 0;
    for &byte in tagged {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_hash_tag() {
        assert_eq!(key_slot("foo"), 12182);
        assert_eq!(key_slot("{user1000}.following"), key_slot("user1000"));
        assert_ne!(key_slot("{}x"), key_slot("x"));
    }

    #[test]
    fn cluster_nodes_lines_parse() {
        let primary = parse_node(
            "07c3 127.0.0.1:30004@31004 myself,master - 0 0 1 connected 0-5460 7000 [93->-e7]",
        )
        .unwrap();
        assert!(primary.primary && !primary.failing);
        assert_eq!(primary.slots, [(0, 5460), (7000, 7000)]);
        let replica = parse_node("e7d1 127.0.0.1:30005@31005 slave 07c3 0 1 1 connected").unwrap();
        assert_eq!(replica.primary_id.as_deref(), Some("07c3"));
        let failed =
            parse_node("a1b2 127.0.0.1:30006@31006 master,fail - 1 1 2 disconnected").unwrap();
        assert!(failed.failing);
    }
}
