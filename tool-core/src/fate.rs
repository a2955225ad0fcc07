//! What the application learns when a turn aborts the run: why, and what became of every call of
//! the turn, so that no applied write goes unreported.

use crate::result::CallResult;
use crate::run::RunAborted;

/// What became of one call of a turn that aborted the run.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Fate {
    /// It ran to its end (or was answered without running): the result the model would have
    /// read. A write here may have been applied: match on
    /// [`CallResult::outcome`](crate::CallResult::outcome).
    Answered(CallResult),
    /// This call aborted the run (its tool needs a permission the session lacks, say).
    Aborted,
    /// A read that was running when the run aborted, stopped there. Reads change nothing.
    Cancelled,
    /// It never started. Nothing of it was sent anywhere.
    NotStarted,
}

impl Fate {
    /// The status, as a word: the result's status (`succeeded`, `outcome_unknown`, `error`, …)
    /// for an answered call, else `aborted`, `cancelled` or `not_started`.
    pub fn status(&self) -> &'static str {
        match self {
            Fate::Answered(result) => result.status.as_str(),
            Fate::Aborted => "aborted",
            Fate::Cancelled => "cancelled",
            Fate::NotStarted => "not_started",
        }
    }
}

/// One call of a turn that aborted the run, and its [`Fate`].
#[derive(Debug, Clone, PartialEq)]
pub struct CallFate {
    /// The call id, as the model sent it.
    pub call_id: String,
    /// The tool name, as the model sent it.
    pub tool: String,
    /// What became of it.
    pub fate: Fate,
}

/// A turn that aborted the run: why, and the fate of each of its calls in the order the model
/// emitted them (empty for a turn of a run that was already aborted: none of them ran).
///
/// The model is told only that the run stopped; the application reads [`TurnAborted::calls`]
/// to learn what was applied before it did. When a call aborts the run, calls that have not
/// started never start, reads in flight are stopped, and writes in flight run to their end, so
/// their outcome is recorded and reported here.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{reason}")]
pub struct TurnAborted {
    /// Why the run stopped.
    pub reason: RunAborted,
    /// What became of each call of the turn.
    pub calls: Vec<CallFate>,
}
