//! The audit trail of the calls: one record for every call id the dispatcher answers, whatever
//! the answer (run, refused, not started, over a budget, a reused id, a turn of an aborted run),
//! appended in the store once its fate is known; and what the record needs that only the call's
//! path learns (how many attempts ran, which approval it met), noted on the way in a task-local.
//!
//! The record is drafted before the call runs and kept in that task-local. A write that
//! succeeds takes it and records its success with it in one transaction
//! ([`ClaimStore::succeed`]): one commit where two were. Any other end, or a
//! success the store did not take with its record, appends the record after.
//!
//! A record the store cannot take because it cannot be reached (or while the store is known to
//! be out of reach: the call does not wait for it) is kept in this process, in order, up to
//! [`KEPT_AUDIT_RECORDS`], and written before the next record this dispatcher appends once the
//! store answers again, and at the start of every reconciler pass. A process that ends (or
//! crashes) while the store is down loses the records it kept; past the bound, the oldest kept
//! record is dropped, with a warning, to keep the newest.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::FutureExt;

use crate::auth::Session;
use crate::error::ErrorKind;
use crate::fate::Fate;
use crate::result::{CallResult, Status};
use crate::store::{AuditEntry, AuditKind, OperationStore, StoreError};

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
    /// The call's audit record until its fate is known; taken when a write's success is
    /// recorded with it. Boxed: a call without one (no store) holds a pointer, not a record.
    draft: RefCell<Option<Box<AuditEntry>>>,
    /// When the call started, once its draft was completed (its `at_ms` is then its end).
    started_ms: Cell<Option<i64>>,
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

/// `call`, with what its path notes, starting from the call's audit record `draft` (see
/// [`take_success`]). Not an `async fn`: the future it answers holds `call` once, where an
/// `async fn` would hold it as its argument and again where it awaits it.
pub(super) fn noted<F: Future>(
    draft: Option<Box<AuditEntry>>,
    call: F,
) -> impl Future<Output = (F::Output, CallNotes)> {
    let notes = CallNotes {
        draft: RefCell::new(draft),
        ..CallNotes::default()
    };
    // The notes are read when the call ends, still inside its scope.
    let noted = call.map(|output| {
        let notes = NOTES.with(|notes| CallNotes {
            attempts: Cell::new(notes.attempts.get()),
            approval: RefCell::new(notes.approval.take()),
            draft: RefCell::new(notes.draft.take()),
            started_ms: Cell::new(notes.started_ms.get()),
        });
        (output, notes)
    });
    NOTES.scope(notes, noted)
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
                slot, arguments, ..
            } => Subject {
                arguments: redacted(
                    self.inner.registry.at(*slot).descriptor(),
                    &arguments.to_value(),
                ),
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
        let mut entry = draft(session, id, name, subject, started_ms);
        complete(&mut entry, session, fate, &notes, self.now_ms());
        self.append_audit(store, entry).await;
    }

    /// Whether a write's success may carry its call's audit record: not while records kept
    /// during an outage wait to be written before it (the trail stays in order), nor while the
    /// store is known to be out of reach.
    pub(super) fn audit_goes_with_outcome(&self) -> bool {
        !self.inner.reach.is_down() && !self.inner.kept_audit.any()
    }

    /// The audit record of a call that ended in `fate`, from the draft its path left in
    /// `notes`, unless the path wrote it already (with a write's success): a read's waits to be
    /// written after its turn (see `read_audit`); any other is answered with the store, for the caller
    /// to append with [`append_audit`](Self::append_audit). Not an `async fn`, so that a call's
    /// future holds the appending only when there is a record to append.
    pub(super) fn audit_ended(
        &self,
        session: &Session,
        fate: &Fate,
        notes: CallNotes,
        read: bool,
    ) -> Option<(&dyn OperationStore, AuditEntry)> {
        let store = self.inner.store.as_deref()?;
        let mut entry = *notes.draft.take()?;
        complete(&mut entry, session, fate, &notes, self.now_ms());
        if read {
            self.inner.read_audit.wait(entry);
            return None;
        }
        Some((store, entry))
    }

    /// Appends `entry` after the records kept while the store could not be reached; keeps it
    /// too when the store still cannot be reached, and at once while it is known to be out of
    /// reach (see `reach`). Another failure loses the record, not the call's result: it is
    /// logged.
    pub(super) async fn append_audit(&self, store: &dyn OperationStore, entry: AuditEntry) {
        self.reads_first().await;
        self.append_one(store, entry).await;
    }

    /// [`append_audit`](Self::append_audit), ahead of the records of reads that wait.
    async fn append_one(&self, store: &dyn OperationStore, entry: AuditEntry) {
        let kept = &self.inner.kept_audit;
        let reach = &self.inner.reach;
        if reach.is_down() {
            kept.keep(entry);
            return;
        }
        // On the heap: records are kept only during an outage, and every call's future would
        // otherwise hold the writing of them.
        if kept.any() {
            let written = Box::pin(kept.write(store)).await;
            reach.note(&written);
            if written.is_err() {
                kept.keep(entry);
                return;
            }
        }
        let appended = store.append_audit(&entry).await;
        reach.note(&appended);
        match appended {
            Ok(_) => {}
            Err(err) if err.is_unreachable() => {
                tracing::warn!(error = %err, tool = entry.tool.as_str(), call_id = entry.call_id.as_str(), "the operation store could not be reached; the audit record is kept to be written when it answers");
                kept.keep(entry);
            }
            Err(err) => {
                tracing::warn!(error = %err, tool = entry.tool.as_str(), call_id = entry.call_id.as_str(), "the audit record of a call could not be appended");
            }
        }
    }

    /// Appends `entries` in one statement ([`AuditStore::append_audits`]), as
    /// [`append_audit`](Self::append_audit) appends one: after the records kept while the store
    /// could not be reached, or kept with them while it still cannot be. Not after the records
    /// of reads that wait: the caller writes those first, or is writing them.
    pub(super) async fn append_audits(&self, store: &dyn OperationStore, entries: Vec<AuditEntry>) {
        let [_, _, ..] = entries.as_slice() else {
            if let Some(entry) = entries.into_iter().next() {
                self.append_one(store, entry).await;
            }
            return;
        };
        let kept = &self.inner.kept_audit;
        let reach = &self.inner.reach;
        if reach.is_down() {
            entries.into_iter().for_each(|entry| kept.keep(entry));
            return;
        }
        if kept.any() {
            let written = Box::pin(kept.write(store)).await;
            reach.note(&written);
            if written.is_err() {
                entries.into_iter().for_each(|entry| kept.keep(entry));
                return;
            }
        }
        let appended = store.append_audits(&entries).await;
        reach.note(&appended);
        match appended {
            Ok(()) => {}
            Err(err) if err.is_unreachable() => {
                tracing::warn!(error = %err, records = entries.len(), "the operation store could not be reached; the audit records are kept to be written when it answers");
                entries.into_iter().for_each(|entry| kept.keep(entry));
            }
            Err(err) => {
                tracing::warn!(error = %err, records = entries.len(), "audit records of calls could not be appended");
            }
        }
    }

    /// Writes the audit records kept while the store could not be reached; what the store still
    /// does not take stays kept.
    pub(super) async fn write_kept_audit(&self) {
        let Some(store) = self.inner.store.as_deref() else {
            return;
        };
        let kept = &self.inner.kept_audit;
        if kept.any() {
            let written = Box::pin(kept.write(store)).await;
            self.inner.reach.note(&written);
        }
    }
}

/// The audit record of the call `id` of the tool `name` before its fate is known: what it was
/// about, and when it started (in `at_ms` until it is completed).
pub(super) fn draft(
    session: &Session,
    id: &str,
    name: &str,
    subject: Option<Subject>,
    started_ms: i64,
) -> AuditEntry {
    let subject = subject.unwrap_or(Subject {
        arguments: "null".to_owned(),
        key: None,
    });
    AuditEntry {
        kind: AuditKind::Call,
        tenant: session.auth().tenant().to_owned(),
        run_id: session.run_id().to_owned(),
        call_id: id.to_owned(),
        tool: name.to_owned(),
        actor: session.auth().user().to_owned(),
        arguments: subject.arguments,
        attempts: 0,
        duration_ms: 0,
        outcome: String::new(),
        error_kind: None,
        replayed: false,
        bytes: 0,
        key: subject.key,
        approval_id: None,
        reason: None,
        at_ms: started_ms,
    }
}

/// Completes the draft `entry` with the call's `fate` at `now_ms`. A draft completed once
/// already (its write's success was not recorded with it) is completed again from its start.
fn complete(
    entry: &mut AuditEntry,
    session: &Session,
    fate: &Fate,
    notes: &CallNotes,
    now_ms: i64,
) {
    match fate {
        Fate::Answered(result) => complete_answered(entry, result, notes, now_ms),
        Fate::Aborted => {
            let kind = session
                .aborted()
                .map_or(ErrorKind::PermissionDenied, |abort| abort.kind);
            let approval = notes.approval.borrow().clone();
            ended(
                entry,
                notes,
                now_ms,
                "run_aborted",
                Some(kind),
                false,
                0,
                approval,
            );
        }
        other => ended(entry, notes, now_ms, other.status(), None, false, 0, None),
    }
}

/// Completes the draft `entry` with the answer `result` at `now_ms`.
fn complete_answered(entry: &mut AuditEntry, result: &CallResult, notes: &CallNotes, now_ms: i64) {
    let error = result.error.as_ref();
    let error_kind = error
        .filter(|_| result.status == Status::Error)
        .map(|e| e.kind);
    let approval = error
        .and_then(|e| e.approval_id.clone())
        .or_else(|| notes.approval.borrow().clone());
    let bytes = result.to_json_string().len() as u64;
    let status = result.status.as_str();
    ended(
        entry,
        notes,
        now_ms,
        status,
        error_kind,
        result.replayed,
        bytes,
        approval,
    );
}

/// Writes what the end of a call says into its draft `entry`.
#[allow(clippy::too_many_arguments)]
fn ended(
    entry: &mut AuditEntry,
    notes: &CallNotes,
    now_ms: i64,
    outcome: &str,
    error_kind: Option<ErrorKind>,
    replayed: bool,
    bytes: u64,
    approval: Option<String>,
) {
    let started_ms = notes.started_ms.get().unwrap_or(entry.at_ms);
    notes.started_ms.set(Some(started_ms));
    entry.attempts = notes.attempts.get();
    entry.duration_ms = u64::try_from(now_ms.saturating_sub(started_ms)).unwrap_or(0);
    outcome.clone_into(&mut entry.outcome);
    entry.error_kind = error_kind.map(|kind| kind.as_str().to_owned());
    entry.replayed = replayed;
    entry.bytes = bytes;
    entry.approval_id = approval;
    entry.at_ms = now_ms;
}

/// The call's audit record, completed as a success answered `answer` at `now_ms`, when the
/// call's path holds its draft (the dispatcher keeps an audit trail and the call runs through
/// the turn's pipeline): to be written with the success. Give it back with [`give_back`] when
/// it was not written.
pub(super) fn take_success(answer: &CallResult, now_ms: i64) -> Option<AuditEntry> {
    NOTES
        .try_with(|notes| {
            let mut entry = *notes.draft.borrow_mut().take()?;
            complete_answered(&mut entry, answer, notes, now_ms);
            Some(entry)
        })
        .ok()
        .flatten()
}

/// Gives back a record [`take_success`] took and the store did not write: the call's end
/// appends it, completed with the call's fate.
pub(super) fn give_back(entry: AuditEntry) {
    let _ = NOTES.try_with(|notes| *notes.draft.borrow_mut() = Some(Box::new(entry)));
}

/// How many audit records a dispatcher keeps, at the most, while the store cannot be reached.
pub const KEPT_AUDIT_RECORDS: usize = 10_000;

/// The audit records kept while the store could not be reached, oldest first.
#[derive(Debug, Default)]
pub(super) struct KeptAudit {
    records: Mutex<VecDeque<AuditEntry>>,
    /// Whether `records` may hold any: every append asks, and almost always none is kept.
    any: AtomicBool,
    /// Held while the kept records are written, so that two tasks never write one twice.
    writing: tokio::sync::Mutex<()>,
}

impl KeptAudit {
    fn records(&self) -> std::sync::MutexGuard<'_, VecDeque<AuditEntry>> {
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn any(&self) -> bool {
        self.any.load(Ordering::SeqCst)
    }

    fn keep(&self, entry: AuditEntry) {
        let mut records = self.records();
        if records.len() >= KEPT_AUDIT_RECORDS {
            records.pop_front();
            tracing::warn!(
                kept = KEPT_AUDIT_RECORDS,
                "the operation store has been out of reach for {KEPT_AUDIT_RECORDS} audit records; the oldest kept one is dropped"
            );
        }
        records.push_back(entry);
        self.any.store(true, Ordering::SeqCst);
    }

    /// Writes the kept records, oldest first, until the store fails; what is not written stays.
    async fn write(&self, store: &dyn OperationStore) -> Result<(), StoreError> {
        let _writing = self.writing.lock().await;
        loop {
            let Some(entry) = self.records().front().cloned() else {
                self.any.store(false, Ordering::SeqCst);
                return Ok(());
            };
            store.append_audit(&entry).await?;
            let mut records = self.records();
            // `keep` may have dropped it meanwhile, at the bound: take it off only if it is
            // still first.
            if records.front() == Some(&entry) {
                records.pop_front();
            }
            if records.is_empty() {
                self.any.store(false, Ordering::SeqCst);
                return Ok(());
            }
        }
    }
}

/// The audit record (and span) an ended call still owes, when it did not run through the
/// pipeline (not started, refused with its whole turn, a copy of an earlier call of the turn, a
/// call id given to several calls): what it was about.
pub(super) struct Owed(pub(super) Option<Subject>);

impl Dispatcher {
    /// Appends the record each of `owed` owes, all in one statement: a call `id` of the tool
    /// named `name`, which ended in its fate without running.
    pub(super) async fn audit_owed(&self, session: &Session, owed: Vec<(&str, &str, Owed, &Fate)>) {
        if self.inner.store.is_none() || owed.is_empty() {
            return;
        }
        let Some(store) = self.inner.store.as_deref() else {
            return;
        };
        let now_ms = self.now_ms();
        let entries = owed
            .into_iter()
            .map(|(id, name, Owed(subject), fate)| {
                let mut entry = draft(session, id, name, subject, now_ms);
                complete(&mut entry, session, fate, &CallNotes::default(), now_ms);
                entry
            })
            .collect();
        // One statement for all of them, after the records of reads that wait.
        self.reads_first().await;
        self.append_audits(store, entries).await;
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
