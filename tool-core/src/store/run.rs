//! The records of an agent run: its counters against its [`RunLimits`], the calls that failed in
//! it (for repeat detection), and why it was aborted, if it was.
//!
//! A run is identified by its tenant and its run id ([`RunKey`]). The dispatcher asks the store
//! once a turn ([`RunLedger::begin_turn`](super::RunLedger::begin_turn)), once more
//! for each retry below the model
//! ([`RunLedger::charge_attempt`](super::RunLedger::charge_attempt)), and writes only
//! when a call fails or the run aborts, so a restarted process keeps every counter.

use std::collections::{BTreeMap, BTreeSet};

use crate::run::RunAborted;
use crate::run_limits::RunLimits;

use super::{ApprovalRecord, Grants};

/// One run of one tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunKey<'a> {
    /// The tenant.
    pub tenant: &'a str,
    /// The run id (the session's).
    pub run_id: &'a str,
}

/// One more attempt of a tool in a run, a retry below the model
/// ([`RunLedger::charge_attempt`](super::RunLedger::charge_attempt)).
#[derive(Debug, Clone, Copy)]
pub struct AttemptCharge<'a> {
    /// The run.
    pub run: RunKey<'a>,
    /// The tool the attempt calls.
    pub tool: &'a str,
    /// The tool's retry budget: how many attempts the run may make of it (`None`: no limit).
    pub retry_budget: Option<u32>,
    /// Now, in milliseconds since the epoch.
    pub now_ms: i64,
}

/// A call that failed in a run ([`RunLedger::note_failure`](super::RunLedger::note_failure)).
#[derive(Debug, Clone, Copy)]
pub struct FailureNote<'a> {
    /// The run.
    pub run: RunKey<'a>,
    /// The tool called.
    pub tool: &'a str,
    /// The call's request hash.
    pub request_hash: &'a str,
    /// Now, in milliseconds since the epoch.
    pub now_ms: i64,
}

/// The abort of a run ([`RunLedger::abort_run`](super::RunLedger::abort_run)).
#[derive(Debug, Clone, Copy)]
pub struct AbortRequest<'a> {
    /// The run.
    pub run: RunKey<'a>,
    /// Why and by whom it is aborted; the first abort stored stands.
    pub abort: &'a RunAborted,
    /// Now, in milliseconds since the epoch.
    pub now_ms: i64,
}

/// A model turn about to run: how many calls of each tool it holds.
#[derive(Debug, Clone, Copy)]
pub struct TurnRequest<'a> {
    /// The run.
    pub run: RunKey<'a>,
    /// Each tool the turn calls, once, with how many calls of it the turn holds.
    pub tools: &'a [(&'a str, u32)],
    /// The run's limits.
    pub limits: RunLimits,
    /// Now, by the dispatcher's clock.
    pub now_ms: i64,
}

impl TurnRequest<'_> {
    /// The calls of the turn.
    pub fn calls(&self) -> u32 {
        self.tools
            .iter()
            .fold(0u32, |sum, (_, calls)| sum.saturating_add(*calls))
    }
}

/// What [`RunLedger::abort_run`](super::RunLedger::abort_run) did: the abort that
/// stands (the kind of a stored abort that this version does not know reads as
/// `policy_violation`: [`RunAborted::from_stored`]), and the approvals of the run it rejected as
/// [`RUN_ABORTED`](super::RUN_ABORTED).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbortReport {
    /// The abort that stands (the first one).
    pub abort: RunAborted,
    /// The approvals this abort rejected, after the change, oldest first (by creation, then
    /// id); the dispatcher adds each to the audit trail.
    pub rejected: Vec<ApprovalRecord>,
}

/// A failed call of a run, for repeat detection.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FailedCall {
    /// The tool's name.
    pub tool: String,
    /// The hash of the tool name and the canonical arguments
    /// ([`request_hash`](crate::idempotency::request_hash)).
    pub request_hash: String,
}

/// What [`RunLedger::begin_turn`](super::RunLedger::begin_turn) decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnGrant {
    /// The run was aborted earlier; nothing was counted.
    Aborted(RunAborted),
    /// The run has had `max_steps` turns already; nothing was counted. The dispatcher aborts
    /// the run.
    StepLimit {
        /// The limit.
        max_steps: u32,
    },
    /// The turn's calls would pass the tool-call limit: the turn counted as a step, none of its
    /// calls was counted, and none runs.
    CallLimit {
        /// Calls counted in the run before this turn.
        used: u32,
        /// The limit.
        max_tool_calls: u32,
    },
    /// The turn runs.
    Admitted(Admission),
}

/// A turn that runs: its step number, the attempts granted to each tool, and the calls that
/// failed earlier in the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// This turn's number in the run (1 for the first).
    pub step: u32,
    /// For each entry of [`TurnRequest::tools`], in order, how many of its calls may run: the
    /// calls of the tool, or fewer when its retry budget runs out. The first calls of the turn
    /// (in the order the model emitted them) get the grants.
    pub granted: Grants,
    /// Every call of the requested tools that failed earlier in the run.
    pub failed: Vec<FailedCall>,
}

/// A run as stored, for operators and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunRecord {
    /// Turns counted.
    pub steps: u32,
    /// Tool calls counted.
    pub tool_calls: u32,
    /// Attempts counted, by tool.
    pub attempts: BTreeMap<String, u32>,
    /// Calls that failed, by tool and request hash.
    pub failed: BTreeSet<FailedCall>,
    /// Why the run stopped, if it did.
    pub aborted: Option<RunAborted>,
    /// When it last changed.
    pub updated_ms: i64,
}

impl RunRecord {
    /// [`RunLedger::begin_turn`](super::RunLedger::begin_turn) on this record: the
    /// rules every store follows, for the stores that keep a run in memory.
    pub fn begin_turn(&mut self, request: &TurnRequest<'_>) -> TurnGrant {
        if let Some(abort) = &self.aborted {
            return TurnGrant::Aborted(abort.clone());
        }
        let limits = request.limits;
        if let Some(max_steps) = limits.max_steps
            && self.steps >= max_steps
        {
            return TurnGrant::StepLimit { max_steps };
        }
        self.steps = self.steps.saturating_add(1);
        self.updated_ms = request.now_ms;
        let calls = request.calls();
        if let Some(max_tool_calls) = limits.max_tool_calls
            && self.tool_calls.saturating_add(calls) > max_tool_calls
        {
            return TurnGrant::CallLimit {
                used: self.tool_calls,
                max_tool_calls,
            };
        }
        self.tool_calls = self.tool_calls.saturating_add(calls);
        let granted = request
            .tools
            .iter()
            .map(|(tool, wanted)| {
                let grant = |spent: u32| {
                    let left = limits
                        .retry_budget
                        .map_or(u32::MAX, |budget| budget.saturating_sub(spent));
                    (*wanted).min(left)
                };
                // One look-up of the tool's attempts, to read them and to add the grant.
                match self.attempts.get_mut(*tool) {
                    Some(spent) => {
                        let granted = grant(*spent);
                        *spent = spent.saturating_add(granted);
                        granted
                    }
                    None => {
                        let granted = grant(0);
                        if granted > 0 {
                            self.attempts.insert((*tool).to_owned(), granted);
                        }
                        granted
                    }
                }
            })
            .collect();
        // Most runs have no failed call: nothing to look through.
        let failed = if self.failed.is_empty() {
            Vec::new()
        } else {
            self.failed
                .iter()
                .filter(|failed| request.tools.iter().any(|(tool, _)| *tool == failed.tool))
                .cloned()
                .collect()
        };
        TurnGrant::Admitted(Admission {
            step: self.steps,
            granted,
            failed,
        })
    }

    /// [`RunLedger::charge_attempt`](super::RunLedger::charge_attempt) on this record.
    pub fn charge_attempt(&mut self, tool: &str, retry_budget: Option<u32>, now_ms: i64) -> bool {
        let spent = self.attempts.get(tool).copied().unwrap_or(0);
        if retry_budget.is_some_and(|budget| spent >= budget) {
            return false;
        }
        self.add_attempts(tool, 1);
        self.updated_ms = now_ms;
        true
    }

    /// Counts in this record too what a store granted a turn, so that the session can stand in
    /// for the store while the store cannot be reached: the step (the store's number when it is
    /// ahead), the calls, the attempts granted, and the failed calls the store knows.
    pub fn mirror_turn(&mut self, request: &TurnRequest<'_>, grant: &TurnGrant) {
        match grant {
            TurnGrant::Aborted(_) | TurnGrant::StepLimit { .. } => return,
            TurnGrant::CallLimit { used, .. } => {
                self.steps = self.steps.saturating_add(1);
                self.tool_calls = self.tool_calls.max(*used);
            }
            TurnGrant::Admitted(admission) => {
                self.steps = self.steps.saturating_add(1).max(admission.step);
                self.tool_calls = self.tool_calls.saturating_add(request.calls());
                for ((tool, _), granted) in request.tools.iter().zip(&admission.granted) {
                    if *granted > 0 {
                        self.add_attempts(tool, *granted);
                    }
                }
                for failed in &admission.failed {
                    if !self.failed.contains(failed) {
                        self.failed.insert(failed.clone());
                    }
                }
            }
        }
        self.updated_ms = request.now_ms;
    }

    /// Adds `count` attempts of `tool`.
    fn add_attempts(&mut self, tool: &str, count: u32) {
        match self.attempts.get_mut(tool) {
            Some(spent) => *spent = spent.saturating_add(count),
            None => {
                self.attempts.insert(tool.to_owned(), count);
            }
        }
    }

    /// [`RunLedger::note_failure`](super::RunLedger::note_failure) on this record.
    pub fn note_failure(&mut self, tool: &str, request_hash: &str, now_ms: i64) {
        self.failed.insert(FailedCall {
            tool: tool.to_owned(),
            request_hash: request_hash.to_owned(),
        });
        self.updated_ms = now_ms;
    }

    /// [`RunLedger::abort_run`](super::RunLedger::abort_run) on this record.
    pub fn abort(&mut self, abort: &RunAborted, now_ms: i64) -> RunAborted {
        if self.aborted.is_none() {
            self.aborted = Some(abort.clone());
            self.updated_ms = now_ms;
        }
        self.aborted.clone().expect("set above")
    }
}
