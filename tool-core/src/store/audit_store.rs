//! [`AuditStore`]: the audit trail, appended and read.

use async_trait::async_trait;

use super::{AuditEntry, AuditQuery, AuditRecord, StoreError};

/// The audit trail: one record a call, decision and delivery, numbered in the order appended.
///
/// An application reads it with [`audit`](Self::audit). The dispatcher and the outbox worker
/// append to it ([`append_audit`](Self::append_audit), [`append_audits`](Self::append_audits)),
/// which only a store implements.
#[async_trait]
pub trait AuditStore: Send + Sync {
    /// Appends an audit record. Answers its `seq`, greater than every earlier one's.
    async fn append_audit(&self, entry: &AuditEntry) -> Result<i64, StoreError>;

    /// Appends `entries`, in their order, each numbered as
    /// [`append_audit`](Self::append_audit) numbers one. The dispatcher hands a store the audit
    /// records of reads this way, several at once.
    ///
    /// The default appends them one at a time, so a store that fails on the way may have
    /// appended the first ones; the stores of this workspace append all of them or none, in one
    /// statement (PostgreSQL) or one transaction (SQLite).
    async fn append_audits(&self, entries: &[AuditEntry]) -> Result<(), StoreError> {
        for entry in entries {
            self.append_audit(entry).await?;
        }
        Ok(())
    }

    /// The audit records `query` admits, in the order they were appended, the first
    /// `query.limit` (0: all).
    async fn audit(&self, query: AuditQuery<'_>) -> Result<Vec<AuditRecord>, StoreError>;
}
