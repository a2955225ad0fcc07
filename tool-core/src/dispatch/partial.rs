//! A multi-step write that ended halfway: some steps succeeded, one failed, none is unknown.
//! What the model reads (`partial`, naming each step), and the report the record keeps so that
//! a later call with the same arguments reads the same.

use serde_json::Value;

use crate::error::{Advice, ErrorClass, ErrorKind, ToolError};
use crate::json_text::JsonText;
use crate::result::{CallResult, Explanation, Status};
use crate::steps::{StepError, StepReport, StepState};
use crate::store::AttemptError;

/// Whether `steps` end `partial`: one succeeded, one failed, none unknown.
pub(super) fn is_partial(steps: &[StepReport]) -> bool {
    let has = |state| steps.iter().any(|step| step.status == state);
    has(StepState::Succeeded) && has(StepState::Failed) && !has(StepState::OutcomeUnknown)
}

/// Notes a definite error the tool answered outside any step, after a step of it succeeded:
/// the rest of the tool failed (not applied) while the succeeded step stays applied, so the
/// call is partial, never a plain failure. The rest is reported as a failed entry named
/// `rest of <tool>`. Nothing is noted for an error that may have acted, one that aborts the
/// run, or steps that already hold a failed or unknown one.
pub(super) fn note_error_after_steps(tool: &str, steps: &mut Vec<StepReport>, err: &ToolError) {
    let has = |state| steps.iter().any(|step: &StepReport| step.status == state);
    if err.kind() == ErrorKind::OutcomeUnknown
        || err.class() == ErrorClass::Abort
        || !has(StepState::Succeeded)
        || has(StepState::Failed)
        || has(StepState::OutcomeUnknown)
    {
        return;
    }
    steps.push(StepReport {
        name: format!("rest of {tool}"),
        status: StepState::Failed,
        replayed: false,
        output: None,
        error: Some(StepError {
            kind: err.kind(),
            what: err.what().to_owned(),
        }),
    });
}

/// The error the record of a partial operation appends: its first failed step's.
pub(super) fn recorded_error(attempt: u32, steps: &[StepReport]) -> AttemptError {
    let failed = steps.iter().find(|step| step.status == StepState::Failed);
    let (kind, what) = match failed.and_then(|step| step.error.as_ref()) {
        Some(err) => (err.kind, err.what.clone()),
        None => (ErrorKind::Internal, "a step failed".to_owned()),
    };
    AttemptError {
        attempt,
        kind: kind.as_str().to_owned(),
        what: format!(
            "step {} failed: {what}",
            failed.map_or("?", |step| step.name.as_str())
        ),
    }
}

/// The steps as the record keeps them: JSON text of the reports.
pub(super) fn report_json(steps: &[StepReport]) -> String {
    serde_json::to_string(steps).expect("step reports always serialize")
}

/// The steps the record of a partial operation keeps, read back; `None` when the text is not
/// such a report.
pub(super) fn read_report(text: &str) -> Option<Vec<StepReport>> {
    let Value::Array(items) = serde_json::from_str::<Value>(text).ok()? else {
        return None;
    };
    items.iter().map(read_step).collect()
}

fn read_step(item: &Value) -> Option<StepReport> {
    let status = match item.get("status")?.as_str()? {
        "succeeded" => StepState::Succeeded,
        "failed" => StepState::Failed,
        "outcome_unknown" => StepState::OutcomeUnknown,
        _ => return None,
    };
    let error = match item.get("error") {
        Some(err) => Some(StepError {
            kind: ErrorKind::from_name(err.get("kind")?.as_str()?)?,
            what: err.get("what")?.as_str()?.to_owned(),
        }),
        None => None,
    };
    Some(StepReport {
        name: item.get("name")?.as_str()?.to_owned(),
        status,
        replayed: item.get("replayed")?.as_bool()?,
        output: match item.get("output") {
            Some(output) => Some(JsonText::of(output).ok()?),
            None => None,
        },
        error,
    })
}

/// What the model reads of `tool`'s partial outcome: which steps succeeded, which failed and
/// why, and that the same call again runs only what is not done.
pub(super) fn answer(tool: &str, steps: Vec<StepReport>, replayed: bool) -> CallResult {
    let names = |state| {
        steps
            .iter()
            .filter(|step| step.status == state)
            .map(|step| step.name.as_str())
            .collect::<Vec<_>>()
    };
    let done = names(StepState::Succeeded);
    let failed = names(StepState::Failed);
    let first_failed = steps
        .iter()
        .find(|step| step.status == StepState::Failed)
        .and_then(|step| step.error.as_ref());
    let kind = first_failed.map_or(ErrorKind::Internal, |err| err.kind);
    let why = failures(&steps);
    let (done_list, failed_list) = (list(&done), list(&failed));
    // The opening gives the one advice of the failed step's kind; what follows says what a
    // call with the same arguments does.
    let opening = opening(kind, &failed_list);
    let explanation = Explanation {
        kind,
        what: format!(
            "{tool} partly succeeded: {done_list} succeeded (applied, and never rolled back); \
             {failed_list} failed (not applied)"
        ),
        why: (!why.is_empty()).then_some(why),
        next: format!(
            "{opening}; then call {tool} again with the same arguments: {done_list} {} done and \
             {} not run again; only {failed_list} runs again, with any step not reached yet; \
             tell the user which steps succeeded",
            if done.len() == 1 { "is" } else { "are" },
            if done.len() == 1 { "is" } else { "are" },
        ),
        retry_after_ms: None,
        after_ms: None,
        may_still_be_running: None,
        approval_id: None,
        expires_at_ms: None,
    };
    CallResult {
        status: Status::Partial,
        replayed,
        data: None,
        error: Some(Box::new(explanation)),
        steps: Some(Box::new(steps)),
        delivery: None,
    }
}

/// Each failed step with its error's words, `name: what`, separated by `; `.
fn failures(steps: &[StepReport]) -> String {
    steps
        .iter()
        .filter_map(|step| match (&step.status, &step.error) {
            (StepState::Failed, Some(err)) => Some(format!("{}: {}", step.name, err.what)),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The advice of a partial outcome whose first failed step (of `failed_list`) failed with
/// `kind`, before what a call with the same arguments does.
fn opening(kind: ErrorKind, failed_list: &str) -> String {
    match kind.advice() {
        Advice::TryAgain => "try again in a moment".to_owned(),
        Advice::Wait => "wait a moment".to_owned(),
        Advice::FixArguments => format!("fix what made {failed_list} fail"),
        Advice::CheckTheIdentifier => {
            format!("check the identifier that made {failed_list} fail")
        }
        Advice::DoNotRepeat => {
            format!("do not repeat this call until what made {failed_list} fail is fixed")
        }
        _ => kind.default_next().to_owned(),
    }
}

/// `a`, `a and b`, `a, b and c`.
fn list(names: &[&str]) -> String {
    match names {
        [] => "no step".to_owned(),
        [one] => (*one).to_owned(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(name: &str, status: StepState) -> StepReport {
        StepReport {
            name: name.to_owned(),
            status,
            replayed: false,
            output: (status == StepState::Succeeded)
                .then(|| JsonText::parse(r#"{"id":7}"#).unwrap()),
            error: (status == StepState::Failed).then(|| StepError {
                kind: ErrorKind::Unavailable,
                what: "the mail service answered 503".to_owned(),
            }),
        }
    }

    #[test]
    fn a_partial_answer_names_each_step_and_reads_back_the_same() {
        let steps = vec![
            step("update_crm", StepState::Succeeded),
            step("notify", StepState::Failed),
        ];
        assert!(is_partial(&steps));
        let read = read_report(&report_json(&steps)).expect("the report reads back");
        assert_eq!(read, steps);
        let result = answer("update_and_notify", read, true);
        let explanation = result.explanation().unwrap();
        assert_eq!(explanation.kind, ErrorKind::Unavailable);
        assert!(
            explanation
                .next
                .starts_with("try again in a moment; then call")
        );
        assert!(explanation.what.contains("update_crm succeeded"));
        assert!(explanation.what.contains("notify failed"));
        assert!(
            explanation
                .next
                .contains("update_crm is done and is not run again")
        );
        assert!(explanation.next.contains("only notify runs again"));
        assert_eq!(result.to_json()["status"], "partial");
    }

    #[test]
    fn an_unknown_step_or_a_lone_failure_is_not_partial() {
        let unknown = vec![
            step("a", StepState::Succeeded),
            step("b", StepState::Failed),
            step("c", StepState::OutcomeUnknown),
        ];
        assert!(!is_partial(&unknown));
        assert!(!is_partial(&[step("b", StepState::Failed)]));
        assert!(!is_partial(&[step("a", StepState::Succeeded)]));
    }
}
