//! What a worker records for one delivery that did not come back applied: tried again, dead, or
//! unknown. An event one of whose deliveries may have been applied is never dead.

use crate::error::ErrorKind;
use crate::store::AttemptError;

/// What to record for one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Applied: the provider's answer as JSON text.
    Delivered(String),
    /// Worth another try; `maybe_applied` when this attempt may have been applied.
    Retry {
        error: AttemptError,
        maybe_applied: bool,
    },
    /// Provably not applied, by this delivery or any before it; no more tries.
    Dead(AttemptError),
    /// May have been applied: for the reconciler.
    Unknown(AttemptError),
}

/// Where a failed delivery stands, as [`after_failure`] reads it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Failure {
    /// The kind of the handler's error.
    pub(super) kind: ErrorKind,
    /// Whether the handler's provider applies one key once.
    pub(super) honours_key: bool,
    /// Whether the event's delivery budget has attempts left after this one.
    pub(super) budget_left: bool,
    /// Whether an earlier delivery of the event may have been applied
    /// ([`OutboxEvent::maybe_applied`](crate::store::OutboxEvent::maybe_applied)).
    pub(super) maybe_applied_before: bool,
}

/// What a failed delivery leads to:
///
/// - `unavailable`, `rate_limited`, `timeout` (nothing was sent): tried again while the budget
///   lasts;
/// - `outcome_unknown` (sent, answer lost): tried again with the same key when the provider
///   honours it and the budget lasts; otherwise unknown;
/// - any other kind: trying again will not help;
///
/// and an event that stops being tried is dead only when none of its deliveries may have been
/// applied (neither this one nor an earlier one); otherwise it is unknown, for the reconciler,
/// with `error` restated as an unknown outcome that names what was known.
pub(super) fn after_failure(failure: Failure, error: AttemptError) -> Verdict {
    let sent = failure.kind == ErrorKind::OutcomeUnknown;
    let retried = match failure.kind {
        ErrorKind::Unavailable | ErrorKind::RateLimited | ErrorKind::Timeout => failure.budget_left,
        ErrorKind::OutcomeUnknown => failure.honours_key && failure.budget_left,
        _ => false,
    };
    if retried {
        return Verdict::Retry {
            error,
            maybe_applied: sent,
        };
    }
    if sent {
        return Verdict::Unknown(error);
    }
    if failure.maybe_applied_before {
        return Verdict::Unknown(AttemptError {
            attempt: error.attempt,
            kind: ErrorKind::OutcomeUnknown.as_str().to_owned(),
            what: format!(
                "delivery stopped at attempt {} ({}: {}), and an earlier attempt may have been \
                 applied (its answer was lost, or its worker stopped mid-delivery)",
                error.attempt, error.kind, error.what
            ),
        });
    }
    Verdict::Dead(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(kind: ErrorKind) -> AttemptError {
        AttemptError {
            attempt: 3,
            kind: kind.as_str().to_owned(),
            what: "the provider answered 503".to_owned(),
        }
    }

    /// The verdict's name, and for a retry whether it may have applied.
    fn name(verdict: &Verdict) -> &'static str {
        match verdict {
            Verdict::Delivered(_) => "delivered",
            Verdict::Retry {
                maybe_applied: false,
                ..
            } => "retry",
            Verdict::Retry {
                maybe_applied: true,
                ..
            } => "retry, maybe applied",
            Verdict::Dead(_) => "dead",
            Verdict::Unknown(_) => "unknown",
        }
    }

    #[test]
    fn every_failure_leads_where_the_table_says() {
        use ErrorKind::{
            Internal, InvalidArguments, NotFound, OutcomeUnknown, RateLimited, Refused, Timeout,
            Unavailable,
        };
        // kind, honours the key, budget left, maybe applied before → verdict.
        let table = [
            (Unavailable, false, true, false, "retry"),
            (Unavailable, false, false, false, "dead"),
            (Unavailable, true, true, true, "retry"),
            (Unavailable, true, false, true, "unknown"),
            (Unavailable, false, false, true, "unknown"),
            (RateLimited, false, true, false, "retry"),
            (RateLimited, false, false, false, "dead"),
            (RateLimited, true, false, true, "unknown"),
            (Timeout, false, true, false, "retry"),
            (Timeout, false, false, false, "dead"),
            (Timeout, true, false, true, "unknown"),
            (OutcomeUnknown, true, true, false, "retry, maybe applied"),
            (OutcomeUnknown, true, true, true, "retry, maybe applied"),
            (OutcomeUnknown, true, false, false, "unknown"),
            (OutcomeUnknown, false, true, false, "unknown"),
            (OutcomeUnknown, false, false, true, "unknown"),
            (Refused, false, true, false, "dead"),
            (Refused, true, true, true, "unknown"),
            (InvalidArguments, false, true, false, "dead"),
            (InvalidArguments, true, false, true, "unknown"),
            (NotFound, true, true, false, "dead"),
            (NotFound, true, true, true, "unknown"),
            (Internal, false, true, false, "dead"),
            (Internal, true, true, true, "unknown"),
        ];
        for (kind, honours_key, budget_left, maybe_applied_before, expected) in table {
            let failure = Failure {
                kind,
                honours_key,
                budget_left,
                maybe_applied_before,
            };
            let verdict = after_failure(failure, error(kind));
            assert_eq!(name(&verdict), expected, "{failure:?}");
        }
    }

    #[test]
    fn a_stop_after_a_delivery_that_may_have_applied_says_so_and_keeps_the_last_error() {
        let failure = Failure {
            kind: ErrorKind::Unavailable,
            honours_key: true,
            budget_left: false,
            maybe_applied_before: true,
        };
        let Verdict::Unknown(unknown) = after_failure(failure, error(ErrorKind::Unavailable))
        else {
            panic!("unknown");
        };
        assert_eq!(unknown.attempt, 3);
        assert_eq!(unknown.kind, "outcome_unknown");
        assert_eq!(
            unknown.what,
            "delivery stopped at attempt 3 (unavailable: the provider answered 503), and an \
             earlier attempt may have been applied (its answer was lost, or its worker stopped \
             mid-delivery)"
        );
        let failure = Failure {
            maybe_applied_before: false,
            ..failure
        };
        assert_eq!(
            after_failure(failure, error(ErrorKind::Unavailable)),
            Verdict::Dead(error(ErrorKind::Unavailable))
        );
    }
}
