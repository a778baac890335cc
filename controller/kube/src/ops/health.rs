//! What `/readyz` answers, set by the controller as it moves from start to
//! standby, to leading, to caches synced, to stopping.
//!
//! A standby replica (waiting for the Lease) is ready. Nothing routes traffic
//! to the controller, so readiness only gates rollouts: if a standby were
//! never ready, a rolling update (new pod ready before the old one goes)
//! would wait forever on a new pod that cannot lead until the old one stops.
//! A leader is ready only once its caches are synced, so a rollout does not
//! retire the old leader while the new one is still listing.

use std::sync::atomic::{AtomicU8, Ordering};

/// Where the controller stands, as `/readyz` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Readiness {
    /// Starting: settings read, nothing decided yet. Not ready.
    Starting = 0,
    /// Waiting for the Lease while another replica leads. Ready.
    Standby = 1,
    /// Leading, caches of Runs, Flows and children still being listed. Not ready.
    Syncing = 2,
    /// Leading with synced caches: reconciling. Ready.
    Ready = 3,
    /// Shutting down after a signal or a lost Lease. Not ready.
    Stopping = 4,
}

impl Readiness {
    /// Whether `/readyz` answers 200.
    pub fn is_ready(self) -> bool {
        matches!(self, Readiness::Standby | Readiness::Ready)
    }

    /// The word `/readyz` answers with.
    pub fn as_str(self) -> &'static str {
        match self {
            Readiness::Starting => "starting",
            Readiness::Standby => "standby",
            Readiness::Syncing => "syncing caches",
            Readiness::Ready => "ready",
            Readiness::Stopping => "stopping",
        }
    }

    fn from_u8(n: u8) -> Readiness {
        match n {
            1 => Readiness::Standby,
            2 => Readiness::Syncing,
            3 => Readiness::Ready,
            4 => Readiness::Stopping,
            _ => Readiness::Starting,
        }
    }
}

/// The controller's readiness, shared between the controller (which sets
/// it) and the HTTP server (which reports it).
#[derive(Debug)]
pub struct Health {
    state: AtomicU8,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            state: AtomicU8::new(Readiness::Starting as u8),
        }
    }
}

impl Health {
    /// Starting, not ready.
    pub fn new() -> std::sync::Arc<Health> {
        std::sync::Arc::new(Health::default())
    }

    /// Where the controller stands now.
    pub fn get(&self) -> Readiness {
        Readiness::from_u8(self.state.load(Ordering::Acquire))
    }

    /// Moves to `to`. Once stopping, the controller stays stopping.
    pub fn set(&self, to: Readiness) {
        let _ = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                (now != Readiness::Stopping as u8).then_some(to as u8)
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standby_and_synced_leader_are_ready_others_not() {
        let health = Health::new();
        assert!(!health.get().is_ready());
        health.set(Readiness::Standby);
        assert!(health.get().is_ready());
        health.set(Readiness::Syncing);
        assert!(!health.get().is_ready());
        health.set(Readiness::Ready);
        assert!(health.get().is_ready());
        health.set(Readiness::Stopping);
        health.set(Readiness::Ready);
        assert_eq!(health.get(), Readiness::Stopping, "stopping is final");
    }
}
