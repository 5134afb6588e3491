//! The soak's figures and whether each property held.

use std::collections::BTreeMap;
use std::time::Duration;

use super::plan::Window;
use super::traffic::Outcome;

/// A gateway's resident memory after warm-up and at the end, in KiB.
#[derive(Debug, Clone)]
pub struct Memory {
    pub name: String,
    pub after_warm_up: u64,
    pub at_end: u64,
}

/// Everything the verdict is made from.
#[derive(Debug)]
pub struct Evidence<'a> {
    pub outcomes: &'a [Outcome],
    pub windows: &'a [Window],
    /// Requests the upstream received, and the Idempotency-Keys it received more than once.
    pub upstream_calls: u64,
    pub keys_twice: Vec<String>,
    pub memory: Vec<Memory>,
    pub rss_tolerance_kib: u64,
}

/// Whether `outcome` is an answer SPEC.md allows given the faults it overlapped.
fn allowed(outcome: &Outcome, windows: &[Window]) -> bool {
    if outcome.ok() {
        return true;
    }
    let Some(status) = outcome.status else {
        return false;
    };
    windows
        .iter()
        .filter(|w| w.touches(outcome.sent, outcome.done))
        .flat_map(|w| w.fault.allowed())
        .any(|&(s, code)| s == status && code == outcome.code)
}

fn label(outcome: &Outcome) -> String {
    match outcome.status {
        Some(status) => format!("{status} {}", outcome.code).trim_end().to_owned(),
        None => outcome.code.clone(),
    }
}

fn answers(outcomes: &[&Outcome]) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for o in outcomes {
        *counts.entry(label(o)).or_default() += 1;
    }
    counts
        .iter()
        .map(|(l, n)| format!("{l} x{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn secs(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64())
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// Prints the table and returns whether every property held.
pub fn report(evidence: &Evidence<'_>) -> bool {
    let mut pass = true;
    let outcomes = evidence.outcomes;
    println!(
        "{:<22} {:>12} {:>8} {:>10} {:>12}  answers",
        "fault", "window s", "requests", "disallowed", "recovered"
    );
    for window in evidence.windows {
        let touching: Vec<&Outcome> = outcomes
            .iter()
            .filter(|o| window.touches(o.sent, o.done))
            .collect();
        let disallowed = touching
            .iter()
            .filter(|o| !allowed(o, evidence.windows))
            .count();
        // The first request sent after the restore that was served.
        let recovery = outcomes
            .iter()
            .filter(|o| o.sent >= window.restore && o.ok())
            .map(|o| o.done.saturating_sub(window.restore))
            .min();
        let recovered = recovery.is_some_and(|r| r <= super::plan::RECOVERY_BOUND);
        pass &= disallowed == 0 && recovered;
        println!(
            "{:<22} {:>12} {:>8} {:>10} {:>12}  {}",
            window.fault.name(),
            format!("{}-{}", secs(window.cut), secs(window.restore)),
            touching.len(),
            disallowed,
            recovery.map_or("never".to_owned(), |r| format!("{} ms", r.as_millis())),
            answers(&touching)
        );
    }
    let quiet: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| !evidence.windows.iter().any(|w| w.touches(o.sent, o.done)))
        .collect();
    let quiet_bad = quiet.iter().filter(|o| !o.ok()).count();
    pass &= quiet_bad == 0;
    println!(
        "{:<22} {:>12} {:>8} {:>10} {:>12}  {}",
        "none",
        "",
        quiet.len(),
        quiet_bad,
        "",
        answers(&quiet)
    );
    let served = outcomes.iter().filter(|o| o.ok()).count();
    println!();
    println!(
        "requests sent {}, answered 200 {}; upstream received {}; Idempotency-Keys received twice: {}",
        outcomes.len(),
        served,
        evidence.upstream_calls,
        evidence.keys_twice.len()
    );
    pass &= evidence.keys_twice.is_empty();
    for memory in &evidence.memory {
        let growth = memory.at_end.saturating_sub(memory.after_warm_up);
        let ok = growth <= evidence.rss_tolerance_kib;
        pass &= ok;
        println!(
            "{} resident memory: {} after warm-up, {} at the end (+{}, bound +{}){}",
            memory.name,
            mib(memory.after_warm_up),
            mib(memory.at_end),
            mib(growth),
            mib(evidence.rss_tolerance_kib),
            if ok { "" } else { "  GREW" }
        );
    }
    println!();
    println!("soak: {}", if pass { "PASS" } else { "FAIL" });
    pass
}
