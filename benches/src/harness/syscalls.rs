//! System calls per request: `strace -c -f` (or `perf trace -s`) attached to a running service
//! for one phase of its own, since tracing slows every call it counts.
//!
//! The counts include what the process does while idle in that window (a timer, a pool's
//! keep-alive), so a phase of a couple of thousand requests keeps them small beside the
//! requests' own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How long a tracer gets to attach to every thread before the phase starts.
const ATTACH_WAIT: Duration = Duration::from_millis(500);
/// How long a tracer gets to write its summary once told to stop.
const DETACH_WAIT: Duration = Duration::from_secs(10);

/// The tool that counts, found on `PATH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tracer {
    /// `strace -c -f -p PID -o FILE`.
    Strace,
    /// `perf trace -s -p PID -o FILE`.
    PerfTrace,
}

impl Tracer {
    /// `strace` when it runs, else `perf trace`, else `None`.
    pub fn find() -> Option<Tracer> {
        let runs = |program: &str, args: &[&str]| {
            Command::new(program)
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if runs("strace", &["-V"]) {
            Some(Tracer::Strace)
        } else if runs("perf", &["trace", "-h"]) || runs("perf", &["--version"]) {
            Some(Tracer::PerfTrace)
        } else {
            None
        }
    }

    /// The command line, for the report.
    pub fn describe(self) -> &'static str {
        match self {
            Tracer::Strace => "strace -c -f",
            Tracer::PerfTrace => "perf trace -s",
        }
    }

    /// Starts counting the system calls of `pid` and all its threads into `out`.
    pub fn attach(self, pid: u32, out: &Path) -> std::io::Result<Counting> {
        let pid = pid.to_string();
        let out_arg = out.display().to_string();
        let mut command = match self {
            Tracer::Strace => {
                let mut c = Command::new("strace");
                c.args(["-c", "-f", "-o", &out_arg, "-p", &pid]);
                c
            }
            Tracer::PerfTrace => {
                let mut c = Command::new("perf");
                c.args(["trace", "-s", "-o", &out_arg, "-p", &pid]);
                c
            }
        };
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        Ok(Counting {
            child: Some(child),
            out: out.to_owned(),
        })
    }
}

/// A tracer attached to one process; [`finish`](Counting::finish) stops it and reads its
/// summary. Dropped unfinished, it is killed (the kernel detaches it from the process).
#[derive(Debug)]
pub struct Counting {
    child: Option<Child>,
    out: PathBuf,
}

impl Counting {
    /// Waits for the tracer to attach.
    pub async fn settle() {
        tokio::time::sleep(ATTACH_WAIT).await;
    }

    /// Stops the tracer (SIGINT, so it writes its summary) and reads the counts.
    pub async fn finish(mut self) -> Result<Counts, String> {
        let Some(mut child) = self.child.take() else {
            return Err("the tracer was already stopped".to_owned());
        };
        let interrupted = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        if !interrupted {
            let _ = child.kill();
        }
        let deadline = tokio::time::Instant::now() + DETACH_WAIT;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err("the tracer did not stop".to_owned());
                }
            }
        }
        let summary = std::fs::read_to_string(&self.out)
            .map_err(|e| format!("{}: {e}", self.out.display()))?;
        let _ = std::fs::remove_file(&self.out);
        let counts = Counts::parse(&summary);
        if counts.total() == 0 {
            return Err(format!(
                "no system calls counted (could the tracer attach?): {}",
                summary.lines().take(3).collect::<Vec<_>>().join(" / ")
            ));
        }
        Ok(counts)
    }
}

impl Drop for Counting {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Calls per system call name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts(BTreeMap<String, u64>);

impl Counts {
    /// Reads a `strace -c` table (`% time seconds usecs/call calls [errors] syscall`) or the
    /// per-thread tables of `perf trace -s` (`syscall calls errors total ...`), summed.
    pub fn parse(summary: &str) -> Counts {
        let mut counts = BTreeMap::new();
        for line in summary.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let row = match fields.as_slice() {
                // strace: the name is last, the calls fourth.
                [percent, _, _, calls, .., name] if percent.parse::<f64>().is_ok() => {
                    calls.parse::<u64>().ok().map(|c| (*name, c))
                }
                // perf trace: the name first, the calls second.
                [name, calls, ..] if is_name(name) => calls.parse::<u64>().ok().map(|c| (*name, c)),
                _ => None,
            };
            if let Some((name, calls)) = row.filter(|(name, _)| *name != "total") {
                *counts.entry(name.to_owned()).or_insert(0) += calls;
            }
        }
        Counts(counts)
    }

    /// Every call counted.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// Calls of `name`.
    pub fn of(&self, name: &str) -> u64 {
        self.0.get(name).copied().unwrap_or(0)
    }

    /// `total: name n, name n, ...` per request, the `top` most frequent calls first.
    pub fn per_request(&self, requests: usize, top: usize) -> String {
        let per = |n: u64| n as f64 / requests.max(1) as f64;
        let mut rows: Vec<(&String, &u64)> = self.0.iter().collect();
        rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let parts: Vec<String> = rows
            .iter()
            .take(top)
            .map(|(name, n)| format!("{name} {:.2}", per(**n)))
            .collect();
        let rest = self.total() - rows.iter().take(top).map(|(_, n)| **n).sum::<u64>();
        let rest = if rest > 0 {
            format!(", other {:.2}", per(rest))
        } else {
            String::new()
        };
        format!("{:.2}: {}{rest}", per(self.total()), parts.join(", "))
    }
}

fn is_name(token: &str) -> bool {
    token
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && token.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRACE: &str = "\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 40.00    0.004000           2      2000           writev
 30.00    0.003000           1      3000      1000 recvfrom
 30.00    0.003000           1       500           getrandom
------ ----------- ----------- --------- --------- ----------------
100.00    0.010000           1      5500      1000 total
";

    const PERF: &str = "
 Summary of events:

 svc-gateway (1234), 300 events, 100.0%

   syscall            calls  errors  total       min       avg       max       stddev
                                     (msec)    (msec)    (msec)    (msec)        (%)
   --------------- --------  ------ -------- --------- --------- ---------     ------
   epoll_wait           100      0     1.000     0.001     0.010     0.100      5.00%
   writev                50      0     0.500     0.001     0.010     0.100      5.00%

 tokio-runtime-w (1235), 100 events, 100.0%

   syscall            calls  errors  total       min       avg       max       stddev
   --------------- --------  ------ -------- --------- --------- ---------     ------
   writev                20      0     0.500     0.001     0.010     0.100      5.00%
";

    #[test]
    fn reads_a_strace_summary() {
        let counts = Counts::parse(STRACE);
        assert_eq!(counts.total(), 5500);
        assert_eq!(counts.of("recvfrom"), 3000);
        assert_eq!(counts.of("total"), 0);
        assert_eq!(
            counts.per_request(1000, 2),
            "5.50: recvfrom 3.00, writev 2.00, other 0.50"
        );
    }

    #[test]
    fn sums_the_threads_of_a_perf_trace_summary() {
        let counts = Counts::parse(PERF);
        assert_eq!(counts.of("writev"), 70);
        assert_eq!(counts.of("epoll_wait"), 100);
        assert_eq!(counts.total(), 170);
    }
}
