//! The processes under measurement: children this harness starts (and kills on drop), and the
//! servers it finds (PostgreSQL, Redis), read through `/proc`.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Clock ticks per second of `/proc/<pid>/stat` times (`getconf CLK_TCK`, 100 on Linux).
fn ticks_per_second() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .unwrap_or(100.0)
}

/// User plus system CPU seconds `pid` has used, when it is alive.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces: fields are counted after its closing parenthesis.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / ticks_per_second())
}

/// Resident memory of `pid`, in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Every process whose command is `name` (PostgreSQL's backends are one process each).
pub fn pids_named(name: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim() == name)
        })
        .collect()
}

/// CPU seconds of a group of processes, summed; processes that appear later count whole.
#[derive(Debug, Clone)]
pub struct CpuMark(Vec<(u32, f64)>);

impl CpuMark {
    /// Reads `pids` now.
    pub fn of(pids: &[u32]) -> CpuMark {
        CpuMark(
            pids.iter()
                .filter_map(|&p| Some((p, cpu_seconds(p)?)))
                .collect(),
        )
    }

    /// CPU seconds `pids` used since this mark.
    pub fn since(&self, pids: &[u32]) -> f64 {
        pids.iter()
            .filter_map(|&pid| {
                let now = cpu_seconds(pid)?;
                let before = self
                    .0
                    .iter()
                    .find(|(p, _)| *p == pid)
                    .map_or(0.0, |(_, s)| *s);
                Some((now - before).max(0.0))
            })
            .sum()
    }
}

/// A child process, killed when dropped.
#[derive(Debug)]
pub struct Proc {
    pub name: &'static str,
    child: Child,
}

impl Proc {
    /// Starts `program` with `args` and `env` (the rest of the environment cleared but `PATH`);
    /// its stderr goes to `log`.
    pub fn spawn(
        name: &'static str,
        program: &Path,
        args: &[&str],
        env: &[(&str, String)],
        log: &Path,
    ) -> std::io::Result<Proc> {
        let mut command = Command::new(program);
        command
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log)?);
        for (key, value) in env {
            command.env(key, value);
        }
        Ok(Proc {
            name,
            child: command.spawn()?,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `program` to completion and returns its stdout, or its stderr as the error.
pub fn run_once(program: &Path, args: &[&str], env: &[(&str, String)]) -> Result<String, String> {
    let mut command = Command::new(program);
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command
        .output()
        .map_err(|e| format!("{}: {e}", program.display()))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// Polls `check` every 50 ms until it holds or `within` passes.
pub async fn wait_until<F: FnMut() -> bool>(within: Duration, mut check: F) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    check()
}
