//! Approvals in the table `approvals`: storing one, deciding, expiring, listing, and the
//! rejection of an approved operation that failed its revalidation.
//!
//! Every change is one immediate transaction that reads the approval, applies the rule of
//! [`ApprovalRecord::decide_step`] (the rules every store follows) and writes what it says;
//! `BEGIN IMMEDIATE` takes the write lock before the first read, so no other writer decides in
//! between. A rejection moves the operation waiting on the approval to `rejected` in the same
//! transaction.

use async_trait::async_trait;
use sqlx::sqlite::SqliteRow;
use sqlx::{SqliteConnection, SqlitePool};
use toolgate_core::store::{
    ApprovalQuery, ApprovalRecord, ApprovalStatus, ApprovalStore, ApprovalSweep, ClaimedRejection,
    DecideRequest, DecideStep, Decided, Decision, Refusal, Requester, RunKey, StoreError, Verdict,
};

use crate::SqliteStore;
use crate::error::backend;
use crate::row::column;

/// Stores `approval` as it is.
pub(crate) async fn insert(
    conn: &mut SqliteConnection,
    approval: &ApprovalRecord,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO approvals (id, tenant_id, idempotency_key, tool, request_hash, policy_hash, \
                                arguments, amount, threshold, requester, run_id, call_id, \
                                approver_permission, created_ms, expires_ms, status, decisions) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
    )
    .bind(&approval.id)
    .bind(&approval.tenant)
    .bind(&approval.key)
    .bind(&approval.tool)
    .bind(&approval.request_hash)
    .bind(&approval.policy_hash)
    .bind(&approval.arguments)
    .bind(&approval.amount)
    .bind(&approval.threshold)
    .bind(json(&approval.requester, "a requester")?)
    .bind(&approval.run_id)
    .bind(&approval.call_id)
    .bind(&approval.approver_permission)
    .bind(approval.created_ms)
    .bind(approval.expires_ms)
    .bind(approval.status.as_str())
    .bind(json(&approval.decisions, "decisions")?)
    .execute(&mut *conn)
    .await
    .map_err(backend("store an approval"))?;
    Ok(())
}

/// The approval `id`, read in the transaction of `conn`.
pub(crate) async fn read(
    conn: &mut SqliteConnection,
    id: &str,
) -> Result<Option<ApprovalRecord>, StoreError> {
    sqlx::query("SELECT * FROM approvals WHERE id = ?1")
        .bind(id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(backend("read an approval"))?
        .as_ref()
        .map(approval)
        .transpose()
}

/// Rejects approval `id` with `decision`, and its operation (at `now_ms`) when the operation
/// waits on it or runs under it. Answers the approval after the change, `None` when there is
/// no approval `id`.
pub(crate) async fn reject(
    conn: &mut SqliteConnection,
    id: &str,
    decision: &Decision,
    now_ms: i64,
) -> Result<Option<ApprovalRecord>, StoreError> {
    let Some(rejected) = append(conn, id, ApprovalStatus::Rejected, decision).await? else {
        return Ok(None);
    };
    sqlx::query(
        "UPDATE operations SET state = 'rejected', updated_ms = ?4 \
         WHERE tenant_id = ?1 AND idempotency_key = ?2 AND approval_id = ?3 \
           AND state IN ('awaiting_approval', 'processing')",
    )
    .bind(&rejected.tenant)
    .bind(&rejected.key)
    .bind(id)
    .bind(now_ms)
    .execute(&mut *conn)
    .await
    .map_err(backend("reject an operation with its approval"))?;
    Ok(Some(rejected))
}

/// Rejects, as [`ApprovalRecord::run_aborted`] at `now_ms`, every approval of `run` that falls
/// with it ([`ApprovalRecord::falls_with_its_run`]), in the caller's immediate transaction.
/// Answers them after the change, oldest first.
pub(crate) async fn reject_run(
    conn: &mut SqliteConnection,
    run: RunKey<'_>,
    now_ms: i64,
) -> Result<Vec<ApprovalRecord>, StoreError> {
    let rows = sqlx::query(
        "SELECT a.*, EXISTS (SELECT 1 FROM operations o \
                             WHERE o.tenant_id = a.tenant_id \
                               AND o.idempotency_key = a.idempotency_key \
                               AND o.state = 'awaiting_approval' AND o.approval_id = a.id) \
                     AS operation_waits \
         FROM approvals a \
         WHERE a.status IN ('pending', 'approved') AND a.tenant_id = ?1 AND a.run_id = ?2 \
         ORDER BY a.created_ms, a.id",
    )
    .bind(run.tenant)
    .bind(run.run_id)
    .fetch_all(&mut *conn)
    .await
    .map_err(backend("find the approvals of an aborted run"))?;
    let mut falling = Vec::new();
    for row in &rows {
        let waits: bool = column(row, "operation_waits")?;
        let found = approval(row)?;
        if found.falls_with_its_run(waits) {
            falling.push(found.id);
        }
    }
    let decision = ApprovalRecord::run_aborted(now_ms);
    let mut rejected = Vec::with_capacity(falling.len());
    for id in falling {
        let done = reject(conn, &id, &decision, now_ms).await?;
        rejected.push(done.ok_or_else(|| vanished(&id))?);
    }
    Ok(rejected)
}

/// Approval `id` → `status`, with `decision` appended; the approval after it.
async fn append(
    conn: &mut SqliteConnection,
    id: &str,
    status: ApprovalStatus,
    decision: &Decision,
) -> Result<Option<ApprovalRecord>, StoreError> {
    sqlx::query(
        "UPDATE approvals SET status = ?2, decisions = json_insert(decisions, '$[#]', json(?3)) \
         WHERE id = ?1 RETURNING *",
    )
    .bind(id)
    .bind(status.as_str())
    .bind(json(decision, "a decision")?)
    .fetch_optional(&mut *conn)
    .await
    .map_err(backend("store a decision"))?
    .as_ref()
    .map(approval)
    .transpose()
}

/// [`ApprovalStore::approval`](toolgate_core::store::ApprovalStore::approval).
pub(crate) async fn get(
    reader: &SqlitePool,
    id: &str,
) -> Result<Option<ApprovalRecord>, StoreError> {
    let mut conn = reader
        .acquire()
        .await
        .map_err(backend("read an approval"))?;
    read(&mut conn, id).await
}

/// [`ApprovalStore::list_approvals`](toolgate_core::store::ApprovalStore::list_approvals).
pub(crate) async fn list(
    reader: &SqlitePool,
    query: &ApprovalQuery<'_>,
) -> Result<Vec<ApprovalRecord>, StoreError> {
    sqlx::query(
        "SELECT * FROM approvals \
         WHERE (?1 IS NULL OR tenant_id = ?1) AND (?2 IS NULL OR status = ?2) \
         ORDER BY created_ms, id LIMIT ?3",
    )
    .bind(query.tenant)
    .bind(query.status.map(ApprovalStatus::as_str))
    .bind(limit(query.limit))
    .fetch_all(reader)
    .await
    .map_err(backend("list approvals"))?
    .iter()
    .map(approval)
    .collect()
}

/// A `LIMIT` for `max`: 0 means none (-1 to SQLite).
pub(crate) fn limit(max: u32) -> i64 {
    if max == 0 { -1 } else { i64::from(max) }
}

/// An approval read a moment ago in the same transaction is gone: the file is not what this
/// store wrote.
fn vanished(id: &str) -> StoreError {
    StoreError::Corrupt(format!(
        "approval {id} was read and then not found in the same transaction"
    ))
}

/// `value` as JSON text, for a column that holds JSON.
fn json(value: &impl serde::Serialize, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|err| {
        StoreError::backend_with_source(format!("could not encode {what}: {err}"), err)
    })
}

/// Decodes a row of `approvals` selected with `*`.
fn approval(row: &SqliteRow) -> Result<ApprovalRecord, StoreError> {
    let id: String = column(row, "id")?;
    let corrupt = |what: String| StoreError::Corrupt(format!("approval {id}: {what}"));
    let status: String = column(row, "status")?;
    let status = ApprovalStatus::parse(&status)
        .ok_or_else(|| corrupt(format!("unknown status {status:?}")))?;
    let requester: String = column(row, "requester")?;
    let requester: Requester = serde_json::from_str(&requester)
        .map_err(|err| corrupt(format!("unreadable requester: {err}")))?;
    let decisions: String = column(row, "decisions")?;
    let decisions: Vec<Decision> = serde_json::from_str(&decisions)
        .map_err(|err| corrupt(format!("unreadable decisions: {err}")))?;
    Ok(ApprovalRecord {
        tenant: column(row, "tenant_id")?,
        key: column(row, "idempotency_key")?,
        tool: column(row, "tool")?,
        request_hash: column(row, "request_hash")?,
        policy_hash: column(row, "policy_hash")?,
        arguments: column(row, "arguments")?,
        amount: column(row, "amount")?,
        threshold: column(row, "threshold")?,
        requester,
        run_id: column(row, "run_id")?,
        call_id: column(row, "call_id")?,
        approver_permission: column(row, "approver_permission")?,
        created_ms: column(row, "created_ms")?,
        expires_ms: column(row, "expires_ms")?,
        status,
        decisions,
        id,
    })
}

#[async_trait]
impl ApprovalStore for SqliteStore {
    async fn decide(&self, request: DecideRequest<'_>) -> Result<Decided, StoreError> {
        let writer = &self.writer;
        let request = &request;
        let mut tx = writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(backend("begin a decision"))?;
        let found = read(&mut tx, request.id).await?;
        let refused = |refusal: Refusal, approval: Option<ApprovalRecord>| Decided::Refused {
            refusal,
            approval: approval.filter(|_| refusal != Refusal::NotFound),
        };
        let Some(found) = found else {
            tx.rollback()
                .await
                .map_err(backend("end a refused decision"))?;
            return Ok(refused(Refusal::NotFound, None));
        };
        let decided = match found.decide_step(request) {
            DecideStep::Refuse(refusal) => {
                tx.rollback()
                    .await
                    .map_err(backend("end a refused decision"))?;
                return Ok(refused(refusal, Some(found)));
            }
            DecideStep::Expire => {
                let expiry = ApprovalRecord::expiry(request.now_ms);
                let expired = reject(&mut tx, request.id, &expiry, request.now_ms).await?;
                refused(Refusal::Expired, expired)
            }
            DecideStep::Apply => {
                let decision = ApprovalRecord::decision_of(request);
                let applied = match request.verdict {
                    Verdict::Reject => {
                        reject(&mut tx, request.id, &decision, request.now_ms).await?
                    }
                    Verdict::Approve => {
                        append(&mut tx, request.id, ApprovalStatus::Approved, &decision).await?
                    }
                };
                Decided::Applied(applied.ok_or_else(|| vanished(request.id))?)
            }
        };
        tx.commit().await.map_err(backend("commit a decision"))?;
        Ok(decided)
    }

    async fn approval(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        get(&self.reader, id).await
    }

    async fn list_approvals(
        &self,
        query: ApprovalQuery<'_>,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        list(&self.reader, &query).await
    }

    async fn list_approved(&self, max: u32) -> Result<Vec<ApprovalRecord>, StoreError> {
        let reader = &self.reader;
        sqlx::query(
            "SELECT a.* FROM approvals a \
             JOIN operations o ON o.tenant_id = a.tenant_id AND o.idempotency_key = a.idempotency_key \
             WHERE a.status = 'approved' AND o.state = 'awaiting_approval' AND o.approval_id = a.id \
             ORDER BY a.created_ms, a.id LIMIT ?1",
        )
        .bind(limit(max))
        .fetch_all(reader)
        .await
        .map_err(backend("list approved operations"))?
        .iter()
        .map(approval)
        .collect()
    }

    async fn expire_approvals(
        &self,
        sweep: ApprovalSweep,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        let now_ms = sweep.now_ms;
        let mut tx = self
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(backend("begin expiring approvals"))?;
        let due: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM approvals WHERE status = 'pending' AND expires_ms <= ?1 \
             ORDER BY created_ms, id LIMIT ?2",
        )
        .bind(now_ms)
        .bind(limit(sweep.limit))
        .fetch_all(&mut *tx)
        .await
        .map_err(backend("find expired approvals"))?;
        let expiry = ApprovalRecord::expiry(now_ms);
        let mut expired = Vec::with_capacity(due.len());
        for id in due {
            let rejected = reject(&mut tx, &id, &expiry, now_ms).await?;
            expired.push(rejected.ok_or_else(|| vanished(&id))?);
        }
        tx.commit()
            .await
            .map_err(backend("commit expired approvals"))?;
        Ok(expired)
    }

    async fn reject_claimed(
        &self,
        rejection: ClaimedRejection<'_>,
    ) -> Result<ApprovalRecord, StoreError> {
        let (owner, now_ms) = (rejection.owner, rejection.now_ms);
        let mut tx = self
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(backend("begin rejecting a claimed operation"))?;
        let id: Option<Option<String>> = sqlx::query_scalar(
            "SELECT approval_id FROM operations \
             WHERE tenant_id = ?1 AND idempotency_key = ?2 AND state = 'processing' AND attempt = ?3",
        )
        .bind(&owner.tenant)
        .bind(&owner.key)
        .bind(i64::from(owner.attempt))
        .fetch_optional(&mut *tx)
        .await
        .map_err(backend("read a claimed operation's approval"))?;
        let rejected = match id.flatten() {
            Some(id) => reject(&mut tx, &id, rejection.decision, now_ms).await?,
            None => None,
        };
        let Some(rejected) = rejected else {
            tx.rollback()
                .await
                .map_err(backend("end a lost rejection"))?;
            return Err(StoreError::LostClaim {
                key: owner.key.clone(),
                attempt: owner.attempt,
            });
        };
        tx.commit()
            .await
            .map_err(backend("commit a claimed operation's rejection"))?;
        Ok(rejected)
    }
}
