//! Every error the dispatcher itself writes for the model: what happened, why, and what to do
//! next, in words that are true of what was and was not applied. The tools' own errors pass
//! through unchanged; the errors of invalid arguments are written by the validator.

use std::time::Duration;

use crate::auth::Session;
use crate::call::MalformedCall;
use crate::descriptor::ToolDescriptor;
use crate::error::{ErrorKind, ToolError};
use crate::quote::excerpt;
use crate::store::StoreError;

/// The advice of every `outcome_unknown` the dispatcher writes.
const UNKNOWN_NEXT: &str = "do not assume it failed, and do not repeat the call; tell the user the outcome is being checked";

/// A call the provider format could not read at all, not even its tool's name.
pub(super) fn unreadable_call(malformed: &MalformedCall) -> ToolError {
    ToolError::invalid_arguments(malformed.what.clone())
        .with_why(malformed.why.clone())
        .with_next("fix the call: name one tool, and give its arguments as one JSON object")
}

/// A call of `tool` whose arguments the provider format could not read.
pub(super) fn malformed_arguments(tool: &str, malformed: MalformedCall) -> ToolError {
    ToolError::invalid_arguments(malformed.what)
        .with_why(malformed.why)
        .with_next(format!(
            "fix the arguments: call {tool} again with them as one JSON object"
        ))
}

/// A call of a tool that is not registered; `known` are the names that are.
pub(super) fn unknown_tool<'a>(name: &str, known: impl Iterator<Item = &'a str>) -> ToolError {
    let known = known.collect::<Vec<_>>().join(", ");
    ToolError::new(
        ErrorKind::UnknownTool,
        format!("there is no tool named {}", excerpt(name)),
    )
    .with_why(format!("the tools are: {known}"))
    .with_next(format!("call one of: {known}"))
}

/// The session lacks `permission`, which `tool` requires. It aborts the run.
pub(super) fn permission_denied(session: &Session, tool: &str, permission: &str) -> ToolError {
    ToolError::permission_denied(format!("the session may not call {tool}")).with_why(format!(
        "user `{}` of tenant `{}` lacks the permission `{permission}`",
        session.auth().user(),
        session.auth().tenant()
    ))
}

/// A call that ran past its deadline: a read timed out; a write may have been applied, so its
/// outcome is unknown, never a failure.
pub(super) fn deadline_passed(tool: &str, is_read: bool, deadline: Duration) -> ToolError {
    if is_read {
        ToolError::timeout(format!("{tool} did not answer within {deadline:?}"))
            .with_why("the read was stopped at its deadline; it changed nothing")
            .with_next(format!(
                "try again in a moment: call {tool} again, or tell the user the system is slow"
            ))
            .with_timed_out_after(deadline)
            .with_may_still_be_running(false)
    } else {
        ToolError::outcome_unknown(format!("{tool} did not finish within {deadline:?}"))
            .with_why(
                "the request may have been applied before the deadline passed, or may still be",
            )
            .with_next(UNKNOWN_NEXT)
            .with_timed_out_after(deadline)
            .with_may_still_be_running(true)
    }
}

/// A retry whose arguments, text the tool's types had accepted on an earlier attempt, were
/// refused.
pub(super) fn refused_accepted_arguments(tool: &str) -> ToolError {
    ToolError::internal(format!(
        "{tool} refused arguments it had accepted on an earlier attempt"
    ))
}

/// The summary the model reads when `attempts` attempts of `tool` all failed, the last with
/// `err`, a provider that could not be reached: still [`ErrorKind::Unavailable`], since nothing
/// was applied and the same call may succeed in a moment. `None` when the last error itself is
/// the answer (a single attempt, or a fault other than [`ErrorKind::Unavailable`]).
pub(super) fn retries_spent(tool: &str, err: &ToolError, attempts: u32) -> Option<ToolError> {
    if attempts <= 1 || err.kind() != ErrorKind::Unavailable {
        return None;
    }
    let why = match err.why() {
        Some(why) => format!("{}: {why}", err.what()),
        None => err.what().to_owned(),
    };
    Some(
        ToolError::unavailable(format!(
            "{tool} failed {attempts} times in a row; nothing was applied"
        ))
        .with_why(why),
    )
}

/// A call of `tool` whose retry budget in the run is spent before it ran.
pub(super) fn retry_budget_spent(tool: &str, budget: u32) -> ToolError {
    ToolError::new(
        ErrorKind::RetryBudgetExhausted,
        format!("{tool} did not run: it has used its {budget} attempts in this run"),
    )
    .with_why(format!(
        "every call of {tool} in this run, and every retry of one, counts toward its budget of {budget} attempts"
    ))
    .with_next(format!(
        "stop retrying: do not call {tool} again in this run; tell the user what could not be done"
    ))
}

/// Retries of `tool` stopped because its retry budget in the run is spent; the last of
/// `attempts` attempts failed with `err`. `None` when that error itself is the answer: a fault
/// other than [`ErrorKind::Unavailable`] (an unknown outcome stays unknown).
pub(super) fn run_budget_stopped_retries(
    tool: &str,
    err: &ToolError,
    attempts: u32,
    budget: u32,
) -> Option<ToolError> {
    if err.kind() != ErrorKind::Unavailable {
        return None;
    }
    let why = match err.why() {
        Some(why) => format!("{}: {why}", err.what()),
        None => err.what().to_owned(),
    };
    let failed = match attempts {
        1 => "failed".to_owned(),
        n => format!("failed {n} times in a row"),
    };
    Some(
        ToolError::new(
            ErrorKind::RetryBudgetExhausted,
            format!(
                "{tool} {failed} and its {budget} attempts in this run are used up; nothing was applied"
            ),
        )
        .with_why(why)
        .with_next(format!(
            "stop retrying: do not call {tool} again in this run; tell the user the service is unavailable"
        )),
    )
}

/// A call identical to one of `tool` that failed earlier in the run.
pub(super) fn repeated_call(tool: &str) -> ToolError {
    ToolError::new(
        ErrorKind::RepeatedCall,
        format!("{tool} already failed with these arguments in this run; it did not run again"),
    )
    .with_why("repeating a call that failed fails the same way")
    .with_next("that call already failed; change the approach: other arguments, another tool, or tell the user")
}

/// A turn of `calls` calls that would pass the run's tool-call limit.
pub(super) fn call_budget_spent(used: u32, max: u32, calls: usize) -> ToolError {
    ToolError::new(
        ErrorKind::CallBudgetExhausted,
        format!("none of this turn's {calls} calls ran: the run's tool-call budget is spent"),
    )
    .with_why(format!(
        "the run allows {max} tool calls; {used} were made before this turn"
    ))
    .with_next("stop calling tools; answer the user with what you have")
}

/// A read whose tool panicked.
pub(super) fn read_panicked(tool: &str) -> ToolError {
    ToolError::internal(format!("{tool} failed unexpectedly"))
        .with_why("the tool stopped on an internal fault before it answered")
        .with_next("do not repeat this call; tell the user the tool failed")
}

/// A write whose tool panicked: it may have acted before it stopped.
pub(super) fn write_panicked(tool: &str) -> ToolError {
    ToolError::outcome_unknown(format!("{tool} failed unexpectedly while it ran"))
        .with_why("the tool stopped on an internal fault, and it may have acted before it stopped")
        .with_next(UNKNOWN_NEXT)
}

/// A write called on a dispatcher that has no operation store: it does not run.
pub(super) fn no_store(tool: &str) -> ToolError {
    ToolError::internal(format!("{tool} cannot run: no operation store is configured"))
        .with_why("write and destructive tools run only under an idempotency key kept in a store (DispatcherBuilder::store)")
        .with_next("do not repeat this call; tell the user the tool is unavailable")
}

/// A write whose operation's record changed under every claim of it (see `CLAIM_ROUNDS`):
/// nothing ran, and the same call may find the record settled in a moment.
pub(super) fn claims_exhausted(tool: &str) -> ToolError {
    ToolError::unavailable(format!(
        "{tool} did not run: its operation changed under every claim of it"
    ))
    .with_why("other calls of the same operation kept changing its record; nothing was run")
}

/// The same operation key requested under other arguments.
pub(super) fn conflict(descriptor: &ToolDescriptor) -> ToolError {
    let fields = descriptor.key_fields().join(", ");
    ToolError::conflict(format!(
        "an earlier {} call for the same operation had other arguments",
        descriptor.name
    ))
    .with_why(format!(
        "the operation is identified by {}; one operation cannot be requested twice with different arguments",
        if fields.is_empty() { "its arguments".to_owned() } else { fields }
    ))
    .with_next("do not repeat this call; look up the current state and tell the user what was done")
}

/// A stored success whose result is not JSON any more.
pub(super) fn stored_result_unreadable(tool: &str) -> ToolError {
    ToolError::internal(format!("the stored result of {tool} cannot be read"))
}

/// A `queued` operation whose outbox event the store does not hold.
pub(super) fn event_missing(tool: &str) -> ToolError {
    ToolError::internal(format!(
        "the earlier {tool} call with these arguments is recorded as queued, and its delivery \
         cannot be found"
    ))
    .with_next("do not repeat this call; tell the user the operation needs an operator's attention")
}

/// A duplicate of an operation whose recorded outcome is unknown.
pub(super) fn unknown_replayed(tool: &str) -> ToolError {
    ToolError::outcome_unknown(format!(
        "an earlier {tool} call with these arguments may or may not have been applied"
    ))
    .with_why("its outcome is unknown and is being reconciled with the system of record")
    .with_next(UNKNOWN_NEXT)
}

/// Why a call the store failed at its claim ran nothing, in words that say nothing false of an
/// earlier call of the same operation (which this process, or another, may have run).
const UNREAD_EARLIER: &str = "every write is checked against the record of its idempotency key \
     before it runs, and the store did not answer: this call ran nothing, and whether an earlier \
     call with these arguments was applied cannot be read until the store answers";

/// The error when the store cannot be used: nothing ran, or nothing more will. A store that
/// could not be reached is a transient fault ([`ErrorKind::Unavailable`]); any other store
/// failure is `internal`.
pub(super) fn store_failed(tool: &str, err: &StoreError) -> ToolError {
    if err.is_unreachable() {
        return ToolError::new(
            ErrorKind::Unavailable,
            format!(
                "this call ran nothing: the operation store could not be reached to record {tool}"
            ),
        )
        .with_why(UNREAD_EARLIER)
        .with_next(
            "try again in a moment; if it keeps failing, tell the user the service is unavailable",
        );
    }
    ToolError::internal(format!(
        "this call ran nothing: {tool} could not be recorded safely ({err})"
    ))
    .with_why(UNREAD_EARLIER)
    .with_next("do not repeat this call now; tell the user the tool is unavailable")
}

/// The answer when an attempt of `tool` failed with `err`, a transient fault, and the retry could
/// not be recorded in the store (every retry is, before it is sent). An unknown outcome stays
/// the tool's own; any other fault proved that nothing was applied.
pub(super) fn not_retried(tool: &str, err: ToolError, store_err: &StoreError) -> ToolError {
    if err.kind() == ErrorKind::OutcomeUnknown {
        return err;
    }
    let what = format!("{tool} failed and was not tried again: {}", err.what());
    if store_err.is_unreachable() {
        return ToolError::unavailable(what).with_why(
            "a retry is recorded in the operation store before it is sent, and the store \
             could not be reached; the failure proved that nothing was applied",
        );
    }
    ToolError::internal(what)
        .with_why(format!(
            "a retry is recorded in the operation store before it is sent, and the store refused \
             it ({store_err}); the failure proved that nothing was applied"
        ))
        .with_next("do not repeat this call now; tell the user the tool is unavailable")
}

/// The answer when `tool` answered `Ok` and its result could not be recorded.
pub(super) fn ran_unrecorded(tool: &str, err: &StoreError) -> ToolError {
    let why = match err {
        StoreError::LostClaim { .. } => {
            "it may have acted: it ran, and meanwhile its lease ended and the operation passed to \
             the reconciler or another worker, which settles its outcome"
        }
        _ if err.is_unreachable() => {
            "it may have acted: it ran, and the operation store could not be reached to record \
             its result; the outcome is being checked and is recorded when the store answers again"
        }
        _ => {
            "it may have acted: it ran, and the operation store failed to record its result; the \
             outcome is being checked and is recorded when the store accepts it"
        }
    };
    ToolError::outcome_unknown(format!("{tool} ran, but its result could not be recorded"))
        .with_why(why)
        .with_next(UNKNOWN_NEXT)
}

/// The answer to a duplicate of an operation this dispatcher ran and could not record yet.
pub(super) fn kept_unrecorded(tool: &str) -> ToolError {
    ToolError::outcome_unknown(format!(
        "an earlier {tool} call with these arguments ran, but its outcome is not recorded yet"
    ))
    .with_why(
        "the operation store could not be reached when it finished; the outcome is being checked \
         and is recorded when the store answers again",
    )
    .with_next(UNKNOWN_NEXT)
}

/// The answer to a duplicate of an operation another worker holds, `processing`.
pub(super) fn held_elsewhere(tool: &str) -> ToolError {
    ToolError::new(
        ErrorKind::InProgress,
        format!("an earlier {tool} call with these arguments has not recorded its outcome yet"),
    )
    .with_why(
        "the worker that claimed it may be running it now, or may have run it without recording \
         the outcome yet; if its lease ends with no outcome, the operation becomes \
         outcome_unknown and is reconciled",
    )
    .with_next("do not repeat the call; check its result in a moment")
}

/// A record that waits for, or was rejected under, an approval the store does not hold.
pub(super) fn approval_missing(tool: &str) -> ToolError {
    ToolError::internal(format!(
        "{tool} waits for an approval the operation store does not hold"
    ))
    .with_why("the operation's record names an approval that cannot be read")
    .with_next("do not repeat this call; tell the user the operation needs an operator's attention")
}

/// A business check that panicked.
pub(super) fn check_panicked(tool: &str) -> ToolError {
    ToolError::internal(format!("the business check of {tool} failed"))
        .with_next("do not repeat this call; tell the user something went wrong")
}

/// A business check that did not answer within the tool's deadline: nothing was stored or sent.
pub(super) fn check_timed_out(tool: &str, deadline: Duration) -> ToolError {
    ToolError::timeout(format!(
        "the business check of {tool} did not answer within {} ms; nothing was sent",
        deadline.as_millis()
    ))
    .with_next(format!(
        "try again in a moment: call {tool} again, or tell the user the system is slow"
    ))
}

/// An outbox call whose transaction's commit failed: it may have landed.
pub(super) fn commit_unknown(tool: &str, err: &StoreError) -> ToolError {
    ToolError::outcome_unknown(format!(
        "{tool} ran, and the commit of its records and its queued delivery failed: {err}"
    ))
    .with_why(
        "the store may have committed before it failed: then the operation is queued for \
         delivery; otherwise nothing was stored and nothing will be sent",
    )
    .with_next(format!(
        "do not assume it failed; call {tool} again with the same arguments to learn: if it was \
         committed the answer reads its progress, and if it was not it runs now, once"
    ))
}

/// An outbox call whose body failed, panicked or passed its deadline: its transaction was
/// rolled back, so nothing was stored and nothing will be sent.
pub(super) fn rolled_back(tool: &str, err: ToolError, deadline: Duration) -> ToolError {
    const WHY: &str =
        "its transaction was rolled back: nothing was stored and nothing will be sent";
    match err.kind() {
        // A body that did not finish, or that cannot know: its rows went with the rollback.
        ErrorKind::OutcomeUnknown if err.timed_out_after().is_some() => {
            ToolError::timeout(format!("{tool} did not finish within {deadline:?}"))
                .with_why(WHY)
                .with_next(format!(
                    "try again in a moment: call {tool} again, or tell the user the system is slow"
                ))
                .with_timed_out_after(deadline)
                .with_may_still_be_running(false)
        }
        ErrorKind::OutcomeUnknown => ToolError::unavailable(format!(
            "{tool} failed before its records were committed: {}",
            err.what()
        ))
        .with_why(WHY),
        _ if err.why().is_none() => err.with_why(WHY),
        _ => err,
    }
}

/// An outbox call whose body panicked: rolled back, nothing stored.
pub(super) fn outbox_panicked(tool: &str) -> ToolError {
    ToolError::internal(format!("{tool} failed unexpectedly while it ran"))
        .with_why("the tool stopped on an internal fault; its transaction was rolled back, so nothing was stored and nothing will be sent")
        .with_next("do not repeat this call; tell the user the tool failed")
}

/// A store that answered an outbox claim acquired outside a transaction.
pub(super) fn no_transaction(tool: &str) -> ToolError {
    ToolError::internal(format!(
        "{tool} did not run: the operation store claimed it without opening its transaction"
    ))
    .with_next("do not repeat this call; tell the user the tool is unavailable")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::AuthContext;

    /// Every error this file writes, one per place and branch that builds it.
    fn every_answer() -> Vec<(&'static str, ToolError)> {
        let malformed = || MalformedCall {
            what: "not JSON".to_owned(),
            why: "expected value".to_owned(),
        };
        let session = Session::new(AuthContext::new("acme", "agent"), "run-1");
        let refund = ToolDescriptor::new("issue_refund", "").with_key(&["order_id"]);
        let down = || StoreError::unreachable("claim a key", "connection refused");
        let broken = || StoreError::backend("disk full");
        let lost = StoreError::LostClaim {
            key: "k".to_owned(),
            attempt: 1,
        };
        let unavailable = || ToolError::unavailable("503");
        let second = Duration::from_secs(1);
        let mut answers = vec![
            ("unreadable_call", unreadable_call(&malformed())),
            ("malformed_arguments", malformed_arguments("t", malformed())),
            ("unknown_tool", unknown_tool("nope", ["a", "b"].into_iter())),
            (
                "permission_denied",
                permission_denied(&session, "t", "refund:create"),
            ),
            ("deadline_passed read", deadline_passed("t", true, second)),
            ("deadline_passed write", deadline_passed("t", false, second)),
            (
                "refused_accepted_arguments",
                refused_accepted_arguments("t"),
            ),
            ("retry_budget_spent", retry_budget_spent("t", 3)),
            ("repeated_call", repeated_call("t")),
            ("call_budget_spent", call_budget_spent(2, 3, 2)),
            ("read_panicked", read_panicked("t")),
            ("write_panicked", write_panicked("t")),
            ("no_store", no_store("t")),
            ("claims_exhausted", claims_exhausted("t")),
            ("conflict", conflict(&refund)),
            ("stored_result_unreadable", stored_result_unreadable("t")),
            ("event_missing", event_missing("t")),
            ("unknown_replayed", unknown_replayed("t")),
            ("store_failed unreachable", store_failed("t", &down())),
            ("store_failed other", store_failed("t", &broken())),
            (
                "not_retried unreachable",
                not_retried("t", unavailable(), &down()),
            ),
            (
                "not_retried other",
                not_retried("t", unavailable(), &broken()),
            ),
            ("ran_unrecorded lost", ran_unrecorded("t", &lost)),
            ("ran_unrecorded unreachable", ran_unrecorded("t", &down())),
            ("ran_unrecorded other", ran_unrecorded("t", &broken())),
            ("kept_unrecorded", kept_unrecorded("t")),
            ("held_elsewhere", held_elsewhere("t")),
            ("approval_missing", approval_missing("t")),
            ("check_panicked", check_panicked("t")),
            ("check_timed_out", check_timed_out("t", second)),
            ("commit_unknown", commit_unknown("t", &broken())),
            (
                "rolled_back timeout",
                rolled_back(
                    "t",
                    ToolError::outcome_unknown("x").with_timed_out_after(second),
                    second,
                ),
            ),
            (
                "rolled_back unknown",
                rolled_back("t", ToolError::outcome_unknown("x"), second),
            ),
            ("outbox_panicked", outbox_panicked("t")),
            ("no_transaction", no_transaction("t")),
        ];
        answers.extend(retries_spent("t", &unavailable(), 3).map(|err| ("retries_spent", err)));
        answers.extend(
            run_budget_stopped_retries("t", &unavailable(), 2, 2)
                .map(|err| ("run_budget_stopped_retries", err)),
        );
        answers
    }

    /// Whatever raised it, every kind's `next` gives that kind's one advice.
    #[test]
    fn every_answer_gives_the_one_advice_of_its_kind() {
        let answers = every_answer();
        assert_eq!(answers.len(), 37, "a builder was added or lost");
        for (place, err) in answers {
            let (kind, next) = (err.kind(), err.next());
            assert!(
                kind.advice().opens(next),
                "{place}: a {kind} must advise `{}…`, and says `{next}`",
                kind.advice().words()
            );
        }
    }

    /// A provider that could not be reached, tried until its attempts are spent, stays
    /// `unavailable`; only the run's retry budget says stop.
    #[test]
    fn spent_attempts_read_unavailable_and_a_spent_budget_reads_stop() {
        let err = retries_spent("t", &ToolError::unavailable("503"), 3).unwrap();
        assert_eq!(err.kind(), ErrorKind::Unavailable);
        assert!(
            err.what()
                .contains("failed 3 times in a row; nothing was applied")
        );
        let err = run_budget_stopped_retries("t", &ToolError::unavailable("503"), 2, 2).unwrap();
        assert_eq!(err.kind(), ErrorKind::RetryBudgetExhausted);
        assert!(err.next().starts_with("stop retrying"));
    }
}
