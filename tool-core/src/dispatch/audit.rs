//! The audit trail of the calls: one record a call, appended in the store once its fate is
//! known, and what the record needs that only the call's path learns (how many attempts ran,
//! which approval it met), noted on the way in a task-local.

use std::cell::{Cell, RefCell};
use std::future::Future;

use crate::auth::Session;
use crate::error::ErrorKind;
use crate::fate::Fate;
use crate::result::Status;
use crate::store::{AuditEntry, AuditKind};

use super::Dispatcher;
use super::approval::redacted;
use super::plan::Step;

tokio::task_local! {
    static NOTES: CallNotes;
}

/// What a call's path noted for its audit record.
#[derive(Debug, Default)]
pub(super) struct CallNotes {
    /// How many attempts of the tool ran.
    attempts: Cell<u32>,
    /// The approval the call asked for, found, or ran under.
    approval: RefCell<Option<String>>,
}

impl CallNotes {
    /// How many attempts of the tool ran.
    pub(super) fn attempts(&self) -> u32 {
        self.attempts.get()
    }
}

/// Notes that attempt number `attempt` of the call starts.
pub(super) fn count_attempt(attempt: u32) {
    let _ = NOTES.try_with(|notes| notes.attempts.set(attempt));
}

/// Notes the approval the call met.
pub(super) fn note_approval(id: &str) {
    let _ = NOTES.try_with(|notes| *notes.approval.borrow_mut() = Some(id.to_owned()));
}

/// `call`, with what its path notes.
pub(super) async fn noted<F: Future>(call: F) -> (F::Output, CallNotes) {
    NOTES
        .scope(CallNotes::default(), async {
            let output = call.await;
            let notes = NOTES.with(|notes| CallNotes {
                attempts: Cell::new(notes.attempts.get()),
                approval: RefCell::new(notes.approval.borrow().clone()),
            });
            (output, notes)
        })
        .await
}

/// What an audit record says of a call before it runs: its arguments (redacted) and key.
pub(super) struct Subject {
    pub(super) arguments: String,
    pub(super) key: Option<String>,
}

impl Dispatcher {
    /// The subject of the call `step`, when the dispatcher keeps an audit trail (it has a
    /// store).
    pub(super) fn audit_subject(&self, step: &Step) -> Option<Subject> {
        self.inner.store.as_ref()?;
        Some(match step {
            Step::Read {
                tool, arguments, ..
            } => Subject {
                arguments: redacted(self.registered(tool).descriptor(), &arguments.to_value()),
                key: None,
            },
            Step::Write(write) => Subject {
                arguments: redacted(self.registered(write.tool).descriptor(), &write.args),
                key: Some(write.key.clone()),
            },
            Step::Refused { .. } => Subject {
                arguments: "null".to_owned(),
                key: None,
            },
        })
    }

    /// Appends the audit record of a call that ended in `fate`. A store that fails here loses
    /// the record, not the call's result: the failure is logged.
    pub(super) async fn audit_call(&self, session: &Session, call: CallAudit<'_>) {
        let Some(store) = self.inner.store.as_deref() else {
            return;
        };
        let CallAudit {
            id,
            name,
            subject,
            fate,
            notes,
            started_ms,
        } = call;
        let now_ms = self.now_ms();
        let (outcome, error_kind, replayed, bytes, approval) = match fate {
            Fate::Answered(result) => {
                let error_kind = result
                    .error
                    .as_ref()
                    .filter(|_| result.status == Status::Error)
                    .map(|e| e.kind.as_str().to_owned());
                let approval = result
                    .error
                    .as_ref()
                    .and_then(|e| e.approval_id.clone())
                    .or_else(|| notes.approval.take());
                let bytes = result.to_json_string().len() as u64;
                (
                    result.status.as_str().to_owned(),
                    error_kind,
                    result.replayed,
                    bytes,
                    approval,
                )
            }
            Fate::AbortedRun => (
                "run_aborted".to_owned(),
                session
                    .aborted()
                    .map(|abort| abort.kind.as_str().to_owned())
                    .or_else(|| Some(ErrorKind::PermissionDenied.as_str().to_owned())),
                false,
                0,
                notes.approval.take(),
            ),
            other => (other.status().to_owned(), None, false, 0, None),
        };
        let subject = subject.unwrap_or(Subject {
            arguments: "null".to_owned(),
            key: None,
        });
        let entry = AuditEntry {
            kind: AuditKind::Call,
            tenant: session.auth().tenant().to_owned(),
            run_id: session.run_id().to_owned(),
            call_id: id.to_owned(),
            tool: name.to_owned(),
            actor: session.auth().user().to_owned(),
            arguments: subject.arguments,
            attempts: notes.attempts.get(),
            duration_ms: u64::try_from(now_ms.saturating_sub(started_ms)).unwrap_or(0),
            outcome,
            error_kind,
            replayed,
            bytes,
            key: subject.key,
            approval_id: approval,
            reason: None,
            at_ms: now_ms,
        };
        if let Err(err) = store.append_audit(&entry).await {
            tracing::warn!(error = %err, tool = name, call_id = id, "the audit record of a call could not be appended");
        }
    }
}

/// One call's audit record, before it is written.
pub(super) struct CallAudit<'a> {
    pub(super) id: &'a str,
    pub(super) name: &'a str,
    pub(super) subject: Option<Subject>,
    pub(super) fate: &'a Fate,
    pub(super) notes: CallNotes,
    pub(super) started_ms: i64,
}
