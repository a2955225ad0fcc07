//! What the model reads about the delivery of an outbox operation: accepted and queued when its
//! transaction commits, then, to a later call with the same arguments, how far its event got.

use crate::error::ErrorKind;
use crate::json_text::JsonText;
use crate::result::{CallResult, DeliveryNote, Status};
use crate::steps::StepError;
use crate::store::{AttemptError, EventStatus, OutboxEvent};

/// What a call with the same arguments does about an operation whose delivery is under way.
const READ_PROGRESS: &str = "do not call it again to make it happen; calling it again with the \
                             same arguments reads its progress";

/// The answer of an outbox call whose transaction committed with an event: `queued`, with the
/// tool's result; the provider has not acted.
pub(super) fn queued_now(key: &str, data: JsonText) -> CallResult {
    let note = DeliveryNote {
        operation: key.to_owned(),
        state: EventStatus::Pending,
        attempts: 0,
        last_error: None,
        result: None,
        what: "accepted: its records are committed and its delivery to the provider is queued; \
               the provider has not acted yet"
            .to_owned(),
        next: READ_PROGRESS.to_owned(),
    };
    with_note(Status::Queued, data, note, false)
}

/// The answer of a later call about an operation whose record holds `data` and whose event is
/// `event`: `queued` while its delivery is owed, `succeeded` once delivered.
pub(super) fn of_event(status: Status, data: JsonText, event: &OutboxEvent) -> CallResult {
    with_note(status, data, note_of(event), true)
}

fn with_note(status: Status, data: JsonText, note: DeliveryNote, replayed: bool) -> CallResult {
    CallResult {
        status,
        replayed,
        data: Some(data),
        error: None,
        steps: None,
        delivery: Some(Box::new(note)),
    }
}

/// The delivery note of `event`, in words true of where it stands.
fn note_of(event: &OutboxEvent) -> DeliveryNote {
    let last = event.last_error.as_ref();
    let (what, next) = words_of(event);
    DeliveryNote {
        operation: event.key.clone(),
        state: event.status,
        attempts: event.attempt,
        last_error: last.map(step_error),
        result: event
            .result
            .as_deref()
            .and_then(|text| JsonText::parse(text).ok()),
        what,
        next,
    }
}

/// What the model reads of `event`'s delivery, and what it does next.
fn words_of(event: &OutboxEvent) -> (String, String) {
    let last = event.last_error.as_ref();
    match event.status {
        EventStatus::Pending => (pending(event), READ_PROGRESS.to_owned()),
        EventStatus::Leased => (
            format!(
                "accepted and queued: a worker is delivering it to the provider now (attempt \
                 {})",
                event.attempt
            ),
            READ_PROGRESS.to_owned(),
        ),
        EventStatus::Delivered => (
            "delivered: the provider applied it".to_owned(),
            "do not call it again; tell the user it is done".to_owned(),
        ),
        EventStatus::Dead => (
            format!(
                "its records are committed, and delivery stopped after {} {}: {}; an operator \
                 must resume it",
                event.attempts_spent(),
                plural(event.attempts_spent(), "attempt", "attempts"),
                last.map_or("no error was kept", |err| err.what.as_str()),
            ),
            "tell the user the operation is recorded and its delivery waits for an operator; \
             calling it again does not deliver it"
                .to_owned(),
        ),
        EventStatus::Unknown => (
            "its records are committed, and whether the provider applied its delivery is \
             unknown; it is being reconciled with the provider"
                .to_owned(),
            "do not repeat the call or assume it failed; tell the user the outcome is being \
             checked"
                .to_owned(),
        ),
    }
}

/// What the model reads of a pending event: not tried yet, tried and maybe applied once (its
/// answer lost), or tried without being applied.
fn pending(event: &OutboxEvent) -> String {
    let attempts = event.attempt;
    let last = event.last_error.as_ref();
    if attempts == 0 {
        "accepted: its records are committed and its delivery to the provider is queued; \
         the provider has not acted yet"
            .to_owned()
    } else if event.maybe_applied {
        format!(
            "accepted and queued: its delivery to the provider was tried {attempts} {}, and \
             one of those may have been applied (its answer was lost){}; it is tried again \
             under the same idempotency key, which the provider applies once",
            plural(attempts, "time", "times"),
            last.map_or_else(String::new, |err| format!(" (last: {})", err.what)),
        )
    } else {
        format!(
            "accepted and queued: its delivery to the provider was tried {attempts} {} \
             without being applied{}, and is tried again",
            plural(attempts, "time", "times"),
            last.map_or_else(String::new, |err| format!(" (last: {})", err.what)),
        )
    }
}

/// A delivery error as the model reads it.
fn step_error(err: &AttemptError) -> StepError {
    StepError {
        kind: ErrorKind::from_name(&err.kind).unwrap_or(ErrorKind::Internal),
        what: err.what.clone(),
    }
}

/// `one` for 1, `many` otherwise.
fn plural(n: u32, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}
