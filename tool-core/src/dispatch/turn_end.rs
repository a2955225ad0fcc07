//! How the calls of a turn end: the spans and audit records still owed by those that did not run
//! through the pipeline, and the reports (or the abort) the turn answers.

use crate::auth::Session;
use crate::call::{CallReport, ToolCall};
use crate::fate::{CallFate, Fate, TurnAborted};
use crate::result::CallResult;
use crate::run::RunAborted;
use crate::store::TurnGrant;

use super::ledger::{Ledger, step_limit_reached};
use super::plan::{Planned, Step};
use super::turn_shared::Shared;
use super::{Dispatcher, answers, approval, audit};

/// How one call ended, and the span and audit record it still owes, if any.
pub(super) struct Ended {
    pub(super) place: usize,
    pub(super) id: String,
    pub(super) name: String,
    pub(super) fate: Fate,
    pub(super) owed: Option<audit::Owed>,
}

impl Ended {
    /// How the call at `place` ended, its answer sent on the turn's `shared` way for answers
    /// (see [`Shared::answered`]).
    pub(super) fn sent(
        shared: &Shared,
        place: usize,
        id: String,
        name: String,
        fate: Fate,
        owed: Option<audit::Owed>,
    ) -> Ended {
        if let Fate::Answered(result) = &fate {
            shared.answered(&id, &name, result);
        }
        Ended {
            place,
            id,
            name,
            fate,
            owed,
        }
    }

    /// The report of a call of a turn that ran: every call of it was answered.
    pub(super) fn into_report(self) -> CallReport {
        let result = match self.fate {
            Fate::Answered(result) => result,
            other => unreachable!("a call of a turn that ran ended {other:?}"),
        };
        CallReport {
            call_id: self.id,
            tool: self.name,
            result,
        }
    }
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

impl Dispatcher {
    /// A turn of a run aborted before it: none of its `calls` runs, each has its span and
    /// record.
    pub(super) async fn turn_of_aborted_run(
        &self,
        session: &Session,
        calls: Vec<ToolCall>,
    ) -> TurnAborted {
        let reason = session
            .aborted()
            .cloned()
            .expect("only the turn of an aborted run");
        let ended = calls
            .into_iter()
            .enumerate()
            .map(|(place, call)| Ended {
                place,
                id: call.id,
                name: call.name,
                fate: Fate::NotStarted,
                owed: Some(audit::Owed(None)),
            })
            .collect();
        self.settle_owed(session, ended).await;
        TurnAborted {
            reason,
            calls: Vec::new(),
        }
    }

    /// A turn with a call the session may not make: the run is aborted before anything starts;
    /// that call's fate is the abort, the others' not to have started.
    pub(super) async fn abort_before_start(
        &self,
        session: &Session,
        ledger: &Ledger<'_>,
        planned: Vec<Planned>,
        answered: Vec<Ended>,
    ) -> TurnAborted {
        let err = planned
            .iter()
            .find_map(|call| call.step.abort())
            .expect("a call that aborts the run");
        let reason = Box::pin(ledger.abort(RunAborted::from_error(err))).await;
        let ended = planned.into_iter().map(|call| {
            let fate = match call.step.abort() {
                Some(_) => Fate::Aborted,
                None => Fate::NotStarted,
            };
            self.ended(call, fate)
        });
        let ended = self
            .settle_owed(session, ended.chain(answered).collect())
            .await;
        aborted(reason, ended)
    }

    /// A turn the run's counters refused (`grant`, which did not admit it): none of its calls
    /// runs. A run aborted in the store, or a turn past the step limit (which aborts the run),
    /// answers the abort; a turn that would pass the tool-call limit answers each of its calls
    /// `call_budget_exhausted`.
    pub(super) async fn turn_not_admitted(
        &self,
        session: &Session,
        ledger: &Ledger<'_>,
        grant: TurnGrant,
        planned: Vec<Planned>,
        answered: Vec<Ended>,
        shared: &Shared,
    ) -> Result<Vec<CallReport>, TurnAborted> {
        match grant {
            TurnGrant::Aborted(record) => {
                let reason = session.abort(record);
                Err(self.none_started(session, reason, planned, answered).await)
            }
            TurnGrant::StepLimit { max_steps } => {
                let reason = Box::pin(ledger.abort(step_limit_reached(max_steps))).await;
                Err(self
                    .past_step_limit(session, reason, planned, answered)
                    .await)
            }
            TurnGrant::CallLimit {
                used,
                max_tool_calls,
            } => {
                let limit = (used, max_tool_calls);
                Ok(self
                    .past_call_limit(session, limit, planned, answered, shared)
                    .await)
            }
            TurnGrant::Admitted(_) => unreachable!("a turn admitted is not refused"),
        }
    }

    /// A turn the store found its run aborted at: none of its calls started, and the abort
    /// lists none of them.
    async fn none_started(
        &self,
        session: &Session,
        reason: RunAborted,
        planned: Vec<Planned>,
        answered: Vec<Ended>,
    ) -> TurnAborted {
        let ended = planned
            .into_iter()
            .map(|call| self.ended(call, Fate::NotStarted));
        self.settle_owed(session, ended.chain(answered).collect())
            .await;
        aborted(reason, Vec::new())
    }

    /// A turn past the run's step limit, which aborted the run for `reason`: none of its calls
    /// started.
    async fn past_step_limit(
        &self,
        session: &Session,
        reason: RunAborted,
        planned: Vec<Planned>,
        answered: Vec<Ended>,
    ) -> TurnAborted {
        let ended = planned
            .into_iter()
            .map(|call| self.ended(call, Fate::NotStarted));
        let ended = self
            .settle_owed(session, ended.chain(answered).collect())
            .await;
        aborted(reason, ended)
    }

    /// A turn that would pass the run's tool-call limit (`used` of `max_tool_calls`): none of
    /// its calls runs, each answers `call_budget_exhausted`.
    async fn past_call_limit(
        &self,
        session: &Session,
        (used, max_tool_calls): (u32, u32),
        planned: Vec<Planned>,
        answered: Vec<Ended>,
        shared: &Shared,
    ) -> Vec<CallReport> {
        let calls = planned.len() + answered.len();
        let ended = planned.into_iter().map(|call| {
            let err = answers::call_budget_spent(used, max_tool_calls, calls);
            let result = CallResult::from_error(&err);
            shared.answered(&call.id, &call.name, &result);
            self.ended(call, Fate::Answered(result))
        });
        let ended = self
            .settle_owed(session, ended.chain(answered).collect())
            .await;
        reports(ended)
    }

    /// The end of a turn whose calls ran: their records settled, then their reports, or the
    /// abort when a call `fired` it (a call of a turn of `several` may have asked for an
    /// approval after the abort was stored: it is rejected).
    pub(super) async fn end_turn(
        &self,
        session: &Session,
        ledger: &Ledger<'_>,
        ended: Vec<Ended>,
        fired: bool,
        several: bool,
    ) -> Result<Vec<CallReport>, TurnAborted> {
        let mut ended = self.settle_owed(session, ended).await;
        if !fired {
            return Ok(reports(ended));
        }
        let reason = session
            .aborted()
            .cloned()
            .expect("the signal is raised after the session is aborted");
        if several {
            let late = Box::pin(ledger.reject_late_approvals()).await;
            for call in &mut ended {
                if let Fate::Answered(result) = &mut call.fate {
                    approval::answer_late_rejection(result, &late);
                }
            }
        }
        Err(aborted(reason, ended))
    }
}

/// The calls of a turn answered without being planned (those sharing an id), each sent to
/// the caller as it asked: they owe their spans and records.
pub(super) fn answered_now(answered: Vec<(usize, CallReport)>, shared: &Shared) -> Vec<Ended> {
    if answered.is_empty() {
        // The common turn, whose ids are all its own: nothing to convert.
        return Vec::new();
    }
    for (_, report) in &answered {
        shared.answered(&report.call_id, &report.tool, &report.result);
    }
    answered
        .into_iter()
        .map(|(place, report)| Ended {
            place,
            id: report.call_id,
            name: report.tool,
            fate: Fate::Answered(report.result),
            owed: Some(audit::Owed(None)),
        })
        .collect()
}

/// The reports of a turn that ran, in the order the model emitted its calls.
pub(super) fn reports(mut ended: Vec<Ended>) -> Vec<CallReport> {
    ended.sort_by_key(|ended| ended.place);
    // Into a vector of its own: reusing `ended`'s would shrink it in place, and the allocator
    // would not find a block of its size free on the next turn.
    let mut reports = Vec::with_capacity(ended.len());
    // Only a turn that did not abort is reported: every call of it was answered.
    reports.extend(ended.into_iter().map(Ended::into_report));
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
