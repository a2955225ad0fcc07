//! The outbox events in the table `outbox`: leased by workers, settled with their operation,
//! resumed by an operator, each change one immediate transaction on the writer (SQLite's one
//! writer is what keeps two workers from leasing the same event).

use async_trait::async_trait;
use sqlx::sqlite::SqliteRow;
use sqlx::{SqliteConnection, SqlitePool};
use toolgate_core::store::{
    Begun, ClaimRequest, DeliveryOutcome, EventLease, EventQuery, EventSettlement, EventStatus,
    LeasedEvent, OutboxEvent, OutboxStore, ResumeRequest, StoreError,
};

use crate::error::backend;
use crate::row::{column, count};
use crate::steps::{error_json, parse_error};
use crate::{SqliteStore, begin};

/// The event of `(tenant, key)`, read on `conn`.
pub(crate) async fn read(
    conn: &mut SqliteConnection,
    tenant: &str,
    key: &str,
) -> Result<Option<OutboxEvent>, StoreError> {
    sqlx::query("SELECT * FROM outbox WHERE tenant_id = ?1 AND idempotency_key = ?2")
        .bind(tenant)
        .bind(key)
        .fetch_optional(&mut *conn)
        .await
        .map_err(backend("read an outbox event"))?
        .as_ref()
        .map(event)
        .transpose()
}

/// The event of `(tenant, key)`.
pub(crate) async fn get(
    reader: &SqlitePool,
    tenant: &str,
    key: &str,
) -> Result<Option<OutboxEvent>, StoreError> {
    let mut conn = reader
        .acquire()
        .await
        .map_err(backend("read an outbox event"))?;
    read(&mut conn, tenant, key).await
}

/// The events `query` admits, oldest first.
pub(crate) async fn list(
    reader: &SqlitePool,
    query: &EventQuery<'_>,
) -> Result<Vec<OutboxEvent>, StoreError> {
    sqlx::query(
        "SELECT * FROM outbox \
         WHERE (?1 IS NULL OR tenant_id = ?1) AND (?2 IS NULL OR status = ?2) \
         ORDER BY created_ms, tenant_id, idempotency_key LIMIT ?3",
    )
    .bind(query.tenant)
    .bind(query.status.map(EventStatus::as_str))
    .bind(crate::approval::limit(query.limit))
    .fetch_all(reader)
    .await
    .map_err(backend("list outbox events"))?
    .iter()
    .map(event)
    .collect()
}

/// A row of `outbox`, read back.
fn event(row: &SqliteRow) -> Result<OutboxEvent, StoreError> {
    let tenant: String = column(row, "tenant_id")?;
    let key: String = column(row, "idempotency_key")?;
    let corrupt = |what: String| StoreError::Corrupt(format!("{tenant}/{key}: {what}"));
    let status: String = column(row, "status")?;
    let status = EventStatus::parse(&status)
        .ok_or_else(|| corrupt(format!("unknown event status {status:?}")))?;
    Ok(OutboxEvent {
        tool: column(row, "tool")?,
        payload: column(row, "payload")?,
        status,
        attempt: count(row, "attempt").map_err(&corrupt)?,
        resumed_at: count(row, "resumed_at").map_err(&corrupt)?,
        lease_until_ms: column(row, "lease_until_ms")?,
        due_ms: column(row, "due_ms")?,
        worker: column(row, "worker")?,
        last_error: parse_error(column(row, "last_error")?)?,
        result: column(row, "result")?,
        maybe_applied: column(row, "maybe_applied")?,
        created_ms: column(row, "created_ms")?,
        updated_ms: column(row, "updated_ms")?,
        tenant,
        key,
    })
}

#[async_trait]
impl OutboxStore for SqliteStore {
    async fn begin(&self, request: ClaimRequest<'_>) -> Result<Begun, StoreError> {
        begin::begin(&self.writer, &request).await
    }

    /// Leases due events (see
    /// [`OutboxStore::lease_events`](toolgate_core::store::OutboxStore::lease_events)).
    async fn lease_events(&self, lease: EventLease<'_>) -> Result<Vec<LeasedEvent>, StoreError> {
        let writer = &self.writer;
        let lease = &lease;
        let tools = serde_json::to_string(lease.tools).map_err(|err| {
            StoreError::backend_with_source(format!("could not encode the tools: {err}"), err)
        })?;
        let mut tx = writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(backend("begin a lease of events"))?;
        let due: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT tenant_id, idempotency_key, status FROM outbox \
             WHERE ((status = 'pending' AND due_ms <= ?1) \
                    OR (status = 'leased' AND lease_until_ms <= ?1)) \
               AND tool IN (SELECT value FROM json_each(?2)) \
             ORDER BY created_ms, tenant_id, idempotency_key LIMIT ?3",
        )
        .bind(lease.now_ms)
        .bind(&tools)
        .bind(i64::from(lease.limit))
        .fetch_all(&mut *tx)
        .await
        .map_err(backend("find due events"))?;
        let mut leased = Vec::with_capacity(due.len());
        for (tenant, key, status) in due {
            let row = sqlx::query(
                "UPDATE outbox SET status = 'leased', attempt = attempt + 1, worker = ?3, \
                     lease_until_ms = ?4, updated_ms = ?5, \
                     maybe_applied = (maybe_applied OR status = 'leased') \
                 WHERE tenant_id = ?1 AND idempotency_key = ?2 \
                 RETURNING *",
            )
            .bind(&tenant)
            .bind(&key)
            .bind(lease.worker)
            .bind(lease.lease_until_ms())
            .bind(lease.now_ms)
            .fetch_one(&mut *tx)
            .await
            .map_err(backend("lease an event"))?;
            leased.push(LeasedEvent {
                event: event(&row)?,
                taken_over: status == EventStatus::Leased.as_str(),
            });
        }
        tx.commit()
            .await
            .map_err(backend("commit a lease of events"))?;
        Ok(leased)
    }

    /// Records a delivery's outcome with its operation, and its audit record when given, in one
    /// transaction (see
    /// [`OutboxStore::settle_event`](toolgate_core::store::OutboxStore::settle_event)).
    async fn settle_event(
        &self,
        settlement: EventSettlement<'_>,
    ) -> Result<OutboxEvent, StoreError> {
        let writer = &self.writer;
        let (status, due_ms, error, result) = match settlement.outcome {
            DeliveryOutcome::Delivered(result) => {
                (EventStatus::Delivered, None, None, Some(result))
            }
            DeliveryOutcome::Retry { error, due_ms, .. } => {
                (EventStatus::Pending, Some(due_ms), Some(error), None)
            }
            DeliveryOutcome::Dead(error) => (EventStatus::Dead, None, Some(error), None),
            DeliveryOutcome::Unknown(error) => (EventStatus::Unknown, None, Some(error), None),
        };
        let error = error.map(error_json).transpose()?;
        let mut tx = writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(backend("begin a delivery's outcome"))?;
        let row = sqlx::query(
            "UPDATE outbox SET status = ?4, due_ms = COALESCE(?5, due_ms), \
                 last_error = COALESCE(?6, last_error), result = COALESCE(?7, result), \
                 updated_ms = ?8, maybe_applied = (maybe_applied OR ?9) \
             WHERE tenant_id = ?1 AND idempotency_key = ?2 AND status = 'leased' AND attempt = ?3 \
             RETURNING *",
        )
        .bind(settlement.tenant)
        .bind(settlement.key)
        .bind(i64::from(settlement.attempt))
        .bind(status.as_str())
        .bind(due_ms)
        .bind(&error)
        .bind(result)
        .bind(settlement.now_ms)
        .bind(settlement.outcome.marks_maybe_applied())
        .fetch_optional(&mut *tx)
        .await
        .map_err(backend("record a delivery's outcome"))?
        .ok_or_else(|| StoreError::LostClaim {
            key: settlement.key.to_owned(),
            attempt: settlement.attempt,
        })?;
        match status {
            EventStatus::Delivered => {
                sqlx::query(
                    "UPDATE operations SET state = 'succeeded', updated_ms = ?3 \
                     WHERE tenant_id = ?1 AND idempotency_key = ?2 AND state = 'queued'",
                )
                .bind(settlement.tenant)
                .bind(settlement.key)
                .bind(settlement.now_ms)
                .execute(&mut *tx)
                .await
                .map_err(backend("record a delivery on its operation"))?;
            }
            EventStatus::Unknown => {
                sqlx::query(
                    "UPDATE operations SET state = 'outcome_unknown', updated_ms = ?3, \
                         errors = json_insert(errors, '$[#]', json(?4)) \
                     WHERE tenant_id = ?1 AND idempotency_key = ?2 AND state = 'queued'",
                )
                .bind(settlement.tenant)
                .bind(settlement.key)
                .bind(settlement.now_ms)
                .bind(&error)
                .execute(&mut *tx)
                .await
                .map_err(backend("record an unknown delivery on its operation"))?;
            }
            _ => {}
        }
        if let Some(entry) = settlement.audit {
            crate::audit::append(&mut *tx, entry).await?;
        }
        tx.commit()
            .await
            .map_err(backend("commit a delivery's outcome"))?;
        event(&row)
    }

    /// An operator's resume of a `dead` event (see
    /// [`OutboxStore::resume_event`](toolgate_core::store::OutboxStore::resume_event)).
    async fn resume_event(
        &self,
        request: ResumeRequest<'_>,
    ) -> Result<Option<OutboxEvent>, StoreError> {
        let writer = &self.writer;
        let mut tx = writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(backend("begin a resume"))?;
        sqlx::query(
            "UPDATE outbox SET status = 'pending', due_ms = ?3, resumed_at = attempt, \
                 updated_ms = ?3 \
             WHERE tenant_id = ?1 AND idempotency_key = ?2 AND status = 'dead'",
        )
        .bind(request.tenant)
        .bind(request.key)
        .bind(request.now_ms)
        .execute(&mut *tx)
        .await
        .map_err(backend("resume a dead event"))?;
        let found = read(&mut tx, request.tenant, request.key).await?;
        tx.commit().await.map_err(backend("commit a resume"))?;
        Ok(found)
    }

    async fn event(&self, tenant: &str, key: &str) -> Result<Option<OutboxEvent>, StoreError> {
        get(&self.reader, tenant, key).await
    }

    async fn list_events(&self, query: EventQuery<'_>) -> Result<Vec<OutboxEvent>, StoreError> {
        list(&self.reader, &query).await
    }
}
