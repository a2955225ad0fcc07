//! The audit trail in the table `audit`: one row a call or decision, appended and never
//! changed, numbered by SQLite (`AUTOINCREMENT`, so a number is never given twice, even after
//! retention deleted the rows before it).

use async_trait::async_trait;
use sqlx::SqlitePool;
use sqlx::sqlite::SqliteRow;
use toolgate_core::store::{
    AuditEntry, AuditKind, AuditQuery, AuditRecord, AuditStore, StoreError,
};

use crate::SqliteStore;
use crate::approval::limit;
use crate::error::backend;
use crate::row::column;

/// [`AuditStore::append_audit`](toolgate_core::store::AuditStore::append_audit), on the
/// writer or in a transaction of it.
pub(crate) async fn append<'c>(
    writer: impl sqlx::SqliteExecutor<'c>,
    entry: &AuditEntry,
) -> Result<i64, StoreError> {
    let too_large = |name: &str, value: u64| {
        StoreError::backend(format!(
            "an audit record's {name} ({value}) is too large for the SQLite operation store"
        ))
    };
    let duration_ms =
        i64::try_from(entry.duration_ms).map_err(|_| too_large("duration", entry.duration_ms))?;
    let bytes = i64::try_from(entry.bytes).map_err(|_| too_large("size", entry.bytes))?;
    sqlx::query_scalar(
        "INSERT INTO audit (kind, tenant_id, run_id, call_id, tool, actor, arguments, attempts, \
                            duration_ms, outcome, error_kind, replayed, bytes, idempotency_key, \
                            approval_id, reason, at_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17) \
         RETURNING seq",
    )
    .bind(entry.kind.as_str())
    .bind(&entry.tenant)
    .bind(&entry.run_id)
    .bind(&entry.call_id)
    .bind(&entry.tool)
    .bind(&entry.actor)
    .bind(&entry.arguments)
    .bind(i64::from(entry.attempts))
    .bind(duration_ms)
    .bind(&entry.outcome)
    .bind(&entry.error_kind)
    .bind(i64::from(entry.replayed))
    .bind(bytes)
    .bind(&entry.key)
    .bind(&entry.approval_id)
    .bind(&entry.reason)
    .bind(entry.at_ms)
    .fetch_one(writer)
    .await
    .map_err(backend("append an audit record"))
}

/// [`AuditStore::append_audits`](toolgate_core::store::AuditStore::append_audits): one
/// immediate transaction, so all of them or none, and one commit (one fsync) for all.
pub(crate) async fn append_all(
    writer: &SqlitePool,
    entries: &[AuditEntry],
) -> Result<(), StoreError> {
    match entries {
        [] => return Ok(()),
        [entry] => return append(writer, entry).await.map(drop),
        _ => {}
    }
    let mut tx = writer
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(backend("begin appending audit records"))?;
    for entry in entries {
        append(&mut *tx, entry).await?;
    }
    tx.commit().await.map_err(backend("commit audit records"))
}

/// [`AuditStore::audit`](toolgate_core::store::AuditStore::audit).
pub(crate) async fn read(
    reader: &SqlitePool,
    query: &AuditQuery<'_>,
) -> Result<Vec<AuditRecord>, StoreError> {
    sqlx::query(
        "SELECT * FROM audit \
         WHERE (?1 IS NULL OR tenant_id = ?1) AND (?2 IS NULL OR run_id = ?2) \
           AND (?3 IS NULL OR idempotency_key = ?3) \
         ORDER BY seq LIMIT ?4",
    )
    .bind(query.tenant)
    .bind(query.run_id)
    .bind(query.key)
    .bind(limit(query.limit))
    .fetch_all(reader)
    .await
    .map_err(backend("read the audit trail"))?
    .iter()
    .map(record)
    .collect()
}

/// Decodes a row of `audit` selected with `*`.
fn record(row: &SqliteRow) -> Result<AuditRecord, StoreError> {
    let seq: i64 = column(row, "seq")?;
    let corrupt = |what: String| StoreError::Corrupt(format!("audit record {seq}: {what}"));
    let kind: String = column(row, "kind")?;
    let kind = AuditKind::parse(&kind).ok_or_else(|| corrupt(format!("unknown kind {kind:?}")))?;
    let attempts: i64 = column(row, "attempts")?;
    let duration_ms: i64 = column(row, "duration_ms")?;
    let bytes: i64 = column(row, "bytes")?;
    let replayed: i64 = column(row, "replayed")?;
    let out_of_range = |name: &str, value: i64| corrupt(format!("{name} {value} is out of range"));
    Ok(AuditRecord {
        seq,
        entry: AuditEntry {
            kind,
            tenant: column(row, "tenant_id")?,
            run_id: column(row, "run_id")?,
            call_id: column(row, "call_id")?,
            tool: column(row, "tool")?,
            actor: column(row, "actor")?,
            arguments: column(row, "arguments")?,
            attempts: u32::try_from(attempts).map_err(|_| out_of_range("attempts", attempts))?,
            duration_ms: u64::try_from(duration_ms)
                .map_err(|_| out_of_range("duration_ms", duration_ms))?,
            outcome: column(row, "outcome")?,
            error_kind: column(row, "error_kind")?,
            replayed: replayed != 0,
            bytes: u64::try_from(bytes).map_err(|_| out_of_range("bytes", bytes))?,
            key: column(row, "idempotency_key")?,
            approval_id: column(row, "approval_id")?,
            reason: column(row, "reason")?,
            at_ms: column(row, "at_ms")?,
        },
    })
}

#[async_trait]
impl AuditStore for SqliteStore {
    async fn append_audit(&self, entry: &AuditEntry) -> Result<i64, StoreError> {
        append(&self.writer, entry).await
    }

    async fn append_audits(&self, entries: &[AuditEntry]) -> Result<(), StoreError> {
        append_all(&self.writer, entries).await
    }

    async fn audit(&self, query: AuditQuery<'_>) -> Result<Vec<AuditRecord>, StoreError> {
        read(&self.reader, &query).await
    }
}
