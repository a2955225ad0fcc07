//! How the calls of a turn end: the spans and audit records still owed by those that did not run
//! through the pipeline, and the reports (or the abort) the turn answers.

use crate::auth::Session;
use crate::call::CallReport;
use crate::fate::{CallFate, Fate, TurnAborted};
use crate::run::RunAborted;

use super::plan::{Planned, Step};
use super::{Dispatcher, audit};

/// How one call ended, and the span and audit record it still owes, if any.
pub(super) struct Ended {
    pub(super) place: usize,
    pub(super) id: String,
    pub(super) name: String,
    pub(super) fate: Fate,
    pub(super) owed: Option<audit::Owed>,
}

impl Dispatcher {
    /// `call`, ended in `fate` without running: it owes its audit record.
    pub(super) fn ended(&self, call: Planned, fate: Fate) -> Ended {
        Ended {
            owed: Some(self.owed(&call.step)),
            place: call.place,
            id: call.id,
            name: call.name,
            fate,
        }
    }

    /// The audit record a call of `step` owes when it does not run through the pipeline.
    pub(super) fn owed(&self, step: &Step) -> audit::Owed {
        audit::Owed(self.audit_subject(step))
    }

    /// Makes the spans and appends the audit records that the turn's `ended` calls still owe:
    /// those that did not run through the pipeline (each of the others made its own). A turn
    /// whose calls all ran through it owes nothing; a dispatcher without a store owes no
    /// record: nothing is awaited.
    pub(super) async fn settle_owed(&self, session: &Session, mut ended: Vec<Ended>) -> Vec<Ended> {
        if ended.iter().all(|call| call.owed.is_none()) {
            return ended;
        }
        for call in ended.iter().filter(|call| call.owed.is_some()) {
            self.trace_unrun(session, &call.id, &call.name, &call.fate);
        }
        if self.inner.store.is_none() {
            return ended;
        }
        let mut owed = Vec::new();
        for call in &mut ended {
            if let Some(audit) = call.owed.take() {
                owed.push((call.id.as_str(), call.name.as_str(), audit, &call.fate));
            }
        }
        // On the heap: the appends' futures are large, and every turn's future would hold them.
        Box::pin(self.audit_owed(session, owed)).await;
        ended
    }
}

/// The reports of a turn that ran, in the order the model emitted its calls.
pub(super) fn reports(mut ended: Vec<Ended>) -> Vec<CallReport> {
    ended.sort_by_key(|ended| ended.place);
    // Into a vector of its own: reusing `ended`'s would shrink it in place, and the allocator
    // would not find a block of its size free on the next turn.
    let mut reports = Vec::with_capacity(ended.len());
    reports.extend(ended.into_iter().map(|ended| {
        let result = match ended.fate {
            Fate::Answered(result) => result,
            // Only a turn that did not abort is reported: every call of it was answered.
            other => unreachable!("a call of a turn that ran ended {other:?}"),
        };
        CallReport {
            call_id: ended.id,
            tool: ended.name,
            result,
        }
    }));
    reports
}

/// The abort of a turn, with its calls in the order the model emitted them.
pub(super) fn aborted(reason: RunAborted, mut ended: Vec<Ended>) -> TurnAborted {
    ended.sort_by_key(|ended| ended.place);
    TurnAborted {
        reason,
        calls: ended
            .into_iter()
            .map(|ended| CallFate {
                call_id: ended.id,
                tool: ended.name,
                fate: ended.fate,
            })
            .collect(),
    }
}
