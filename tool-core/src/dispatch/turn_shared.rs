//! What every call of one turn shares while the turn runs: the signal raised when a call aborts
//! the run, and the run's failed calls of the turn's tools (for repeat detection).

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use tokio::sync::Notify;

/// Raised once, when a call of the turn aborts the run: calls not started never start, reads in
/// flight stop.
#[derive(Default)]
pub(super) struct Signal {
    fired: OnceLock<()>,
    notify: Notify,
}

impl Signal {
    pub(super) fn fire(&self) {
        if self.fired.set(()).is_ok() {
            self.notify.notify_waiters();
        }
    }

    pub(super) fn is_fired(&self) -> bool {
        self.fired.get().is_some()
    }

    /// Ready once the signal is raised.
    pub(super) async fn raised(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_fired() {
                return;
            }
            notified.await;
        }
    }
}

/// What every call of one turn shares.
#[derive(Default)]
pub(super) struct Shared {
    pub(super) signal: Signal,
    /// The run's failed calls of the turn's tools: tool → fingerprints.
    pub(super) failed: HashMap<String, HashSet<String>>,
}
