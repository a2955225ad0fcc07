//! A run and how it ends: the limits a run is held to, and what the application learns when a
//! turn aborts it. The guide is [`toolgate::guide::turns`](../guide/turns/index.html).

use crate::error::{ErrorKind, ToolError};

pub use crate::fate::{CallFate, Fate, TurnAborted};
pub use crate::run_limits::RunLimits;

/// The run stopped: a missing permission, revoked credentials, a spent budget or a policy
/// violation. The model does not see the detail; the application ends the run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("run aborted ({kind}): {reason}")]
pub struct RunAborted {
    /// Why, as a kind.
    pub kind: ErrorKind,
    /// Why, in words for the operator.
    pub reason: String,
}

impl RunAborted {
    /// An abort as a store keeps it: the [`ErrorKind`]'s name and the reason. A name this
    /// version does not know (written by a later one) reads as `policy_violation`, which aborts
    /// a run as every abort does.
    pub fn from_stored(kind: &str, reason: String) -> RunAborted {
        RunAborted {
            kind: ErrorKind::from_name(kind).unwrap_or(ErrorKind::PolicyViolation),
            reason,
        }
    }

    pub(crate) fn from_error(err: &ToolError) -> Self {
        let reason = match err.why() {
            Some(why) => format!("{}: {why}", err.what()),
            None => err.what().to_owned(),
        };
        RunAborted {
            kind: err.kind(),
            reason,
        }
    }
}
