//! The retry policy a tool declares with `retry(...)`.
//!
//! The dispatcher retries transient faults below the model with exponential backoff and full
//! jitter ([`crate::backoff::Backoff`]): reads on any transient fault, writes only while the fault
//! proves nothing was applied. Which failed attempts may be sent again is decided in one place,
//! [`RetryPolicy::may_send_again`].

use std::time::Duration;

use crate::error::ErrorKind;
use crate::side_effect::SideEffect;

/// The `retry(max_attempts = .., base = "..", max = "..", jitter = ..)` settings of a tool.
///
/// Unset fields take the defaults of the tool's side-effect class when retries are enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetrySpec {
    /// How many attempts in all, the first included.
    pub max_attempts: Option<u32>,
    /// The first backoff delay.
    pub base: Option<Duration>,
    /// The largest backoff delay.
    pub max: Option<Duration>,
    /// Whether delays use full jitter (a uniform draw between zero and the backoff).
    pub jitter: Option<bool>,
}

impl RetrySpec {
    /// No settings: every field takes its default.
    pub const fn new() -> Self {
        RetrySpec {
            max_attempts: None,
            base: None,
            max: None,
            jitter: None,
        }
    }

    /// True when the attribute set none of the fields.
    pub const fn is_unset(&self) -> bool {
        self.max_attempts.is_none()
            && self.base.is_none()
            && self.max.is_none()
            && self.jitter.is_none()
    }
}

/// The retry policy in force for one tool: its `retry(...)` settings over the defaults of its
/// side-effect class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// The first backoff delay.
    pub base: Duration,
    /// The largest backoff delay.
    pub max: Duration,
    /// Full jitter on every delay.
    pub jitter: bool,
}

impl RetryPolicy {
    /// Reads: 3 attempts from 100 ms up to 2 s. Writes and destructive calls: 3 attempts from
    /// 200 ms up to 5 s, and only while the fault proves nothing was applied. Full jitter.
    pub const fn defaults(side_effect: crate::SideEffect) -> Self {
        match side_effect {
            crate::SideEffect::Read => RetryPolicy {
                max_attempts: 3,
                base: Duration::from_millis(100),
                max: Duration::from_secs(2),
                jitter: true,
            },
            crate::SideEffect::Write | crate::SideEffect::Destructive => RetryPolicy {
                max_attempts: 3,
                base: Duration::from_millis(200),
                max: Duration::from_secs(5),
                jitter: true,
            },
        }
    }

    /// Whether an attempt that failed with `kind` may be sent again (while the policy's
    /// attempts and the deadline allow), for a tool of `side_effect` whose provider applies
    /// one idempotency key once when `honours_key`:
    ///
    /// - [`Unavailable`](ErrorKind::Unavailable) and [`RateLimited`](ErrorKind::RateLimited):
    ///   yes, for every tool; the fault proves nothing was applied.
    /// - [`Timeout`](ErrorKind::Timeout): for a read only.
    /// - [`OutcomeUnknown`](ErrorKind::OutcomeUnknown): sent, maybe applied; only when the
    ///   provider honours the key, which makes a second send safe.
    /// - every other kind: no; the caller reads the error.
    ///
    /// ```
    /// use toolgate::{ErrorKind, tool::RetryPolicy, SideEffect};
    ///
    /// assert!(RetryPolicy::may_send_again(ErrorKind::Timeout, SideEffect::Read, false));
    /// assert!(!RetryPolicy::may_send_again(ErrorKind::Timeout, SideEffect::Write, true));
    /// assert!(RetryPolicy::may_send_again(ErrorKind::OutcomeUnknown, SideEffect::Write, true));
    /// ```
    pub const fn may_send_again(
        kind: ErrorKind,
        side_effect: SideEffect,
        honours_key: bool,
    ) -> bool {
        match kind {
            ErrorKind::Unavailable | ErrorKind::RateLimited => true,
            ErrorKind::Timeout => side_effect.is_read(),
            ErrorKind::OutcomeUnknown => honours_key,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The row of `kind` in the table below. The match names every kind, so adding one does not
    /// compile until the table has a row for it.
    fn row(kind: ErrorKind) -> usize {
        use ErrorKind::*;
        match kind {
            InvalidArguments => 0,
            UnknownTool => 1,
            NotFound => 2,
            Conflict => 3,
            Refused => 4,
            Timeout => 5,
            RateLimited => 6,
            RetryBudgetExhausted => 7,
            RepeatedCall => 8,
            CallBudgetExhausted => 9,
            Internal => 10,
            Unavailable => 11,
            OutcomeUnknown => 12,
            InProgress => 13,
            AwaitingApproval => 14,
            Rejected => 15,
            PermissionDenied => 16,
            CredentialsRevoked => 17,
            RunBudgetExhausted => 18,
            PolicyViolation => 19,
        }
    }

    #[test]
    fn every_kind_side_effect_and_key_has_its_answer() {
        use ErrorKind::*;
        const Y: bool = true;
        const N: bool = false;
        const COLUMNS: [(SideEffect, bool); 6] = [
            (SideEffect::Read, false),
            (SideEffect::Read, true),
            (SideEffect::Write, false),
            (SideEffect::Write, true),
            (SideEffect::Destructive, false),
            (SideEffect::Destructive, true),
        ];
        // May it be sent again? Columns: read, write, destructive; each without, then with, a
        // key the provider honours.
        let table: [(ErrorKind, [bool; 6]); 20] = [
            (InvalidArguments, [N, N, N, N, N, N]),
            (UnknownTool, [N, N, N, N, N, N]),
            (NotFound, [N, N, N, N, N, N]),
            (Conflict, [N, N, N, N, N, N]),
            (Refused, [N, N, N, N, N, N]),
            (Timeout, [Y, Y, N, N, N, N]),
            (RateLimited, [Y, Y, Y, Y, Y, Y]),
            (RetryBudgetExhausted, [N, N, N, N, N, N]),
            (RepeatedCall, [N, N, N, N, N, N]),
            (CallBudgetExhausted, [N, N, N, N, N, N]),
            (Internal, [N, N, N, N, N, N]),
            (Unavailable, [Y, Y, Y, Y, Y, Y]),
            (OutcomeUnknown, [N, Y, N, Y, N, Y]),
            (InProgress, [N, N, N, N, N, N]),
            (AwaitingApproval, [N, N, N, N, N, N]),
            (Rejected, [N, N, N, N, N, N]),
            (PermissionDenied, [N, N, N, N, N, N]),
            (CredentialsRevoked, [N, N, N, N, N, N]),
            (RunBudgetExhausted, [N, N, N, N, N, N]),
            (PolicyViolation, [N, N, N, N, N, N]),
        ];
        for (place, (kind, answers)) in table.iter().enumerate() {
            // Each kind once, in its row: with 20 rows, that is every kind.
            assert_eq!(row(*kind), place, "{kind:?} is out of place in the table");
            for ((side_effect, honours_key), expected) in COLUMNS.iter().zip(answers) {
                assert_eq!(
                    RetryPolicy::may_send_again(*kind, *side_effect, *honours_key),
                    *expected,
                    "{kind:?} on a {side_effect:?} tool, honours_key = {honours_key}"
                );
            }
        }
    }
}
