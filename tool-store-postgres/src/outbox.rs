//! The outbox's events: one row an operation in `toolgate_outbox`, leased by workers with
//! `FOR UPDATE SKIP LOCKED`, settled together with their operation.

use async_trait::async_trait;
use sqlx::postgres::{PgConnection, PgRow};
use toolgate_core::store::{
    Begun, ClaimRequest, DeliveryOutcome, EventLease, EventQuery, EventSettlement, EventStatus,
    LeasedEvent, OperationState, OutboxEvent, OutboxStore, ResumeRequest, StoreError,
};

use crate::audit::{audit_insert, bind_entry};
use crate::connections::Connections;
use crate::error::store_error;
use crate::row::{self, append_error, decode_optional, encode, get, json_text};
use crate::statement::FetchOn;
use crate::{PostgresStore, transaction};

/// The columns of an event, in the order [`event`] reads them.
macro_rules! event_columns {
    () => {
        "tenant_id, idempotency_key, tool, payload, status, attempt, resumed_at, lease_until_ms, \
         due_ms, worker::text AS worker, last_error::text AS last_error, result, maybe_applied, \
         created_ms, updated_ms"
    };
}

/// The event settled (`settled`, $1 to $11, see [`settle`]) and its operation changed with it.
macro_rules! settle_ctes {
    () => {
        concat!(
            "WITH settled AS (UPDATE toolgate_outbox SET status = $4, \
             result = COALESCE($5, result), last_error = COALESCE($6::json, last_error), \
             due_ms = COALESCE($7, due_ms), updated_ms = $8, \
             maybe_applied = (maybe_applied OR $11) \
             WHERE tenant_id = $1 AND idempotency_key = $2 AND status = 'leased' \
             AND attempt = $3 RETURNING ",
            event_columns!(),
            "), operation AS (UPDATE toolgate_operations AS o SET state = $9, \
             errors = CASE WHEN $10::text IS NULL THEN errors ELSE ",
            append_error!("$10"),
            " END, updated_ms = $8 FROM settled \
             WHERE $9::text IS NOT NULL AND o.tenant_id = settled.tenant_id \
             AND o.idempotency_key = settled.idempotency_key AND o.state = 'queued')"
        )
    };
}

/// The event of `(tenant, key)`, its row locked when `for_update`.
pub(crate) async fn read(
    conn: &mut PgConnection,
    tenant: &str,
    key: &str,
    for_update: bool,
) -> Result<Option<OutboxEvent>, StoreError> {
    let sql = if for_update {
        concat!(
            "SELECT ",
            event_columns!(),
            " FROM toolgate_outbox WHERE tenant_id = $1 AND idempotency_key = $2 FOR UPDATE"
        )
    } else {
        concat!(
            "SELECT ",
            event_columns!(),
            " FROM toolgate_outbox WHERE tenant_id = $1 AND idempotency_key = $2"
        )
    };
    let row = sqlx::query(sql)
        .bind(tenant)
        .bind(key)
        .fetch_optional(conn)
        .await
        .map_err(backend)?;
    row.as_ref().map(event).transpose()
}

/// The events `query` admits, oldest first.
pub(crate) async fn list(
    conns: &Connections,
    query: &EventQuery<'_>,
) -> Result<Vec<OutboxEvent>, StoreError> {
    let rows = sqlx::query(concat!(
        "SELECT ",
        event_columns!(),
        " FROM toolgate_outbox WHERE ($1::text IS NULL OR tenant_id = $1) \
         AND ($2::text IS NULL OR status = $2) \
         ORDER BY created_ms, tenant_id, idempotency_key LIMIT NULLIF($3, 0)"
    ))
    .bind(query.tenant)
    .bind(query.status.map(EventStatus::as_str))
    .bind(row::limit(query.limit))
    .fetch_all_on(conns)
    .await
    .map_err(backend)?;
    rows.iter().map(event).collect()
}

/// The event in `row`, selected with [`event_columns!`].
fn event(row: &PgRow) -> Result<OutboxEvent, StoreError> {
    let status: String = get(row, "status")?;
    Ok(OutboxEvent {
        tenant: get(row, "tenant_id")?,
        key: get(row, "idempotency_key")?,
        tool: get(row, "tool")?,
        payload: get(row, "payload")?,
        status: EventStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("event status {status:?}")))?,
        attempt: row::count(get(row, "attempt")?, "attempt")?,
        resumed_at: row::count(get(row, "resumed_at")?, "resumed_at")?,
        lease_until_ms: get(row, "lease_until_ms")?,
        due_ms: get(row, "due_ms")?,
        worker: decode_optional(row, "worker")?,
        last_error: decode_optional(row, "last_error")?,
        result: get(row, "result")?,
        maybe_applied: get(row, "maybe_applied")?,
        created_ms: get(row, "created_ms")?,
        updated_ms: get(row, "updated_ms")?,
    })
}

/// A failed statement of the outbox in the store's words (see `error::store_error`).
fn backend(error: sqlx::Error) -> StoreError {
    store_error("keep an outbox event", error)
}

#[async_trait]
impl OutboxStore for PostgresStore {
    async fn begin(&self, request: ClaimRequest<'_>) -> Result<Begun, StoreError> {
        transaction::begin(&self.conns, &request).await
    }

    /// Leases due events in one statement: the rows a worker may take, oldest first, locked and
    /// skipped when another worker holds them, become `leased` by this worker; each answers
    /// whether it was leased before (its lease ended: taken over).
    async fn lease_events(&self, lease: EventLease<'_>) -> Result<Vec<LeasedEvent>, StoreError> {
        let conns = &self.conns;
        let lease = &lease;
        let rows = sqlx::query(concat!(
            "WITH due AS (SELECT tenant_id, idempotency_key, status AS was FROM toolgate_outbox \
             WHERE ((status = 'pending' AND due_ms <= $1) \
             OR (status = 'leased' AND lease_until_ms <= $1)) AND tool = ANY($2) \
             ORDER BY created_ms, tenant_id, idempotency_key LIMIT $3 FOR UPDATE SKIP LOCKED) \
             UPDATE toolgate_outbox AS e SET status = 'leased', attempt = e.attempt + 1, \
             lease_until_ms = $4, worker = $5::json, updated_ms = $1, \
             maybe_applied = (e.maybe_applied OR due.was = 'leased') FROM due \
             WHERE e.tenant_id = due.tenant_id AND e.idempotency_key = due.idempotency_key \
             RETURNING (due.was = 'leased') AS taken_over, ",
            "e.tenant_id, e.idempotency_key, e.tool, e.payload, e.status, e.attempt, e.resumed_at, \
             e.lease_until_ms, e.due_ms, e.worker::text AS worker, e.last_error::text AS last_error, \
             e.result, e.maybe_applied, e.created_ms, e.updated_ms"
        ))
        .bind(lease.now_ms)
        .bind(lease.tools)
        .bind(i64::from(lease.limit))
        .bind(lease.lease_until_ms())
        .bind(json_text(lease.worker)?)
        .fetch_all_on(conns)
        .await
        .map_err(backend)?;
        let mut leased = rows
            .iter()
            .map(|row| {
                Ok(LeasedEvent {
                    event: event(row)?,
                    taken_over: get(row, "taken_over")?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        // RETURNING keeps no order: oldest first, as they were chosen.
        leased.sort_by(|a, b| {
            (a.event.created_ms, &a.event.tenant, &a.event.key).cmp(&(
                b.event.created_ms,
                &b.event.tenant,
                &b.event.key,
            ))
        });
        Ok(leased)
    }

    /// Records a delivery's outcome on the event leased under `attempt` and on its operation, with
    /// its audit record when given, in one statement (one round trip, atomic; the record is
    /// inserted from the settled row only); [`StoreError::LostClaim`] when the event is not leased
    /// under `attempt`, and nothing is written.
    async fn settle_event(
        &self,
        settlement: EventSettlement<'_>,
    ) -> Result<OutboxEvent, StoreError> {
        let conns = &self.conns;
        // The event: $4 its status, $5 its result (kept when NULL), $6 its error (kept when NULL),
        // $7 when it is due (kept when NULL). Its operation: $9 its new state (unchanged when NULL:
        // the delivery is still owed, and it stays `queued`), $10 the error appended. $11: the
        // event may now have been applied (kept when false).
        let (status, result, error, due, state) = match settlement.outcome {
            DeliveryOutcome::Delivered(result) => (
                EventStatus::Delivered,
                Some(result),
                None,
                None,
                Some(OperationState::Succeeded),
            ),
            DeliveryOutcome::Retry { error, due_ms, .. } => {
                (EventStatus::Pending, None, Some(error), Some(due_ms), None)
            }
            DeliveryOutcome::Dead(error) => (EventStatus::Dead, None, Some(error), None, None),
            DeliveryOutcome::Unknown(error) => (
                EventStatus::Unknown,
                None,
                Some(error),
                None,
                Some(OperationState::OutcomeUnknown),
            ),
        };
        let appended = match settlement.outcome {
            DeliveryOutcome::Unknown(error) => Some(row::error_list(error)?),
            _ => None,
        };
        // With an audit record, its 17 values are $12 to $28, inserted from the settled row only.
        let query = match settlement.audit {
            None => sqlx::query(concat!(settle_ctes!(), " SELECT * FROM settled")),
            Some(_) => sqlx::query(concat!(
                settle_ctes!(),
                ", audit AS (",
                audit_insert!(),
                "SELECT $12, $13, $14, $15::json, $16::json, $17::json, $18, $19, $20, $21, $22, \
                 $23, $24, $25, $26, $27::json, $28 FROM settled) SELECT * FROM settled"
            )),
        };
        let query = query
            .bind(settlement.tenant)
            .bind(settlement.key)
            .bind(row::attempt(settlement.attempt))
            .bind(status.as_str())
            .bind(result)
            .bind(error.map(encode).transpose()?)
            .bind(due)
            .bind(settlement.now_ms)
            .bind(state.map(OperationState::as_str))
            .bind(appended)
            .bind(settlement.outcome.marks_maybe_applied());
        let row = match settlement.audit {
            None => query.fetch_optional_on(conns).await,
            Some(entry) => bind_entry!(query, entry).fetch_optional_on(conns).await,
        }
        .map_err(backend)?;
        match row {
            Some(row) => event(&row),
            None => Err(StoreError::LostClaim {
                key: settlement.key.to_owned(),
                attempt: settlement.attempt,
            }),
        }
    }

    /// An operator's resume: a `dead` event is `pending` again, due now, its budget counted from
    /// its current attempt; any other is answered as it is.
    async fn resume_event(
        &self,
        request: ResumeRequest<'_>,
    ) -> Result<Option<OutboxEvent>, StoreError> {
        let conns = &self.conns;
        let row = sqlx::query(concat!(
            "UPDATE toolgate_outbox SET status = 'pending', due_ms = $3, resumed_at = attempt, \
             updated_ms = $3 WHERE tenant_id = $1 AND idempotency_key = $2 AND status = 'dead' \
             RETURNING ",
            event_columns!()
        ))
        .bind(request.tenant)
        .bind(request.key)
        .bind(request.now_ms)
        .fetch_optional_on(conns)
        .await
        .map_err(backend)?;
        match row {
            Some(row) => event(&row).map(Some),
            None => {
                let mut lease = conns.lease().await.map_err(backend)?;
                let read = read(lease.conn(), request.tenant, request.key, false).await;
                lease.finish(read).await
            }
        }
    }

    async fn event(&self, tenant: &str, key: &str) -> Result<Option<OutboxEvent>, StoreError> {
        let mut lease = self.conns.lease().await.map_err(backend)?;
        let read = read(lease.conn(), tenant, key, false).await;
        lease.finish(read).await
    }

    async fn list_events(&self, query: EventQuery<'_>) -> Result<Vec<OutboxEvent>, StoreError> {
        list(&self.conns, &query).await
    }
}
