//! The run's counters, in the operation store when the dispatcher has one (so a restarted
//! process keeps them), else in the session: turns begun, attempts charged, failed calls noted,
//! the abort recorded.

use std::sync::{Mutex, MutexGuard};

use crate::auth::Session;
use crate::error::{ErrorKind, RunAborted};
use crate::run_limits::RunLimits;
use crate::store::{
    OperationStore, RunAbort, RunKey, RunRecord, StoreError, TurnGrant, TurnRequest,
};

use super::Dispatcher;

/// Where one session's run is counted.
pub(super) struct Ledger<'a> {
    dispatcher: &'a Dispatcher,
    session: &'a Session,
    store: Option<&'a dyn OperationStore>,
    pub(super) limits: RunLimits,
}

impl Dispatcher {
    /// The ledger of `session`'s run.
    pub(super) fn ledger<'a>(&'a self, session: &'a Session) -> Ledger<'a> {
        Ledger {
            dispatcher: self,
            session,
            store: self.inner.store.as_deref(),
            limits: session.limits().unwrap_or(self.inner.run_limits),
        }
    }
}

impl Ledger<'_> {
    fn key(&self) -> RunKey<'_> {
        RunKey {
            tenant: self.session.auth().tenant(),
            run_id: self.session.run_id(),
        }
    }

    fn local(&self) -> MutexGuard<'_, RunRecord> {
        lock(self.session.local_run())
    }

    /// Starts a turn calling `tools` (each tool once, with its number of calls).
    pub(super) async fn begin_turn(&self, tools: &[(&str, u32)]) -> Result<TurnGrant, StoreError> {
        let request = TurnRequest {
            run: self.key(),
            tools,
            limits: self.limits,
            now_ms: self.dispatcher.now_ms(),
        };
        match self.store {
            Some(store) => store.begin_turn(request).await,
            None => Ok(self.local().begin_turn(&request)),
        }
    }

    /// One more attempt of `tool`: `false` when its budget is spent.
    pub(super) async fn charge_attempt(&self, tool: &str) -> Result<bool, StoreError> {
        let budget = self.limits.retry_budget;
        let now_ms = self.dispatcher.now_ms();
        match self.store {
            Some(store) => store.charge_attempt(self.key(), tool, budget, now_ms).await,
            None => Ok(self.local().charge_attempt(tool, budget, now_ms)),
        }
    }

    /// Notes a failed call. Repeat detection is best effort: a store fault is logged, and the
    /// call's answer stands.
    pub(super) async fn note_failure(&self, tool: &str, request_hash: &str) {
        let now_ms = self.dispatcher.now_ms();
        match self.store {
            Some(store) => {
                let noted = store
                    .note_failure(self.key(), tool, request_hash, now_ms)
                    .await;
                if let Err(err) = noted {
                    tracing::warn!(error = %err, tool, "a failed call could not be noted; a repeat of it will run");
                }
            }
            None => self.local().note_failure(tool, request_hash, now_ms),
        }
    }

    /// Aborts the run: the session holds the abort at once, and the store keeps it for later
    /// processes. Answers the abort that stands (the first one).
    pub(super) async fn abort(&self, abort: RunAborted) -> RunAborted {
        let standing = self.session.abort(abort);
        let record = RunAbort {
            kind: standing.kind.as_str().to_owned(),
            reason: standing.reason.clone(),
        };
        let now_ms = self.dispatcher.now_ms();
        match self.store {
            Some(store) => {
                if let Err(err) = store.abort_run(self.key(), &record, now_ms).await {
                    tracing::warn!(error = %err, run = self.session.run_id(), "the abort of a run could not be stored; this session holds it");
                }
            }
            None => {
                self.local().abort(&record, now_ms);
            }
        }
        standing
    }
}

/// The abort a store holds, as the session reads it.
pub(super) fn aborted_from(record: RunAbort) -> RunAborted {
    RunAborted {
        kind: ErrorKind::from_name(&record.kind).unwrap_or(ErrorKind::PolicyViolation),
        reason: record.reason,
    }
}

fn lock(run: &Mutex<RunRecord>) -> MutexGuard<'_, RunRecord> {
    run.lock().unwrap_or_else(|poison| poison.into_inner())
}
