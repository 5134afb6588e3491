//! What the soak does when: the faults on a timeline, and the answers SPEC.md allows while
//! each is on.

use std::time::Duration;

/// One injected fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Every connection to Redis is cut and new ones refused.
    Redis,
    /// The same for one of the two auth servers (both gateways reach it through one proxy).
    OneAuthServer,
    /// The same for PostgreSQL, behind both auth servers.
    Postgres,
    /// The upstream answers later than the gateway's provider timeout.
    SlowUpstream,
}

impl Fault {
    pub const ALL: [Fault; 4] = [
        Fault::Redis,
        Fault::OneAuthServer,
        Fault::Postgres,
        Fault::SlowUpstream,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::Redis => "Redis cut",
            Fault::OneAuthServer => "one auth server cut",
            Fault::Postgres => "PostgreSQL cut",
            Fault::SlowUpstream => "upstream slow",
        }
    }

    /// Its length in a 60 s run.
    fn full_length(self) -> Duration {
        match self {
            Fault::Redis => Duration::from_secs(10),
            _ => Duration::from_secs(5),
        }
    }

    /// The answers besides 200 that SPEC.md allows while it is on: Redis fails open, a second
    /// auth replica takes the calls, a down identity store is 503, a late provider 504.
    pub fn allowed(self) -> &'static [(u16, &'static str)] {
        match self {
            Fault::Redis | Fault::OneAuthServer => &[],
            Fault::Postgres => &[(503, "SERVICE_DEGRADED"), (503, "AUTH_UNAVAILABLE")],
            Fault::SlowUpstream => &[(504, "PROVIDER_TIMEOUT")],
        }
    }
}

/// Service must be back this long after a restore; answers allowed during a fault stay
/// allowed until then.
pub const RECOVERY_BOUND: Duration = Duration::from_secs(1);

/// The least quiet time after each fault.
pub const MIN_GAP: Duration = Duration::from_millis(1200);

/// One fault's place on the timeline, from the start of the load.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub fault: Fault,
    pub cut: Duration,
    pub restore: Duration,
}

impl Window {
    /// Whether a request in flight from `sent` to `done` overlapped the fault or the
    /// recovery bound after it.
    pub fn touches(&self, sent: Duration, done: Duration) -> bool {
        sent < self.restore + RECOVERY_BOUND && done >= self.cut
    }
}

/// The faults spread over `total`, in [`Fault::ALL`]'s order, without overlap: the first
/// tenth is warm-up, the last tenth a quiet tail, and equal gaps (each at least
/// [`MIN_GAP`]) separate them. A run shorter than 60 s gets proportionally shorter faults.
pub fn schedule(total: Duration) -> Vec<Window> {
    let edge = total / 10;
    let full: Duration = Fault::ALL.iter().map(|f| f.full_length()).sum();
    let room = total.saturating_sub(edge * 2).saturating_sub(MIN_GAP * 4);
    let scale = (total.as_secs_f64() / 60.0)
        .min(room.as_secs_f64() / full.as_secs_f64())
        .min(1.0);
    let lengths: Vec<Duration> = Fault::ALL
        .iter()
        .map(|f| f.full_length().mul_f64(scale))
        .collect();
    let busy: Duration = lengths.iter().sum();
    let gap = total.saturating_sub(edge * 2).saturating_sub(busy) / 4;
    let mut at = edge + gap / 2;
    Fault::ALL
        .iter()
        .zip(lengths)
        .map(|(&fault, length)| {
            let window = Window {
                fault,
                cut: at,
                restore: at + length,
            };
            at += length + gap;
            window
        })
        .collect()
}

/// The warm-up: resident memory is first read when it ends.
pub fn warm_up(total: Duration) -> Duration {
    total / 10
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_do_not_overlap_and_leave_room_to_recover() {
        for seconds in [10, 60, 120] {
            let total = Duration::from_secs(seconds);
            let windows = schedule(total);
            assert_eq!(windows.len(), 4);
            for w in &windows {
                assert!(
                    w.restore - w.cut >= Duration::from_millis(500),
                    "{seconds}: {w:?}"
                );
            }
            assert!(windows[0].cut >= warm_up(total));
            for pair in windows.windows(2) {
                assert!(
                    pair[1].cut >= pair[0].restore + RECOVERY_BOUND,
                    "{seconds}: {pair:?}"
                );
            }
            assert!(windows[3].restore + RECOVERY_BOUND <= total, "{seconds}");
        }
        let sixty = schedule(Duration::from_secs(60));
        assert_eq!(sixty[0].restore - sixty[0].cut, Duration::from_secs(10));
        assert_eq!(sixty[2].restore - sixty[2].cut, Duration::from_secs(5));
    }
}
