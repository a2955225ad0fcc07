//! How the attempts of a call ended without a result: the last attempt's own error, which the
//! operation's record keeps, and the answer the model gets, which may say more (retries spent,
//! a store that failed after the tool ran).

use crate::error::{ErrorKind, ToolError};
use crate::store::AttemptError;

/// The attempts of a call ended without a result.
#[derive(Debug)]
pub(super) struct Failure {
    /// The last attempt's own error, as the record keeps it.
    own: ToolError,
    /// What the model is told instead of `own`, when that differs.
    answer: Option<ToolError>,
    /// Which attempt `own` is the error of (1 for the first).
    attempt: u32,
}

impl Failure {
    /// The last attempt, numbered `attempt`, ended with `own`; the model is told `own` too.
    pub(super) fn new(own: ToolError, attempt: u32) -> Self {
        Failure {
            own,
            answer: None,
            attempt,
        }
    }

    /// The model is told `answer` instead of the attempt's own error.
    pub(super) fn answered(mut self, answer: ToolError) -> Self {
        self.answer = Some(answer);
        self
    }

    /// What the model is told.
    pub(super) fn answer(&self) -> &ToolError {
        self.answer.as_ref().unwrap_or(&self.own)
    }

    /// What the model is told, owned.
    pub(super) fn into_answer(self) -> ToolError {
        self.answer.unwrap_or(self.own)
    }

    /// The entry of the record's error history: the attempt's own kind and words.
    pub(super) fn recorded(&self) -> AttemptError {
        AttemptError {
            attempt: self.attempt,
            kind: self.own.kind().as_str().to_owned(),
            what: self.own.what().to_owned(),
        }
    }

    /// Whether the tool may have acted: the record must say `outcome_unknown`, never `failed`.
    pub(super) fn may_have_acted(&self) -> bool {
        self.answer().kind() == ErrorKind::OutcomeUnknown
    }
}
