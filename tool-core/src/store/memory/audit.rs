//! The audit trail of a [`MemoryStore`](super::MemoryStore): appended and read in its tables.

use async_trait::async_trait;

use super::MemoryStore;
use super::tables::truncate;
use crate::store::{AuditEntry, AuditQuery, AuditRecord, AuditStore, StoreError};

#[async_trait]
impl AuditStore for MemoryStore {
    async fn append_audit(&self, entry: &AuditEntry) -> Result<i64, StoreError> {
        Ok(self.tables(|tables| {
            tables.last_seq += 1;
            let seq = tables.last_seq;
            tables.audit.push(AuditRecord {
                seq,
                entry: entry.clone(),
            });
            seq
        }))
    }

    async fn audit(&self, query: AuditQuery<'_>) -> Result<Vec<AuditRecord>, StoreError> {
        Ok(self.tables(|tables| {
            let mut read: Vec<_> = tables
                .audit
                .iter()
                .filter(|r| query.admits(&r.entry))
                .cloned()
                .collect();
            truncate(&mut read, query.limit);
            read
        }))
    }
}
