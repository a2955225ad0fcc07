//! [`Played`]: what a story did, line by line, and where the store and the provider stood when
//! it ended.

use std::collections::BTreeSet;

use toolgate_core::approval::ApprovedRun;
use toolgate_core::dispatch::CallReport;
use toolgate_core::outbox::DeliveryReport;
use toolgate_core::reconcile::ReconcileReport;
use toolgate_core::run::TurnAborted;
use toolgate_core::store::{Decided, OperationRecord};

use super::{Record, TurnFormat};

/// A story played by [`play`](super::play): what each line answered, the final reconcile
/// pass, every operation of the store after it, and every request the stage's plan saw. Check
/// it against the provider with [`Played::check`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Played {
    /// What the lines that answer (turns, reconcile passes, decisions, runner passes)
    /// answered, in order.
    pub answers: Vec<Answered>,
    /// The pass of the reconciler run after the last line.
    pub final_reconcile: ReconcileReport,
    /// Every operation of the store after that pass, in every tenant.
    pub operations: Vec<OperationRecord>,
    /// Every request the stage's plan saw, in order.
    pub requests: Vec<Record>,
    /// The tools that declare a `reconcile` hook.
    pub reconciled_tools: BTreeSet<String>,
}

/// What one line answered.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Answered {
    /// The line's number in the story, from 1.
    pub line: usize,
    /// The process it ran in (`a` unless a `process` line said otherwise).
    pub process: String,
    /// Its answer.
    pub answer: Answer,
}

/// The answer of one line.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Answer {
    /// A model turn.
    Turn(PlayedTurn),
    /// A reconcile pass.
    Reconciled(ReconcileReport),
    /// An `approve` or `reject` line: each pending approval's decision, oldest first.
    Decided(Vec<Decided>),
    /// A pass of the runner of approved operations.
    RanApproved(ApprovedRun),
    /// A `deliver` line: what the outbox worker's passes delivered, retried, dead-lettered or
    /// left unknown.
    Delivered(DeliveryReport),
    /// An `act` line: what the application's act answered, or why it failed (the story goes
    /// on).
    Acted(Result<serde_json::Value, String>),
}

/// A model turn as it was played: the calls the turn asked for, and how it was answered.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PlayedTurn {
    /// The turn's format.
    pub format: TurnFormat,
    /// The tenant of the session it ran in.
    pub tenant: String,
    /// The run it belonged to.
    pub run: String,
    /// The calls the turn asked for, in the model's order.
    pub asked: Vec<AskedCall>,
    /// How the turn was answered.
    pub outcome: TurnOutcome,
}

/// One call a turn asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AskedCall {
    /// The call id, as the format read it.
    pub id: String,
    /// The tool name the model used.
    pub tool: String,
    /// The operation's idempotency key, as the dispatcher derives it, for a call of a
    /// registered write or destructive tool whose arguments are a JSON object (valid or not);
    /// `None` otherwise.
    pub key: Option<String>,
}

/// How a turn was answered.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TurnOutcome {
    /// The message that answers the turn, and one report per call id.
    Answered {
        /// The message, as the JSON text sent back to the provider; `None` for a turn without
        /// calls.
        message: Option<String>,
        /// The reports, in the model's order.
        reports: Vec<CallReport>,
    },
    /// The run was aborted: what became of each call (none, for a turn of a run already
    /// aborted).
    Aborted(TurnAborted),
}

impl PlayedTurn {
    /// The call ids the turn was answered for, one per answer: a report's, or a call fate's
    /// of a turn that aborted the run.
    pub fn answered_ids(&self) -> Vec<&str> {
        match &self.outcome {
            TurnOutcome::Answered { reports, .. } => reports
                .iter()
                .map(|report| report.call_id.as_str())
                .collect(),
            TurnOutcome::Aborted(aborted) => aborted
                .calls
                .iter()
                .map(|call| call.call_id.as_str())
                .collect(),
        }
    }

    /// The report of call `id`, when the turn was answered.
    pub fn report(&self, id: &str) -> Option<&CallReport> {
        match &self.outcome {
            TurnOutcome::Answered { reports, .. } => {
                reports.iter().find(|report| report.call_id == id)
            }
            TurnOutcome::Aborted(_) => None,
        }
    }
}

impl Played {
    /// The turns, with their line numbers, in order.
    pub fn turns(&self) -> impl Iterator<Item = (usize, &PlayedTurn)> {
        self.answers
            .iter()
            .filter_map(|answered| match &answered.answer {
                Answer::Turn(turn) => Some((answered.line, turn)),
                _ => None,
            })
    }

    /// The operation stored under `key`, after the final reconcile pass.
    pub fn operation(&self, key: &str) -> Option<&OperationRecord> {
        self.operations
            .iter()
            .find(|operation| operation.key == key)
    }
}
