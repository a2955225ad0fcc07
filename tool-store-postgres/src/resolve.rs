//! The reconciler's verdict on an `outcome_unknown` operation
//! ([`OperationLog::resolve`](toolgate_core::store::OperationLog::resolve)), with its
//! outbox event and its step journal, in one transaction under the operation's row lock.

use async_trait::async_trait;
use sqlx::Connection;
use sqlx::postgres::PgConnection;
use toolgate_core::store::{
    OperationLog, OperationQuery, OperationRecord, OperationState, Resolution, ResolveRequest,
    StoreError,
};

use crate::error::store_error;
use crate::row::{self, columns};
use crate::statement::{ExecuteOn, FetchOn};
use crate::{PostgresStore, audit, outbox};

/// [`OperationLog::resolve`] on `conn`, in a transaction.
async fn resolve_on(
    conn: &mut PgConnection,
    request: ResolveRequest<'_>,
) -> Result<Option<OperationRecord>, StoreError> {
    let (tenant, key) = (request.tenant, request.key);
    let (resolution, now_ms) = (request.resolution, request.now_ms);
    let mut tx = conn.begin().await.map_err(backend)?;
    let unknown: Option<String> = sqlx::query_scalar(
        "SELECT tool FROM toolgate_operations WHERE tenant_id = $1 AND idempotency_key = $2 \
         AND state = 'outcome_unknown' FOR UPDATE",
    )
    .bind(tenant)
    .bind(key)
    .fetch_optional(&mut *tx)
    .await
    .map_err(backend)?;
    if unknown.is_none() {
        return Ok(None);
    }
    let event = outbox::read(&mut tx, tenant, key, true).await?;
    // The new state, the result (kept when None) and what the reconcile count grows by.
    let (state, result, tries) = match (resolution, &event) {
        // The operation's result stays the tool's own; the provider's answer goes on the event.
        (Resolution::Applied(answer), Some(_)) => {
            set_event(&mut tx, tenant, key, "delivered", Some(answer), now_ms).await?;
            (OperationState::Succeeded, None, 0_i64)
        }
        (Resolution::Applied(answer), None) => (OperationState::Succeeded, Some(answer), 0),
        // Its rows are committed and the delivery is still owed: delivered again.
        (Resolution::NotApplied, Some(_)) => {
            set_event(&mut tx, tenant, key, "pending", None, now_ms).await?;
            (OperationState::Queued, None, 0)
        }
        (Resolution::NotApplied, None) => {
            let succeeded: bool = sqlx::query_scalar(
                "WITH failed AS (UPDATE toolgate_steps SET status = 'failed', updated_ms = $3 \
                 WHERE tenant_id = $1 AND idempotency_key = $2 AND status = 'started') \
                 SELECT EXISTS (SELECT FROM toolgate_steps WHERE tenant_id = $1 \
                 AND idempotency_key = $2 AND status = 'succeeded')",
            )
            .bind(tenant)
            .bind(key)
            .bind(now_ms)
            .fetch_one(&mut *tx)
            .await
            .map_err(backend)?;
            let state = if succeeded {
                OperationState::Partial
            } else {
                OperationState::Failed
            };
            (state, None, 0)
        }
        (Resolution::StillUnknown, _) => (OperationState::OutcomeUnknown, None, 1),
    };
    let row = sqlx::query(concat!(
        "UPDATE toolgate_operations SET state = $3, result = COALESCE($4, result), \
         reconcile_tries = reconcile_tries + $5, updated_ms = $6 \
         WHERE tenant_id = $1 AND idempotency_key = $2 RETURNING ",
        columns!()
    ))
    .bind(tenant)
    .bind(key)
    .bind(state.as_str())
    .bind(result)
    .bind(tries)
    .bind(now_ms)
    .fetch_one(&mut *tx)
    .await
    .map_err(backend)?;
    let record = row::record(&row)?;
    tx.commit().await.map_err(backend)?;
    Ok(Some(record))
}

/// The event of `(tenant, key)` becomes `status` (due now and no longer maybe applied, for
/// `pending`: found not applied), with `result` when given.
async fn set_event(
    conn: &mut sqlx::PgConnection,
    tenant: &str,
    key: &str,
    status: &str,
    result: Option<&str>,
    now_ms: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE toolgate_outbox SET status = $3, result = COALESCE($4, result), \
         due_ms = CASE WHEN $3 = 'pending' THEN $5 ELSE due_ms END, \
         maybe_applied = (maybe_applied AND $3 <> 'pending'), updated_ms = $5 \
         WHERE tenant_id = $1 AND idempotency_key = $2",
    )
    .bind(tenant)
    .bind(key)
    .bind(status)
    .bind(result)
    .bind(now_ms)
    .execute(conn)
    .await
    .map_err(backend)?;
    Ok(())
}

/// A failed statement of a resolution in the store's words (see `error::store_error`).
fn backend(error: sqlx::Error) -> StoreError {
    store_error("settle an unknown outcome", error)
}

#[async_trait]
impl OperationLog for PostgresStore {
    async fn expire_leases(&self, now_ms: i64) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "UPDATE toolgate_operations SET state = 'outcome_unknown', updated_ms = $1 \
             WHERE state = 'processing' AND lease_until_ms <= $1",
        )
        .bind(now_ms)
        .execute_on(&self.conns)
        .await
        .map_err(backend)?;
        Ok(done.rows_affected())
    }

    async fn list_unknown(&self, limit: u32) -> Result<Vec<OperationRecord>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM toolgate_operations WHERE state = 'outcome_unknown' \
             ORDER BY updated_ms, tenant_id, idempotency_key LIMIT $1"
        ))
        .bind(i64::from(limit))
        .fetch_all_on(&self.conns)
        .await
        .map_err(backend)?;
        rows.iter().map(row::record).collect()
    }

    /// Settles the `outcome_unknown` record of `(tenant, key)`; `None` when it is not
    /// `outcome_unknown` (any more).
    async fn resolve(
        &self,
        request: ResolveRequest<'_>,
    ) -> Result<Option<OperationRecord>, StoreError> {
        let mut lease = self.conns.lease().await.map_err(backend)?;
        let resolved = resolve_on(lease.conn(), request).await;
        lease.finish(resolved).await
    }

    async fn purge(&self, before_ms: i64) -> Result<u64, StoreError> {
        let mut lease = self.conns.lease().await.map_err(backend)?;
        let mut tx = lease.conn().begin().await.map_err(backend)?;
        // Their outbox events and step journals go with them (ON DELETE CASCADE).
        let done = sqlx::query(
            "DELETE FROM toolgate_operations \
             WHERE state IN ('succeeded', 'failed', 'rejected') AND updated_ms < $1",
        )
        .bind(before_ms)
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
        // The approvals of operations that are gone, whenever they were made.
        sqlx::query(
            "DELETE FROM toolgate_approvals AS a WHERE NOT EXISTS (SELECT FROM \
             toolgate_operations AS o WHERE o.tenant_id = a.tenant_id \
             AND o.idempotency_key = a.idempotency_key)",
        )
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
        // Old audit records, never before their operation.
        sqlx::query(
            "DELETE FROM toolgate_audit AS a WHERE at_ms < $1 AND (idempotency_key IS NULL \
             OR NOT EXISTS (SELECT FROM toolgate_operations AS o \
             WHERE o.tenant_id = a.tenant_id AND o.idempotency_key = a.idempotency_key))",
        )
        .bind(before_ms)
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
        // A run's attempts and failures go with it (ON DELETE CASCADE).
        sqlx::query("DELETE FROM toolgate_runs WHERE updated_ms < $1")
            .bind(before_ms)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        lease.done().await;
        Ok(done.rows_affected())
    }

    async fn list_operations(
        &self,
        query: OperationQuery<'_>,
    ) -> Result<Vec<OperationRecord>, StoreError> {
        audit::operations(&self.conns, &query).await
    }
}
