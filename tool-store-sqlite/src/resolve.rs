//! The reconciler's settlement of an `outcome_unknown` operation, with its outbox event and its
//! step journal, in one immediate transaction.

use async_trait::async_trait;
use sqlx::AssertSqlSafe;
use toolgate_core::store::{
    OperationLog, OperationQuery, OperationRecord, OperationState, Resolution, ResolveRequest,
    StoreError,
};

use crate::error::backend;
use crate::{SqliteStore, approval, row};

#[async_trait]
impl OperationLog for SqliteStore {
    async fn expire_leases(&self, now_ms: i64) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "UPDATE operations SET state = 'outcome_unknown', updated_ms = ?1 \
             WHERE state = 'processing' AND lease_until_ms <= ?1",
        )
        .bind(now_ms)
        .execute(&self.writer)
        .await
        .map_err(backend("expire leases"))?;
        Ok(done.rows_affected())
    }

    async fn list_unknown(&self, limit: u32) -> Result<Vec<OperationRecord>, StoreError> {
        sqlx::query(
            "SELECT * FROM operations WHERE state = 'outcome_unknown' \
             ORDER BY updated_ms, tenant_id, idempotency_key LIMIT ?1",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.reader)
        .await
        .map_err(backend("list unknown outcomes"))?
        .iter()
        .map(row::record)
        .collect()
    }

    async fn resolve(
        &self,
        request: ResolveRequest<'_>,
    ) -> Result<Option<OperationRecord>, StoreError> {
        let (tenant, key) = (request.tenant, request.key);
        let (resolution, now_ms) = (request.resolution, request.now_ms);
        let mut tx = self
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(backend("begin a reconciliation"))?;
        let unknown: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM operations \
             WHERE tenant_id = ?1 AND idempotency_key = ?2 AND state = 'outcome_unknown'",
        )
        .bind(tenant)
        .bind(key)
        .fetch_optional(&mut *tx)
        .await
        .map_err(backend("read an unknown outcome"))?;
        if unknown.is_none() {
            return Ok(None);
        }
        let has_event: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM outbox WHERE tenant_id = ?1 AND idempotency_key = ?2",
        )
        .bind(tenant)
        .bind(key)
        .fetch_optional(&mut *tx)
        .await
        .map_err(backend("read an unknown outcome's event"))?;
        let has_event = has_event.is_some();
        let (sql, result) = match resolution {
            Resolution::Applied(result) if has_event => {
                sqlx::query(
                    "UPDATE outbox SET status = 'delivered', result = ?3, updated_ms = ?4 \
                     WHERE tenant_id = ?1 AND idempotency_key = ?2",
                )
                .bind(tenant)
                .bind(key)
                .bind(result)
                .bind(now_ms)
                .execute(&mut *tx)
                .await
                .map_err(backend("record a reconciled delivery"))?;
                // The operation keeps the tool's own result.
                ("state = 'succeeded'", None)
            }
            Resolution::Applied(result) => ("state = 'succeeded', result = ?4", Some(result)),
            Resolution::NotApplied if has_event => {
                sqlx::query(
                    "UPDATE outbox SET status = 'pending', due_ms = ?3, maybe_applied = 0, \
                         updated_ms = ?3 \
                     WHERE tenant_id = ?1 AND idempotency_key = ?2",
                )
                .bind(tenant)
                .bind(key)
                .bind(now_ms)
                .execute(&mut *tx)
                .await
                .map_err(backend("owe a delivery again"))?;
                ("state = 'queued'", None)
            }
            Resolution::NotApplied => {
                sqlx::query(
                    "UPDATE steps SET status = 'failed', updated_ms = ?3 \
                     WHERE tenant_id = ?1 AND idempotency_key = ?2 AND status = 'started'",
                )
                .bind(tenant)
                .bind(key)
                .bind(now_ms)
                .execute(&mut *tx)
                .await
                .map_err(backend("record steps not applied"))?;
                (
                    "state = CASE WHEN EXISTS ( \
                         SELECT 1 FROM steps s WHERE s.tenant_id = ?1 AND s.idempotency_key = ?2 \
                           AND s.status = 'succeeded') THEN 'partial' ELSE 'failed' END",
                    None,
                )
            }
            Resolution::StillUnknown => ("reconcile_tries = reconcile_tries + 1", None),
        };
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE operations SET {sql}, updated_ms = ?3 \
             WHERE tenant_id = ?1 AND idempotency_key = ?2 AND state = 'outcome_unknown' \
             RETURNING *"
        )))
        .bind(tenant)
        .bind(key)
        .bind(now_ms);
        let row = match result {
            Some(result) => row.bind(result),
            None => row,
        }
        .fetch_one(&mut *tx)
        .await
        .map_err(backend("settle an unknown outcome"))?;
        let record = row::record(&row)?;
        tx.commit()
            .await
            .map_err(backend("commit a reconciliation"))?;
        Ok(Some(record))
    }

    async fn purge(&self, before_ms: i64) -> Result<u64, StoreError> {
        let mut tx = self
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(backend("begin a purge"))?;
        let done = sqlx::query(
            "DELETE FROM operations \
             WHERE state IN ('succeeded', 'failed', 'rejected') AND updated_ms < ?1",
        )
        .bind(before_ms)
        .execute(&mut *tx)
        .await
        .map_err(backend("purge settled records"))?;
        sqlx::query(
            "DELETE FROM approvals WHERE NOT EXISTS ( \
                 SELECT 1 FROM operations o \
                 WHERE o.tenant_id = approvals.tenant_id \
                   AND o.idempotency_key = approvals.idempotency_key)",
        )
        .execute(&mut *tx)
        .await
        .map_err(backend("purge the approvals of purged records"))?;
        for (table, doing) in [
            ("outbox", "purge the outbox events of purged records"),
            ("steps", "purge the step journals of purged records"),
        ] {
            sqlx::query(AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE NOT EXISTS ( \
                     SELECT 1 FROM operations o \
                     WHERE o.tenant_id = {table}.tenant_id \
                       AND o.idempotency_key = {table}.idempotency_key)"
            )))
            .execute(&mut *tx)
            .await
            .map_err(backend(doing))?;
        }
        // An audit record never goes before its operation.
        sqlx::query(
            "DELETE FROM audit WHERE at_ms < ?1 AND NOT EXISTS ( \
                 SELECT 1 FROM operations o \
                 WHERE o.tenant_id = audit.tenant_id \
                   AND o.idempotency_key = audit.idempotency_key)",
        )
        .bind(before_ms)
        .execute(&mut *tx)
        .await
        .map_err(backend("purge old audit records"))?;
        // A run's attempts and failures go with it (ON DELETE CASCADE).
        sqlx::query("DELETE FROM runs WHERE updated_ms < ?1")
            .bind(before_ms)
            .execute(&mut *tx)
            .await
            .map_err(backend("purge old runs"))?;
        tx.commit().await.map_err(backend("commit a purge"))?;
        Ok(done.rows_affected())
    }

    async fn list_operations(
        &self,
        query: OperationQuery<'_>,
    ) -> Result<Vec<OperationRecord>, StoreError> {
        sqlx::query(
            "SELECT * FROM operations o \
             WHERE (?1 IS NULL OR o.tenant_id = ?1) AND (?2 IS NULL OR o.state = ?2) \
               AND (?3 IS NULL OR EXISTS ( \
                   SELECT 1 FROM audit a \
                   WHERE a.run_id = ?3 AND a.tenant_id = o.tenant_id \
                     AND a.idempotency_key = o.idempotency_key)) \
             ORDER BY o.created_ms, o.tenant_id, o.idempotency_key LIMIT ?4",
        )
        .bind(query.tenant)
        .bind(query.state.map(OperationState::as_str))
        .bind(query.run_id)
        .bind(approval::limit(query.limit))
        .fetch_all(&self.reader)
        .await
        .map_err(backend("list operations"))?
        .iter()
        .map(row::record)
        .collect()
    }
}
