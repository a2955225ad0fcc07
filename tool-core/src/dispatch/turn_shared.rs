//! What every call of one turn shares while the turn runs: the signal raised when a call aborts
//! the run, the run's failed calls of the turn's tools (for repeat detection), what the turn's
//! counters waited for the store, where each answer goes as soon as it is known, and the turn of
//! a lone write that its claim begins (see `turn_claim`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::sync::mpsc::UnboundedSender;

use crate::call::CallReport;
use crate::result::CallResult;
use crate::run::RunAborted;
use crate::store::FailedCall;

/// Where a turn's reports are sent as each call is answered.
pub(super) type Answering = UnboundedSender<CallReport>;

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
    /// The run's failed calls of the turn's tools: tool → fingerprints. Ordered maps: an empty
    /// one is made without seeding a hasher, on every turn.
    pub(super) failed: BTreeMap<String, BTreeSet<String>>,
    /// What the turn's counters waited for a store that did not answer.
    pub(super) counters_waited: Duration,
    /// Where each answer is sent as soon as it is known, when the caller asked.
    pub(super) answering: Option<Answering>,
    /// Whether one call of the turn runs (the others, if any, answered without running): only
    /// that call can raise the signal, so its read does not listen for it.
    pub(super) lone: bool,
    /// The turn of a lone write, begun by its claim (see `turn_claim`), when it is.
    pub(super) turn_at_claim: Option<Box<TurnAtClaim>>,
}

impl Shared {
    /// What the calls of a turn share, their answers sent on `answering` if given; `lone` when
    /// one call of the turn runs.
    pub(super) fn new(answering: Option<Answering>, lone: bool) -> Self {
        Shared {
            answering,
            lone,
            ..Shared::default()
        }
    }

    /// Ready once a call of the turn aborts the run. A read that is the only call of its turn
    /// does not listen: no other call can raise the signal while it runs.
    pub(super) async fn raised(&self) {
        self.signal.raised().await;
    }

    /// Notes the run's `failed` calls of the turn's tools, for repeat detection.
    pub(super) fn note_failed(&mut self, failed: Vec<FailedCall>) {
        for failed in failed {
            self.failed
                .entry(failed.tool)
                .or_default()
                .insert(failed.request_hash);
        }
    }

    /// Sends the answer of call `id` of `tool`, when the caller asked for each as it comes.
    pub(super) fn answered(&self, id: &str, tool: &str, result: &CallResult) {
        if let Some(answering) = &self.answering {
            // A caller that stopped listening still gets the turn's reports.
            let _ = answering.send(CallReport {
                call_id: id.to_owned(),
                tool: tool.to_owned(),
                result: result.clone(),
            });
        }
    }
}

/// The turn of a lone write, still to be begun by its claim, and why the store refused it, if it
/// did.
pub(super) struct TurnAtClaim {
    /// Whether the claim has yet to begin the turn.
    pending: AtomicBool,
    refused: Mutex<Option<Refusal>>,
}

/// Why the store refused a turn that a write's claim began: the write did not start, and the
/// turn ends as an aborted run.
#[derive(Debug, Clone)]
pub(super) enum Refusal {
    /// The run was aborted earlier, as stored.
    Aborted(RunAborted),
    /// The run has had its `max_steps` turns.
    StepLimit(u32),
}

impl TurnAtClaim {
    pub(super) fn new() -> Self {
        TurnAtClaim {
            pending: AtomicBool::new(true),
            refused: Mutex::new(None),
        }
    }

    /// Whether the turn is still to be begun; it is not, after this.
    pub(super) fn take(&self) -> bool {
        self.pending.swap(false, Ordering::AcqRel)
    }

    pub(super) fn refusal(&self) -> Option<Refusal> {
        self.lock().clone()
    }

    pub(super) fn refuse(&self, refusal: Refusal) {
        *self.lock() = Some(refusal);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Refusal>> {
        self.refused
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}
