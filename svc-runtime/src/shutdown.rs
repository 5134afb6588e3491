//! Stopping: the signal both services stop on, and the [`Drain`] that turns it into a bounded
//! shutdown.
//!
//! A drain has three phases. Serving; then draining (readiness fails, connections are asked to
//! close after their current request); then, when the grace period is over, the deadline:
//! whatever still streams ends with its final event, and the connections left are dropped.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::watch;

/// Completes on Ctrl-C, or SIGTERM on Unix: the usual trigger of a graceful shutdown.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}

/// Where a shutdown stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Business as usual.
    Serving,
    /// Readiness fails; connections close after their current request.
    Draining,
    /// The grace period is over: streams end now.
    Deadline,
}

/// The shared phase of one process's shutdown; cheap to clone. Phases only move forward.
#[derive(Debug, Clone)]
pub struct Drain {
    phase: Arc<watch::Sender<Phase>>,
}

impl Default for Drain {
    fn default() -> Drain {
        Drain::new()
    }
}

impl Drain {
    /// A drain in the serving phase.
    pub fn new() -> Drain {
        Drain {
            phase: Arc::new(watch::Sender::new(Phase::Serving)),
        }
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        *self.phase.borrow()
    }

    /// Whether the shutdown has begun (readiness must fail from now on).
    pub fn is_draining(&self) -> bool {
        self.phase() >= Phase::Draining
    }

    /// Begins draining (no-op when already begun).
    pub fn start(&self) {
        self.advance(Phase::Draining);
    }

    /// Declares the grace period over.
    pub fn reach_deadline(&self) {
        self.advance(Phase::Deadline);
    }

    fn advance(&self, to: Phase) {
        self.phase.send_if_modified(|phase| {
            let moved = *phase < to;
            if moved {
                *phase = to;
            }
            moved
        });
    }

    /// Watches the phase.
    pub fn subscribe(&self) -> watch::Receiver<Phase> {
        self.phase.subscribe()
    }

    /// Completes once the phase is at least `phase`.
    pub fn reached(&self, phase: Phase) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.subscribe();
        async move {
            // An error means every sender is gone: nothing will ever move the phase again.
            let _ = rx.wait_for(|now| *now >= phase).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn phases_only_move_forward() {
        let drain = Drain::new();
        assert!(!drain.is_draining());
        let deadline = drain.reached(Phase::Deadline);
        drain.reach_deadline();
        drain.start();
        assert_eq!(drain.phase(), Phase::Deadline);
        assert!(drain.is_draining());
        deadline.await;
    }
}
