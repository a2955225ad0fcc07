//! The audit records of reads, written after their turn answers: a read changes nothing, so
//! its answer does not wait for its record. The records of a turn's reads wait in this process
//! until the turn ends (however it ends: answered, aborted, or dropped by its caller); a task
//! then writes every record that waits in one statement
//! ([`AuditStore::append_audits`](crate::store::AuditStore::append_audits)), off the turn's path. A write's records are not
//! among them: a write's answer waits for its record, which its success carries.
//!
//! A record waits in this process from the end of its read until that statement commits: a
//! process that crashes, or a runtime shut down, in between loses the records of the reads
//! answered meanwhile (the reads themselves changed nothing). A record this dispatcher appends
//! for any other call goes after those that wait (it writes them first), so the trail keeps the
//! order in which its calls ended. [`Dispatcher::flush_audit`]
//! writes what waits, and an application that shuts down calls it first. While the store is out
//! of reach, the records join those kept for it (see `audit`).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::store::AuditEntry;

use super::Dispatcher;

/// The most records one statement writes: more wait for the next.
const BATCH: usize = 500;

/// The audit records of reads that wait to be written, oldest first.
#[derive(Debug, Default)]
pub(super) struct ReadAudit {
    waiting: Mutex<Vec<AuditEntry>>,
    /// Whether a task to write them is scheduled and has not yet taken what waits.
    scheduled: AtomicBool,
    /// Held while records are written: a flush waits for the statement in flight.
    writing: tokio::sync::Mutex<()>,
}

impl ReadAudit {
    fn waiting(&self) -> std::sync::MutexGuard<'_, Vec<AuditEntry>> {
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps `entry`, the record of a read that ended, until it is written.
    pub(super) fn wait(&self, entry: AuditEntry) {
        self.waiting().push(entry);
    }

    /// The next records to write, oldest first, at most [`BATCH`].
    fn next_batch(&self) -> Vec<AuditEntry> {
        let mut waiting = self.waiting();
        if waiting.len() <= BATCH {
            return std::mem::take(&mut *waiting);
        }
        let rest = waiting.split_off(BATCH);
        std::mem::replace(&mut *waiting, rest)
    }
}

/// Schedules the writing of the records of reads when dropped: at the end of a turn, however
/// the turn ends.
pub(super) struct WriteReadsAfter<'a>(pub(super) &'a Dispatcher);

impl Drop for WriteReadsAfter<'_> {
    fn drop(&mut self) {
        self.0.write_read_audit_later();
    }
}

impl Dispatcher {
    /// Schedules a task that writes the records of reads that wait, unless one is scheduled
    /// already or none waits. Without a Tokio runtime here, they wait for the next turn or
    /// [`flush_audit`](Self::flush_audit).
    fn write_read_audit_later(&self) {
        let reads = &self.inner.read_audit;
        if self.inner.store.is_none() || reads.waiting().is_empty() {
            return;
        }
        if reads.scheduled.swap(true, Ordering::SeqCst) {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let dispatcher = self.clone();
                runtime.spawn(async move { dispatcher.write_read_audit().await });
            }
            Err(_) => reads.scheduled.store(false, Ordering::SeqCst),
        }
    }

    /// Writes the records of reads that wait, a statement for each [`BATCH`] of them, until
    /// none waits.
    async fn write_read_audit(&self) {
        let Some(store) = self.inner.store.as_deref() else {
            return;
        };
        let reads = &self.inner.read_audit;
        let _writing = reads.writing.lock().await;
        loop {
            // Cleared before taking: a record that comes after this take schedules a task of
            // its own, which writes it after this one ends.
            reads.scheduled.store(false, Ordering::SeqCst);
            let batch = reads.next_batch();
            if batch.is_empty() {
                return;
            }
            self.append_audits(store, batch).await;
        }
    }

    /// Writes the records of reads that wait, or waits for those being written, when there are
    /// any: a record this dispatcher appends goes after them, so that the trail keeps the order
    /// in which its calls ended.
    pub(super) async fn reads_first(&self) {
        let reads = &self.inner.read_audit;
        if reads.waiting().is_empty() && reads.writing.try_lock().is_ok() {
            return;
        }
        self.write_read_audit().await;
    }

    /// Writes the audit records of reads that wait to be written (each read's answer went out
    /// before its record was written; see
    /// [`dispatch_turn`](Self::dispatch_turn)), and waits for those being written. Records the
    /// store cannot take because it is out of reach are kept in this process to be written when
    /// it answers, as every record is. Call it before the process ends, and before reading a
    /// read's record back.
    ///
    /// ```
    /// use toolgate::prelude::*;
    /// use toolgate::store::prelude::*;
    /// use toolgate::store::{AuditQuery, MemoryStore};
    ///
    /// /// Look up an order by its id.
    /// #[tool]
    /// async fn get_order(order_id: String) -> Result<String, ToolError> {
    ///     Ok(format!("{order_id}: paid"))
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let mut registry = Registry::new();
    /// registry.register::<get_order>().unwrap();
    /// let store = std::sync::Arc::new(MemoryStore::new());
    /// let dispatcher = Dispatcher::builder(registry).store(store.clone()).build();
    /// let session = Session::new(AuthContext::new("acme", "agent"), "run-1");
    /// let call = ToolCall::new("c1", "get_order", serde_json::json!({"order_id": "ORD-1"}));
    /// dispatcher.dispatch(&session, call).await.unwrap();
    /// dispatcher.flush_audit().await;
    /// let trail = store.audit(AuditQuery::default()).await.unwrap();
    /// assert_eq!(trail[0].entry.call_id, "c1");
    /// # });
    /// ```
    pub async fn flush_audit(&self) {
        self.write_read_audit().await;
    }
}
