//! [`Violation`]: a promise of toolgate that a played story broke, and [`Violations`], all
//! of those one check found.

use std::collections::BTreeSet;
use std::fmt;

use toolgate_core::store::OperationState;

/// A promise of toolgate that a played story broke, with what usually causes it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Violation {
    /// A call id of a turn was not answered exactly once.
    CallAnswered {
        /// The turn's line.
        line: usize,
        /// The call id.
        call_id: String,
        /// How many answers name it.
        answers: usize,
    },
    /// An answer of a turn names a call id the turn did not ask for.
    AnsweredUnasked {
        /// The turn's line.
        line: usize,
        /// The call id.
        call_id: String,
    },
    /// A business operation was applied more than once.
    AppliedMoreThanOnce {
        /// The operation.
        operation: String,
        /// The key of each application, in the provider's order.
        keys: Vec<Option<String>>,
    },
    /// An applied effect that no `succeeded` operation accounts for after the final reconcile:
    /// the model was never told it happened, and nothing settled it.
    Unaccounted {
        /// The operation.
        operation: String,
        /// The key it was applied under.
        key: Option<String>,
        /// The state of the operation under that key, when the store holds one.
        state: Option<OperationState>,
    },
    /// An operation of a tool with a `reconcile` hook is still `outcome_unknown` after the
    /// final reconcile.
    StillUnknown {
        /// The tool.
        tool: String,
        /// The operation's key.
        key: String,
        /// How many times the reconciler asked.
        tries: u32,
    },
    /// A call the dispatcher refused before running it (invalid arguments) reached the
    /// provider, by its operation's key.
    RefusedButSent {
        /// The turn's line.
        line: usize,
        /// The call id.
        call_id: String,
        /// The tool.
        tool: String,
        /// The key the dispatcher derives for the call.
        key: String,
        /// How many requests under the key the stage's plan saw.
        requests: usize,
        /// How many effects the provider applied under the key.
        effects: usize,
    },
}

impl Violation {
    /// The kind of promise broken, as a word: `call_answered`, `answered_unasked`,
    /// `applied_more_than_once`, `unaccounted`, `still_unknown` or `refused_but_sent`. Two
    /// stories fail the same way when their violations are of the same kinds.
    pub fn kind(&self) -> &'static str {
        match self {
            Violation::CallAnswered { .. } => "call_answered",
            Violation::AnsweredUnasked { .. } => "answered_unasked",
            Violation::AppliedMoreThanOnce { .. } => "applied_more_than_once",
            Violation::Unaccounted { .. } => "unaccounted",
            Violation::StillUnknown { .. } => "still_unknown",
            Violation::RefusedButSent { .. } => "refused_but_sent",
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::CallAnswered {
                line,
                call_id,
                answers,
            } => write!(
                f,
                "line {line}: call id {call_id:?} was answered {answers} times, not once; \
                 usually a provider format of one's own that drops or repeats a result, or an \
                 answer assembled outside the dispatcher"
            ),
            Violation::AnsweredUnasked { line, call_id } => write!(
                f,
                "line {line}: an answer names call id {call_id:?}, which the turn did not ask \
                 for; usually a provider format of one's own that renames a call's id"
            ),
            Violation::AppliedMoreThanOnce { operation, keys } => {
                let keys: Vec<&str> = keys
                    .iter()
                    .map(|key| key.as_deref().unwrap_or("no key"))
                    .collect();
                write!(
                    f,
                    "{operation} was applied {} times (keys: {}); usually the tool does not pass \
                     the operation's key to the provider (`key: &IdempotencyKey`, as an \
                     `Idempotency-Key` header), or the provider does not honour it",
                    keys.len(),
                    keys.join(", ")
                )
            }
            Violation::Unaccounted {
                operation,
                key: None,
                ..
            } => write!(
                f,
                "{operation} was applied under no key, so no operation accounts for it and no \
                 reconcile hook can find it; usually the tool does not pass the operation's key \
                 to the provider, or a tool declared `side_effect = \"read\"` changes something \
                 (a read has no key and no record)"
            ),
            Violation::Unaccounted {
                operation,
                key: Some(key),
                state: Some(state),
            } => write!(
                f,
                "{operation} was applied under {key}, whose operation is {} after the final \
                 reconcile: the model was never told it happened, and nothing settled it; \
                 usually a reconcile hook that answers \"not applied\" without asking the \
                 provider, or a tool that reports a failure after the provider applied it",
                state.as_str()
            ),
            Violation::Unaccounted {
                operation,
                key: Some(key),
                state: None,
            } => write!(
                f,
                "{operation} was applied under {key}, a key no operation of the store holds; \
                 usually a tool that sends a key of its own instead of the operation's, or an \
                 effect made outside the dispatcher"
            ),
            Violation::StillUnknown { tool, key, tries } => write!(
                f,
                "{tool} operation {key} is still outcome_unknown after the final reconcile \
                 ({tries} tries); usually its reconcile hook cannot find the operation at the \
                 provider (the tool did not pass the key) or answers an error instead of \
                 \"applied\" or \"not applied\""
            ),
            Violation::RefusedButSent {
                line,
                call_id,
                tool,
                key,
                requests,
                effects,
            } => write!(
                f,
                "line {line}: call {call_id:?} of {tool} was refused before it ran (invalid \
                 arguments), yet {requests} request(s) and {effects} effect(s) under its key \
                 {key} reached the provider; usually a check hook, or code outside the \
                 dispatcher, that calls the provider before toolgate decides"
            ),
        }
    }
}

/// The violations [`Played::check`](super::Played::check) found, at least one; each on a line of its own as text.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub struct Violations(Vec<Violation>);

impl Violations {
    pub(crate) fn new(found: Vec<Violation>) -> Violations {
        Violations(found)
    }

    /// Each violation, in the order found.
    pub fn iter(&self) -> std::slice::Iter<'_, Violation> {
        self.0.iter()
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Never: a check that finds nothing answers `Ok`.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The kinds of promise broken ([`Violation::kind`]), each once: two stories fail the
    /// same way when these are the same.
    pub fn kinds(&self) -> BTreeSet<&'static str> {
        self.0.iter().map(Violation::kind).collect()
    }

    /// The violations.
    pub fn into_vec(self) -> Vec<Violation> {
        self.0
    }
}

impl fmt::Display for Violations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} violation(s) of toolgate's promises:", self.0.len())?;
        for violation in &self.0 {
            writeln!(f, "- {violation}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Violations {
    /// As [`Display`](fmt::Display): what `unwrap` prints is what a person reads.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl<'a> IntoIterator for &'a Violations {
    type Item = &'a Violation;
    type IntoIter = std::slice::Iter<'a, Violation>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}
