//! A model turn as a batch: the run's counters asked once, the calls planned, then run
//! concurrently (each unit on its own task when the dispatcher spawns them), one result per
//! call id; and what happens to the others when one call aborts the run.

use std::future::Future;
use std::sync::Arc;

use futures_util::future::{Either, join_all, select};
use tracing::Instrument;

use crate::auth::Session;
use crate::call::{Arguments, CallReport, ToolCall};
use crate::error::{ErrorClass, ToolError};
use crate::fate::{Fate, TurnAborted};
use crate::registry::RegisteredTool;
use crate::result::CallResult;
use crate::run::RunAborted;
use crate::store::TurnGrant;

use super::ledger::Ledger;
use super::plan::{self, Planned, PreparedWrite, Step};
use super::read_audit::WriteReadsAfter;
use super::turn_end::{self, Ended};
use super::turn_shared::{Answering, Shared, TurnAtClaim};
use super::{Dispatcher, answers, attempt, audit, call_span, repeat};

/// A call's tool and fingerprint, when a failure of it is to be noted for repeat detection.
type Noted<'n> = Option<(&'n str, String)>;

/// How a call's step ran: an outcome, with what to note if it failed, or a fate decided
/// already (a read stopped by the run's abort, a write whose turn the store refused); and the
/// call id, given back.
enum Ran<'n> {
    Outcome(Result<CallResult, ToolError>, Noted<'n>, String),
    Ended(Fate, String),
}

/// A call about to run: its id, its step, and whether the run's retry budget lets it run (its
/// name is kept by the caller, for its report).
struct Go {
    /// The call id, lent to the call's context while it runs and given back with its fate.
    id: String,
    step: Step,
    granted: bool,
}

impl Dispatcher {
    /// Runs every call of one model turn; one report per call id, in the order given.
    ///
    /// The turn first counts against the run's limits
    /// ([`RunLimits`](crate::RunLimits)): a turn past the step limit aborts the run; a turn
    /// that would pass the tool-call limit runs none of its calls, each answering
    /// `call_budget_exhausted`; a call of a tool whose retry budget is spent answers
    /// `retry_budget_exhausted` without running; a call identical to one that failed earlier in
    /// the run answers `repeated_call` without running.
    ///
    /// The calls then run concurrently, each unit on a task of its own unless
    /// [`DispatcherBuilder::spawn_calls`](crate::dispatch::DispatcherBuilder::spawn_calls) is off. Writes
    /// naming the same `resource` value, or sharing an idempotency key, run one after the other
    /// in the order the model emitted them; a write identical to an earlier one of the turn
    /// (same key, same arguments) runs once, and answers that one's outcome as a replay.
    ///
    /// Each call id gets exactly one report. When several calls of the turn share an id, none
    /// of them runs: a result could not be matched to one of them. That id gets one report, at
    /// the place of its first call, an `invalid_arguments` error saying so; the other calls of
    /// the turn run as usual. (The provider formats give a call that came without an id one
    /// that no other call of its turn has, so a shared id is always the model's.)
    ///
    /// Each call has its audit record, when the dispatcher has a store. A write's is written
    /// before the turn answers (a success carries it); the records of the turn's reads are
    /// written after it, in one statement, and before any later record of this dispatcher
    /// (see [`flush_audit`](Self::flush_audit) for what a crash in between loses).
    ///
    /// When a call aborts the run (a missing permission, checked for every call before any
    /// runs; an abort its tool returns; the step limit), the turn answers `Err`: calls that had
    /// not started never start, reads in flight are stopped, writes in flight run to their end
    /// (their outcome recorded), and [`TurnAborted::calls`] says what became of each call. The
    /// session stays aborted, and so does the run in the store: later turns run nothing.
    ///
    /// ```
    /// use toolgate::prelude::*;
    ///
    /// /// Look up an order by its id.
    /// #[tool]
    /// async fn get_order(order_id: String) -> Result<String, ToolError> {
    ///     Ok(format!("{order_id}: paid"))
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let mut registry = Registry::new();
    /// registry.register::<get_order>().unwrap();
    /// let dispatcher = Dispatcher::builder(registry).build();
    /// let session = Session::new(AuthContext::new("acme", "agent"), "run-1");
    /// let call = |id: &str, order: &str| {
    ///     ToolCall::new(id, "get_order", serde_json::json!({"order_id": order}))
    /// };
    /// let turn = vec![call("c1", "ORD-1"), call("c2", "ORD-2"), call("c1", "ORD-3")];
    /// let reports = dispatcher.dispatch_turn(&session, turn).await.unwrap();
    /// assert_eq!(reports.len(), 2);
    /// assert_eq!(reports[0].call_id, "c1");
    /// assert_eq!(reports[0].result.error.as_ref().unwrap().kind, "invalid_arguments");
    /// assert_eq!(reports[1].call_id, "c2");
    /// assert_eq!(reports[1].result.to_json()["data"], "ORD-2: paid");
    /// # });
    /// ```
    pub async fn dispatch_turn(
        &self,
        session: &Session,
        calls: Vec<ToolCall>,
    ) -> Result<Vec<CallReport>, TurnAborted> {
        self.turn(session, calls, None).await
    }

    /// The turn of [`dispatch_turn`](Self::dispatch_turn); each call answered is sent on
    /// `answering` as soon as it is, when given.
    pub(super) async fn turn(
        &self,
        session: &Session,
        calls: Vec<ToolCall>,
        answering: Option<Answering>,
    ) -> Result<Vec<CallReport>, TurnAborted> {
        // The records of the turn's reads are written after it, however it ends.
        let _reads = WriteReadsAfter(self);
        if session.aborted().is_some() {
            // A turn of an aborted run: none of its calls runs, each has its span and record.
            return Err(self.turn_of_aborted_run(session, calls).await);
        }
        let (mut planned, answered) = self.planner(session).plan(calls);
        let mut shared = Shared::new(answering, planned.len() == 1);
        let answered = turn_end::answered_now(answered, &shared);
        let ledger = self.ledger(session);
        if planned.iter().any(|call| call.step.abort().is_some()) {
            // A call the session may not make: the run stops before anything starts.
            return Err(self
                .abort_before_start(session, &ledger, planned.into_vec(), answered)
                .await);
        }
        if planned.len() == 1
            && answered.is_empty()
            && self.begins_turn_at_claim(&planned[0], &ledger)
        {
            // A lone write whose first request to the store is its claim: the claim begins the
            // turn (see `turn_claim`).
            shared.turn_at_claim = Some(Box::new(TurnAtClaim::new()));
            // On the heap: a write's path is long, and a read's turn would hold it beside its
            // own.
            return Box::pin(self.turn_begun_at_claim(session, planned.into_vec(), shared)).await;
        }
        // In a block of its own: what the grant needs is not held while the calls run.
        let waited = {
            let counts = plan::tool_counts(&planned);
            let (grant, waited) = ledger.begin_turn(counts.as_slice()).await;
            shared.counters_waited = waited;
            match grant {
                TurnGrant::Admitted(admission) => {
                    plan::apply_grants(&mut planned, counts.as_slice(), &admission.granted);
                    shared.note_failed(admission.failed);
                }
                refused => {
                    let planned = planned.into_vec();
                    return self
                        .turn_not_admitted(session, &ledger, refused, planned, answered, &shared)
                        .await;
                }
            }
            waited
        };
        // What the counters waited for the store is waited less by a write's claim.
        let ledger = ledger.after_waiting(waited);
        let several = planned.len() > 1;
        let (mut ended, fired) = if let [_] = planned.as_slice() {
            // The common turn: one call, run here, in place (a box of its future on every turn
            // cost more than moving the turn's larger future does), on the turn's ledger, and
            // answered without a vector of what ended.
            let Planned {
                place,
                id,
                name,
                step,
                granted,
                copy_of: _,
            } = planned.into_iter().next().expect("one call");
            // The turn's only call: no other could have raised the signal, nor be copied.
            let (fate, owed, id) = if session.aborted().is_some() {
                (Fate::NotStarted, Some(self.owed(&step)), id)
            } else {
                let go = Go { id, step, granted };
                self.run_planned(session, &ledger, go, &name, &shared).await
            };
            let ended = Ended::sent(&shared, place, id, name, fate, owed);
            let fired = shared.signal.is_fired();
            if answered.is_empty() && !fired && ended.owed.is_none() {
                // Answered, and its record made: its report is the turn's.
                return Ok(vec![ended.into_report()]);
            }
            (vec![ended], fired)
        } else {
            // On the heap: the futures of the calls are large, and a turn's future that held
            // them would be moved whole at every step of building it.
            Box::pin(self.run_several(session, planned.into_vec(), shared)).await
        };
        ended.extend(answered);
        self.end_turn(session, &ledger, ended, fired, several).await
    }

    /// Runs one call through the pipeline: a turn of one call. `Err` means the run is aborted
    /// (a missing permission, revoked credentials, a policy violation, a run budget spent);
    /// every other outcome is a report for the model.
    pub async fn dispatch(
        &self,
        session: &Session,
        call: ToolCall,
    ) -> Result<CallReport, RunAborted> {
        match self.dispatch_turn(session, vec![call]).await {
            Ok(mut reports) => Ok(reports.pop().expect("one report per call")),
            Err(aborted) => Err(aborted.reason),
        }
    }

    /// The calls of a turn of several, each unit of them concurrently (see [`plan::units`]);
    /// and whether one of them aborted the run.
    async fn run_several(
        &self,
        session: &Session,
        planned: Vec<Planned>,
        shared: Shared,
    ) -> (Vec<Ended>, bool) {
        let units = plan::units_of(planned);
        let shared = Arc::new(shared);
        let ended = self.run_units(session, units, &shared).await;
        (ended, shared.signal.is_fired())
    }

    /// Every unit, concurrently: on tasks of their own when there are several and the
    /// dispatcher spawns them, else joined here.
    async fn run_units(
        &self,
        session: &Session,
        units: Vec<Vec<Planned>>,
        shared: &Arc<Shared>,
    ) -> Vec<Ended> {
        if units.len() == 1 {
            let unit = units.into_iter().next().expect("one unit");
            return self.run_unit(session, unit, shared).await;
        }
        if self.inner.spawn_calls {
            let handles: Vec<_> = units
                .into_iter()
                .map(|unit| {
                    let dispatcher = self.clone();
                    let session = session.clone();
                    let shared = shared.clone();
                    let places: Vec<(usize, String, String)> = unit
                        .iter()
                        .map(|call| (call.place, call.id.clone(), call.name.clone()))
                        .collect();
                    // The calls' spans stay children of the caller's.
                    let unit = async move { dispatcher.run_unit(&session, unit, &shared).await };
                    let task = tokio::spawn(unit.in_current_span());
                    (places, task)
                })
                .collect();
            let mut ended = Vec::new();
            for (places, task) in handles {
                match task.await {
                    Ok(unit) => ended.extend(unit),
                    Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
                    // The runtime is shutting down: the unit's calls were stopped.
                    Err(_) => ended.extend(places.into_iter().map(|(place, id, name)| Ended {
                        place,
                        id,
                        name,
                        fate: Fate::Cancelled,
                        owed: Some(audit::Owed(None)),
                    })),
                }
            }
            ended
        } else {
            let runs = units
                .into_iter()
                .map(|unit| self.run_unit(session, unit, shared));
            join_all(runs).await.into_iter().flatten().collect()
        }
    }

    /// The calls of one unit, one after the other.
    pub(super) async fn run_unit(
        &self,
        session: &Session,
        unit: Vec<Planned>,
        shared: &Shared,
    ) -> Vec<Ended> {
        let ledger = self
            .ledger(session)
            .after_waiting(shared.counters_waited)
            .with_turn_at_claim(shared.turn_at_claim.as_deref());
        let mut ended: Vec<Ended> = Vec::with_capacity(unit.len());
        let mut unit = unit.into_iter();
        // Not a `for` loop: its `next()` would live through the body, awaits included, and
        // this future would hold a whole call beside the parts taken from it.
        loop {
            let Some(Planned {
                place,
                id,
                name,
                step,
                granted,
                copy_of,
            }) = unit.next()
            else {
                break;
            };
            let (fate, owed, id) = if shared.signal.is_fired() || session.aborted().is_some() {
                (Fate::NotStarted, Some(self.owed(&step)), id)
            } else if let Some(first) = copy_of {
                // The same write as an earlier one of the turn: its outcome, as a replay.
                (copy_of_fate(&ended, first), Some(self.owed(&step)), id)
            } else {
                let go = Go { id, step, granted };
                self.run_planned(session, &ledger, go, &name, shared).await
            };
            ended.push(Ended::sent(shared, place, id, name, fate, owed));
        }
        ended
    }

    /// One call of the turn (of tool `name`), in its span, with its audit record: its fate, the
    /// record it still owes (none: it appends its own), and its id, given back. Not an
    /// `async fn`: the future holds `call` once, where an `async fn` holds each argument twice
    /// (as given, and where its body takes it).
    #[expect(
        clippy::manual_async_fn,
        reason = "an async fn would hold its arguments twice"
    )]
    fn run_planned<'a>(
        &'a self,
        session: &'a Session,
        ledger: &'a Ledger<'_>,
        call: Go,
        name: &'a str,
        shared: &'a Shared,
    ) -> impl Future<Output = (Fate, Option<audit::Owed>, String)> + 'a {
        async move {
            let span = self.call_span(session, &call.id, name);
            // The call's audit record, drafted before it runs: a write's success is recorded
            // with it, any other end appends it after.
            let draft = self.audit_subject(&call.step).map(|subject| {
                Box::new(audit::draft(
                    session,
                    &call.id,
                    name,
                    Some(subject),
                    self.now_ms(),
                ))
            });
            let audited = draft.is_some();
            let read = matches!(call.step, Step::Read { .. });
            // What the call's path notes is read by its audit record and its span: without
            // either, the call runs without the notes. The step's future is built where it is
            // awaited, so that this one holds it once.
            let ((fate, id), notes) = if audited || !span.is_disabled() {
                audit::noted(
                    draft,
                    attempt::in_span(&span, self.run_step(session, ledger, call, shared)),
                )
                .await
            } else {
                let ended = self.run_step(session, ledger, call, shared).await;
                (ended, audit::CallNotes::default())
            };
            call_span::record_end(&span, session, &fate, notes.attempts());
            if audited && let Some((store, entry)) = self.audit_ended(session, &fate, notes, read) {
                // On the heap: only a call whose record is not a read's appends here.
                Box::pin(self.append_audit(store, entry)).await;
            }
            (fate, None, id)
        }
    }

    /// The call's step: refused, or run (after the budget and repeat checks), its failure noted
    /// for repeat detection, its abort raised. Not an `async fn`, for the reason `run_planned`
    /// is not; the step is matched in place, its arguments borrowed, not moved out.
    fn run_step<'a>(
        &'a self,
        session: &'a Session,
        ledger: &'a Ledger<'_>,
        call: Go,
        shared: &'a Shared,
    ) -> impl Future<Output = (Fate, String)> + 'a {
        let Go {
            id,
            mut step,
            granted,
            ..
        } = call;
        async move {
            let (outcome, note, id) = match step {
                Step::Refused {
                    tool,
                    err,
                    fingerprint,
                } => (Err(err), tool.zip(fingerprint), id),
                Step::Read { .. } | Step::Write(_) if !granted => {
                    (Err(budget_spent(&step, ledger)), None, id)
                }
                Step::Read {
                    tool,
                    slot,
                    ref arguments,
                    ref mut read,
                } => match self.not_repeated(shared, tool, arguments) {
                    Err(repeated) => (Err(repeated), None, id),
                    Ok(fingerprint) => {
                        // Run here, not in a future of its own: a read's future is not moved
                        // again. The call id is lent to the context, not copied, and taken back.
                        let registered = self.inner.registry.at(slot);
                        let ctx = self.ctx_owning(session, id, registered);
                        let read = read.take();
                        // Each branch builds the read's future where it awaits it, so that the
                        // step's future holds one of them.
                        let read = if shared.lone {
                            // No other call can raise the signal while this one runs.
                            Some(self.read(registered, &ctx, arguments, read, ledger).await)
                        } else {
                            // Pinned in place: a box on every read cost more than its size. The
                            // signal is listened for on the heap: only a read among several
                            // listens.
                            let read = std::pin::pin!(
                                self.read(registered, &ctx, arguments, read, ledger)
                            );
                            match select(read, Box::pin(shared.raised())).await {
                                Either::Left((read, _)) => Some(read),
                                Either::Right(((), _)) => None,
                            }
                        };
                        let id = ctx.into_call_id();
                        let Some(read) = read else {
                            // The run aborted while the read ran: it is stopped here.
                            return (Fate::Cancelled, id);
                        };
                        self.read_noted(tool, arguments, read, fingerprint, id)
                    }
                },
                Step::Write(write) => {
                    match self.write_step(session, ledger, shared, *write, id).await {
                        Ran::Outcome(outcome, note, id) => (outcome, note, id),
                        Ran::Ended(fate, id) => return (fate, id),
                    }
                }
            };
            let fate = match outcome {
                Ok(result) => Fate::Answered(result),
                // Only a failure builds the future that notes it.
                Err(err) => self.fate_of_error(ledger, shared, err, note).await,
            };
            (fate, id)
        }
    }

    /// The fingerprint of a read of `tool` with `arguments`, when the run has failed calls of
    /// `tool` (`None` when it has none); a repeat of one of them is refused.
    fn not_repeated(
        &self,
        shared: &Shared,
        tool: &'static str,
        arguments: &Arguments,
    ) -> Result<Option<String>, ToolError> {
        let Some(failed) = shared.failed.get(tool) else {
            return Ok(None);
        };
        let fingerprint = repeat::fingerprint(&self.inner.hash_secret, tool, arguments);
        if failed.contains(&fingerprint) {
            return Err(answers::repeated_call(tool));
        }
        Ok(Some(fingerprint))
    }

    /// A read's outcome, with what to note if it failed: the call's tool and fingerprint
    /// (`fingerprint`, when one was taken already).
    fn read_noted(
        &self,
        tool: &'static str,
        arguments: &Arguments,
        read: Result<CallResult, ToolError>,
        fingerprint: Option<String>,
        id: String,
    ) -> (Result<CallResult, ToolError>, Noted<'static>, String) {
        match read {
            Ok(result) => (Ok(result), None, id),
            Err(err) => {
                let fingerprint = fingerprint.unwrap_or_else(|| {
                    repeat::fingerprint(&self.inner.hash_secret, tool, arguments)
                });
                (Err(err), Some((tool, fingerprint)), id)
            }
        }
    }

    /// A write's step: refused as a repeat of a call that failed earlier in the run, or run
    /// on the heap (see `attempt`). Not an `async fn`, for the reason `run_planned` is not.
    #[expect(
        clippy::manual_async_fn,
        reason = "an async fn would hold its arguments twice"
    )]
    fn write_step<'a>(
        &'a self,
        session: &'a Session,
        ledger: &'a Ledger<'_>,
        shared: &'a Shared,
        write: PreparedWrite,
        id: String,
    ) -> impl Future<Output = Ran<'static>> + 'a {
        async move {
            let tool = write.tool;
            let repeated = shared
                .failed
                .get(tool)
                .is_some_and(|failed| failed.contains(&write.hash));
            if repeated {
                return Ran::Outcome(Err(answers::repeated_call(tool)), None, id);
            }
            let hash = write.hash.clone();
            let registered = self.registered(tool);
            let outcome = self
                .write_on_heap(session, &id, registered, write, ledger)
                .await;
            if ledger.turn_refused_at_claim().is_some() {
                // The store refused the turn this write's claim began: it did not start, and
                // the turn stops the run (see `turn_claim`).
                return Ran::Ended(Fate::NotStarted, id);
            }
            Ran::Outcome(outcome, Some((tool, hash)), id)
        }
    }

    /// The fate of a call whose step failed with `err`: an abort aborts the run and raises the
    /// turn's signal; a failure that fails again is noted (`note`, the call's tool and
    /// fingerprint) for repeat detection.
    async fn fate_of_error(
        &self,
        ledger: &Ledger<'_>,
        shared: &Shared,
        err: ToolError,
        note: Noted<'_>,
    ) -> Fate {
        if err.class() == ErrorClass::Abort {
            Box::pin(ledger.abort(RunAborted::from_error(&err))).await;
            shared.signal.fire();
            return Fate::Aborted;
        }
        if let Some((tool, fingerprint)) = note
            && err.kind().fails_again()
        {
            ledger.note_failure(tool, &fingerprint).await;
        }
        Fate::Answered(CallResult::from_error(&err))
    }

    /// The registered tool named `tool`, which the plan found.
    pub(super) fn registered(&self, tool: &str) -> &RegisteredTool {
        self.inner
            .registry
            .get(tool)
            .expect("a planned call names a registered tool")
    }
}

/// The fate of a copy of the write at place `first` of the unit (`ended` so far): that
/// write's answer, as a replay; not started when it was not answered.
fn copy_of_fate(ended: &[Ended], first: usize) -> Fate {
    match ended
        .iter()
        .find(|done| done.place == first)
        .map(|done| &done.fate)
    {
        Some(Fate::Answered(result)) => Fate::Answered(CallResult {
            replayed: true,
            ..result.clone()
        }),
        _ => Fate::NotStarted,
    }
}

/// The answer to a call of `step` (a read or a write) that the run's retry budget granted no
/// attempt.
fn budget_spent(step: &Step, ledger: &Ledger<'_>) -> ToolError {
    let tool = step.tool().expect("a read or a write names its tool");
    answers::retry_budget_spent(tool, ledger.limits.retry_budget.unwrap_or(u32::MAX))
}
