//! The step journal of a multi-step operation: each step's outcome, recorded under the
//! operation, so that a retry or a takeover skips the steps already done.

use super::attempt_error::AttemptError;
use super::claim_token::ClaimToken;

/// Where a step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StepStatus {
    /// Begun and no outcome recorded: it may be running now, or it ran in an attempt that ended
    /// before recording it, and may have acted.
    Started,
    /// Done; its output is recorded and it never runs again.
    Succeeded,
    /// Definitely not applied; it runs again at the operation's next attempt.
    Failed,
}

impl StepStatus {
    /// The stored name: `started`, `succeeded`, `failed`.
    pub const fn as_str(self) -> &'static str {
        match self {
            StepStatus::Started => "started",
            StepStatus::Succeeded => "succeeded",
            StepStatus::Failed => "failed",
        }
    }

    /// The status named `name`, as [`StepStatus::as_str`] writes it.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "started" => Some(StepStatus::Started),
            "succeeded" => Some(StepStatus::Succeeded),
            "failed" => Some(StepStatus::Failed),
            _ => None,
        }
    }
}

/// One step of an operation, as journaled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRecord {
    /// The step's name, unique within its operation.
    pub name: String,
    /// Its position: 1 for the operation's first step ever begun, and so on.
    pub seq: u32,
    /// Where it stands.
    pub status: StepStatus,
    /// The operation's attempt that last began it.
    pub attempt: u32,
    /// Its output as JSON text, once succeeded.
    pub output: Option<String>,
    /// Its last error, when it failed.
    pub error: Option<AttemptError>,
    /// When it last changed.
    pub updated_ms: i64,
}

/// A step of the operation a claim holds, begun or finished
/// ([`StepStore::begin_step`](super::StepStore::begin_step),
/// [`StepStore::finish_step`](super::StepStore::finish_step)).
#[derive(Debug, Clone, Copy)]
pub struct StepRequest<'a> {
    /// The claim of the step's operation.
    pub owner: &'a ClaimToken,
    /// The step's name.
    pub name: &'a str,
    /// Now, in milliseconds since the epoch.
    pub now_ms: i64,
}

/// What [`StepStore::begin_step`](super::StepStore::begin_step) answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepStart {
    /// Not done before (new, or failed): it is `started` now under the claim's attempt; run it
    /// and record its outcome.
    Run,
    /// Succeeded earlier: never run it again; its recorded output is the answer.
    Done(StepRecord),
    /// `started` and never recorded: it may have acted. It is not run again; it is reconciled.
    Unknown(StepRecord),
}

/// A step's outcome, recorded by the claim's holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepOutcome<'a> {
    /// Applied; its output as JSON text.
    Succeeded(&'a str),
    /// Definitely not applied.
    Failed(&'a AttemptError),
}

/// `processing` → `partial`, recorded by the claim's holder
/// ([`StepStore::partial`](super::StepStore::partial)).
#[derive(Debug, Clone, Copy)]
pub struct PartialOutcome<'a> {
    /// The claim of the operation.
    pub owner: &'a ClaimToken,
    /// The steps as the model reads them, as JSON text: the record's result.
    pub report: &'a str,
    /// The error of the step that failed, appended to the record's.
    pub error: &'a AttemptError,
    /// Now, in milliseconds since the epoch.
    pub now_ms: i64,
}

/// What an operation's journal says about a lease that ended (see
/// [`ClaimRequest::step`](super::ClaimRequest::step)): whether the crashed worker may have left a
/// step half done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Journal {
    /// No step was ever begun: the tool journals no steps (or crashed before its first), so the
    /// worker may have acted outside any step.
    Empty,
    /// Every step begun has its outcome recorded: a takeover skips the succeeded ones and acts
    /// only inside steps, so it is safe.
    Settled,
    /// A step is `started` without an outcome: it may have acted.
    InFlight,
}

impl Journal {
    /// The journal of `steps`.
    pub fn of<'a>(steps: impl IntoIterator<Item = &'a StepStatus>) -> Journal {
        let mut journal = Journal::Empty;
        for status in steps {
            match status {
                StepStatus::Started => return Journal::InFlight,
                _ => journal = Journal::Settled,
            }
        }
        journal
    }
}
