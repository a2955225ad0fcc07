//! Approvals, in the table `toolgate_approvals`: the claim's steps that store, run, expire or
//! answer one, and the decisions, listings and expiries of the
//! [`OperationStore`](toolgate_core::store::OperationStore).
//!
//! Every change to an approval is made in a transaction that first locks its operation's row
//! (`FOR UPDATE` on `toolgate_operations`), then the approval's own: a claim, a decision, an
//! expiry and a revalidation's rejection of one operation take their turns on that lock, in one
//! order, so they never deadlock, and whichever comes second sees what the first committed. That
//! is what lets exactly one claim run an approved operation, whatever the processes. The abort
//! of a run (`reject_run`) takes the run's row lock before those; no claim or decision takes a
//! run's lock, so the order stays one.

use async_trait::async_trait;
use sqlx::Connection;
use sqlx::postgres::{PgConnection, PgRow};
use toolgate_core::store::{
    ApprovalQuery, ApprovalRecord, ApprovalStatus, ApprovalStore, ApprovalSweep, Claim,
    ClaimRequest, ClaimStep, ClaimedRejection, DecideRequest, DecideStep, Decided, Decision,
    OperationRecord, Refusal, RunKey, StoreError, Verdict,
};

use crate::PostgresStore;
use crate::connections::Connections;
use crate::error::store_error;
use crate::row::{self, decode, encode, get, json_text};
use crate::statement::FetchOn;
use crate::store::backend;

/// The columns of an approval, in the order [`record`] reads them.
macro_rules! approval_columns {
    () => {
        "id, tenant_id, idempotency_key, tool, request_hash, policy_hash, arguments, amount, \
         threshold, requester::text AS requester, run_id, call_id::text AS call_id, \
         approver_permission, created_ms, expires_ms, status, decisions::text AS decisions"
    };
}

/// A claim of a new key that carries an approval: inserts the record `awaiting_approval`
/// (attempt 0) and the approval, pending, in one transaction. `false`, and nothing written, when
/// the key has a record already.
pub(crate) async fn insert_awaiting(
    conn: &mut PgConnection,
    request: &ClaimRequest<'_>,
    approval: &ApprovalRecord,
) -> Result<bool, StoreError> {
    let mut tx = sqlx::Connection::begin(conn)
        .await
        .map_err(fault("begin a claim"))?;
    let inserted = crate::row::bind_new_record(
        sqlx::query(
            "INSERT INTO toolgate_operations (tenant_id, idempotency_key, tool, request_hash, \
             arguments, state, attempt, lease_until_ms, created_ms, updated_ms, approval_id) \
             VALUES ($1, $2, $3, $4, $5, 'awaiting_approval', 0, $6, $7, $7, $8) \
             ON CONFLICT (tenant_id, idempotency_key) DO NOTHING",
        ),
        request,
    )
    .bind(&approval.id)
    .execute(&mut *tx)
    .await
    .map_err(fault("store an operation awaiting approval"))?;
    if inserted.rows_affected() == 0 {
        tx.rollback().await.map_err(fault("end a claim"))?;
        return Ok(false);
    }
    insert(&mut tx, approval).await?;
    tx.commit().await.map_err(fault("commit a claim"))?;
    Ok(true)
}

/// The claim's steps about approvals, on `record` (locked by the caller's transaction) and its
/// latest `approval` (locked after it). `None` for any other step.
pub(crate) async fn claim_step(
    conn: &mut PgConnection,
    request: &ClaimRequest<'_>,
    record: &OperationRecord,
    approval: Option<ApprovalRecord>,
    step: ClaimStep,
) -> Result<Option<Claim>, StoreError> {
    let claim = match (step, approval) {
        (ClaimStep::Await, _) => {
            let Some(new) = request.approval else {
                return Err(StoreError::backend(
                    "a claim without an approval was asked to await one",
                ));
            };
            sqlx::query(
                "UPDATE toolgate_operations SET state = 'awaiting_approval', request_hash = $3, \
                 arguments = $4, approval_id = $5, updated_ms = $6 \
                 WHERE tenant_id = $1 AND idempotency_key = $2",
            )
            .bind(request.tenant)
            .bind(request.key)
            .bind(request.request_hash)
            .bind(request.arguments)
            .bind(&new.id)
            .bind(request.now_ms)
            .execute(&mut *conn)
            .await
            .map_err(fault("store an operation awaiting approval"))?;
            insert(conn, new).await?;
            Claim::Approval(new.clone())
        }
        (ClaimStep::RunApproved, Some(approval)) => Claim::Acquired {
            attempt: crate::take::take_to_run(conn, request).await?,
            approved: Some(approval),
        },
        (ClaimStep::ExpireApproval, Some(approval)) => {
            let expiry = ApprovalRecord::expiry(request.now_ms);
            Claim::Approval(reject(conn, approval, expiry, request.now_ms).await?)
        }
        (ClaimStep::AnswerApproval, Some(approval)) => Claim::Approval(approval),
        (ClaimStep::AnswerApproval, None) => Claim::Existing(record.clone()),
        _ => return Ok(None),
    };
    Ok(Some(claim))
}

/// The approval `id`, its row locked when `for_update` (after its operation's: see [`lock`]).
pub(crate) async fn read(
    conn: &mut PgConnection,
    id: &str,
    for_update: bool,
) -> Result<Option<ApprovalRecord>, StoreError> {
    let sql = if for_update {
        concat!(
            "SELECT ",
            approval_columns!(),
            " FROM toolgate_approvals WHERE id = $1 FOR UPDATE"
        )
    } else {
        concat!(
            "SELECT ",
            approval_columns!(),
            " FROM toolgate_approvals WHERE id = $1"
        )
    };
    let row = sqlx::query(sql)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(fault("read an approval"))?;
    row.as_ref().map(record).transpose()
}

/// Locks the approval `id` for a change: its operation's row first, then its own. `None` when
/// there is no such approval.
async fn lock(conn: &mut PgConnection, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
    let owner: Option<(String, String)> =
        sqlx::query_as("SELECT tenant_id, idempotency_key FROM toolgate_approvals WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *conn)
            .await
            .map_err(fault("find an approval"))?;
    let Some((tenant, key)) = owner else {
        return Ok(None);
    };
    sqlx::query(
        "SELECT 1 FROM toolgate_operations WHERE tenant_id = $1 AND idempotency_key = $2 \
         FOR UPDATE",
    )
    .bind(&tenant)
    .bind(&key)
    .fetch_optional(&mut *conn)
    .await
    .map_err(fault("lock an approval's operation"))?;
    read(conn, id, true).await
}

/// Rejects, as [`ApprovalRecord::run_aborted`] at `now_ms`, every approval of `run` that falls
/// with it ([`ApprovalRecord::falls_with_its_run`]), each under its locks (its operation's row,
/// then its own) in the caller's transaction, which holds the run's row lock. Answers them
/// after the change, oldest first.
pub(crate) async fn reject_run(
    conn: &mut PgConnection,
    run: RunKey<'_>,
    now_ms: i64,
) -> Result<Vec<ApprovalRecord>, StoreError> {
    let candidates: Vec<String> = sqlx::query_scalar(
        "SELECT id FROM toolgate_approvals WHERE status IN ('pending', 'approved') \
         AND tenant_id = $1 AND run_id = $2 ORDER BY created_ms, id",
    )
    .bind(run.tenant)
    .bind(run.run_id)
    .fetch_all(&mut *conn)
    .await
    .map_err(fault("find the approvals of an aborted run"))?;
    let mut rejected = Vec::new();
    for id in candidates {
        let Some(approval) = lock(conn, &id).await? else {
            continue;
        };
        let waits: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT FROM toolgate_operations WHERE tenant_id = $1 \
             AND idempotency_key = $2 AND state = 'awaiting_approval' AND approval_id = $3)",
        )
        .bind(&approval.tenant)
        .bind(&approval.key)
        .bind(&approval.id)
        .fetch_one(&mut *conn)
        .await
        .map_err(fault("read the operation of an aborted run's approval"))?;
        if approval.falls_with_its_run(waits) {
            let decision = ApprovalRecord::run_aborted(now_ms);
            rejected.push(reject(conn, approval, decision, now_ms).await?);
        }
    }
    Ok(rejected)
}

/// [`decide`] on `conn`, in a transaction.
async fn decide_on(
    conn: &mut PgConnection,
    request: &DecideRequest<'_>,
) -> Result<Decided, StoreError> {
    let mut tx = conn.begin().await.map_err(fault("begin a decision"))?;
    let Some(approval) = lock(&mut tx, request.id).await? else {
        return Ok(Decided::Refused {
            refusal: Refusal::NotFound,
            approval: None,
        });
    };
    let decided = match approval.decide_step(request) {
        DecideStep::Refuse(refusal) => {
            return Ok(Decided::Refused {
                refusal,
                approval: (refusal != Refusal::NotFound).then_some(approval),
            });
        }
        DecideStep::Expire => {
            let expiry = ApprovalRecord::expiry(request.now_ms);
            Decided::Refused {
                refusal: Refusal::Expired,
                approval: Some(reject(&mut tx, approval, expiry, request.now_ms).await?),
            }
        }
        DecideStep::Apply => {
            let decision = ApprovalRecord::decision_of(request);
            match request.verdict {
                Verdict::Reject => {
                    Decided::Applied(reject(&mut tx, approval, decision, request.now_ms).await?)
                }
                Verdict::Approve => {
                    let mut approval = approval;
                    approval.status = ApprovalStatus::Approved;
                    approval.decisions.push(decision);
                    save(&mut tx, &approval).await?;
                    Decided::Applied(approval)
                }
            }
        }
    };
    tx.commit().await.map_err(fault("commit a decision"))?;
    Ok(decided)
}

/// [`ApprovalStore::list_approvals`](toolgate_core::store::ApprovalStore::list_approvals).
pub(crate) async fn list(
    conns: &Connections,
    query: &ApprovalQuery<'_>,
) -> Result<Vec<ApprovalRecord>, StoreError> {
    let rows = sqlx::query(concat!(
        "SELECT ",
        approval_columns!(),
        " FROM toolgate_approvals WHERE ($1::text IS NULL OR tenant_id = $1) \
         AND ($2::text IS NULL OR status = $2) ORDER BY created_ms, id LIMIT NULLIF($3, 0)"
    ))
    .bind(query.tenant)
    .bind(query.status.map(ApprovalStatus::as_str))
    .bind(row::limit(query.limit))
    .fetch_all_on(conns)
    .await
    .map_err(fault("list approvals"))?;
    rows.iter().map(record).collect()
}

/// [`expire`] on `conn`.
async fn expire_on(
    conn: &mut PgConnection,
    now_ms: i64,
    limit: u32,
) -> Result<Vec<ApprovalRecord>, StoreError> {
    let due: Vec<String> = sqlx::query_scalar(
        "SELECT id FROM toolgate_approvals WHERE status = 'pending' AND expires_ms <= $1 \
         ORDER BY created_ms, id LIMIT NULLIF($2, 0)",
    )
    .bind(now_ms)
    .bind(row::limit(limit))
    .fetch_all(&mut *conn)
    .await
    .map_err(fault("find expired approvals"))?;
    let mut expired = Vec::with_capacity(due.len());
    for id in due {
        let mut tx = conn.begin().await.map_err(fault("begin an expiry"))?;
        match lock(&mut tx, &id).await? {
            Some(approval) if approval.is_expired(now_ms) => {
                let expiry = ApprovalRecord::expiry(now_ms);
                expired.push(reject(&mut tx, approval, expiry, now_ms).await?);
                tx.commit().await.map_err(fault("commit an expiry"))?;
            }
            _ => tx.rollback().await.map_err(fault("end an expiry"))?,
        }
    }
    Ok(expired)
}

/// [`ApprovalStore::reject_claimed`] on `conn`, in a transaction.
async fn reject_claimed_on(
    conn: &mut PgConnection,
    rejection: ClaimedRejection<'_>,
) -> Result<ApprovalRecord, StoreError> {
    let (owner, decision, now_ms) = (rejection.owner, rejection.decision, rejection.now_ms);
    let lost = || StoreError::LostClaim {
        key: owner.key.clone(),
        attempt: owner.attempt,
    };
    let mut tx = conn.begin().await.map_err(fault("begin a rejection"))?;
    let approval_id: Option<Option<String>> = sqlx::query_scalar(
        "SELECT approval_id FROM toolgate_operations WHERE tenant_id = $1 \
         AND idempotency_key = $2 AND state = 'processing' AND attempt = $3 FOR UPDATE",
    )
    .bind(&owner.tenant)
    .bind(&owner.key)
    .bind(row::attempt(owner.attempt))
    .fetch_optional(&mut *tx)
    .await
    .map_err(fault("lock a claimed operation"))?;
    let id = approval_id.flatten().ok_or_else(lost)?;
    let approval = read(&mut tx, &id, true).await?.ok_or_else(lost)?;
    let rejected = reject(&mut tx, approval, decision.clone(), now_ms).await?;
    tx.commit().await.map_err(fault("commit a rejection"))?;
    Ok(rejected)
}

/// Rejects `approval` (locked) with `decision`, and its operation (`updated_ms` then) when it is
/// waiting on it or running under it. Answers the approval after the change.
async fn reject(
    conn: &mut PgConnection,
    mut approval: ApprovalRecord,
    decision: Decision,
    updated_ms: i64,
) -> Result<ApprovalRecord, StoreError> {
    approval.status = ApprovalStatus::Rejected;
    approval.decisions.push(decision);
    save(conn, &approval).await?;
    sqlx::query(
        "UPDATE toolgate_operations SET state = 'rejected', updated_ms = $4 \
         WHERE tenant_id = $1 AND idempotency_key = $2 AND approval_id = $3 \
         AND state IN ('awaiting_approval', 'processing')",
    )
    .bind(&approval.tenant)
    .bind(&approval.key)
    .bind(&approval.id)
    .bind(updated_ms)
    .execute(&mut *conn)
    .await
    .map_err(fault("reject an operation"))?;
    Ok(approval)
}

/// Writes the status and decisions of `approval` (locked).
async fn save(conn: &mut PgConnection, approval: &ApprovalRecord) -> Result<(), StoreError> {
    sqlx::query("UPDATE toolgate_approvals SET status = $2, decisions = $3::json WHERE id = $1")
        .bind(&approval.id)
        .bind(approval.status.as_str())
        .bind(encode(&approval.decisions)?)
        .execute(&mut *conn)
        .await
        .map_err(fault("write a decision"))?;
    Ok(())
}

/// Inserts `approval` as given.
async fn insert(conn: &mut PgConnection, approval: &ApprovalRecord) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO toolgate_approvals (id, tenant_id, idempotency_key, tool, request_hash, \
         policy_hash, arguments, amount, threshold, requester, run_id, call_id, \
         approver_permission, created_ms, expires_ms, status, decisions) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::json, $11, $12::json, $13, $14, $15, \
         $16, $17::json)",
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
    .bind(encode(&approval.requester)?)
    .bind(&approval.run_id)
    .bind(json_text(&approval.call_id)?)
    .bind(&approval.approver_permission)
    .bind(approval.created_ms)
    .bind(approval.expires_ms)
    .bind(approval.status.as_str())
    .bind(encode(&approval.decisions)?)
    .execute(&mut *conn)
    .await
    .map_err(fault("store an approval"))?;
    Ok(())
}

/// The approval in `row`, selected with `approval_columns!`.
fn record(row: &PgRow) -> Result<ApprovalRecord, StoreError> {
    let status: String = get(row, "status")?;
    Ok(ApprovalRecord {
        id: get(row, "id")?,
        tenant: get(row, "tenant_id")?,
        key: get(row, "idempotency_key")?,
        tool: get(row, "tool")?,
        request_hash: get(row, "request_hash")?,
        policy_hash: get(row, "policy_hash")?,
        arguments: get(row, "arguments")?,
        amount: get(row, "amount")?,
        threshold: get(row, "threshold")?,
        requester: decode(row, "requester")?,
        run_id: get(row, "run_id")?,
        call_id: decode(row, "call_id")?,
        approver_permission: get(row, "approver_permission")?,
        created_ms: get(row, "created_ms")?,
        expires_ms: get(row, "expires_ms")?,
        status: ApprovalStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown approval status {status:?}")))?,
        decisions: decode(row, "decisions")?,
    })
}

/// A failed statement while the store was `doing` something to an approval.
fn fault(doing: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
    move |error| store_error(doing, error)
}

#[async_trait]
impl ApprovalStore for PostgresStore {
    async fn decide(&self, request: DecideRequest<'_>) -> Result<Decided, StoreError> {
        let conns = &self.conns;
        let request = &request;
        let mut lease = conns.lease().await.map_err(fault("begin a decision"))?;
        let decided = decide_on(lease.conn(), request).await;
        lease.finish(decided).await
    }

    async fn approval(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        let mut lease = self.conns.lease().await.map_err(backend)?;
        let read = read(lease.conn(), id, false).await;
        lease.finish(read).await
    }

    async fn list_approvals(
        &self,
        query: ApprovalQuery<'_>,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        list(&self.conns, &query).await
    }

    async fn list_approved(&self, limit: u32) -> Result<Vec<ApprovalRecord>, StoreError> {
        let conns = &self.conns;
        let rows = sqlx::query(concat!(
            "SELECT ",
            approval_columns!(),
            " FROM toolgate_approvals AS a WHERE status = 'approved' AND EXISTS ( \
             SELECT FROM toolgate_operations AS o WHERE o.tenant_id = a.tenant_id \
             AND o.idempotency_key = a.idempotency_key AND o.state = 'awaiting_approval' \
             AND o.approval_id = a.id) ORDER BY created_ms, id LIMIT NULLIF($1, 0)"
        ))
        .bind(row::limit(limit))
        .fetch_all_on(conns)
        .await
        .map_err(fault("list approved operations"))?;
        rows.iter().map(record).collect()
    }

    /// Each approval in a transaction of its own, checked again under its locks, so one decided
    /// meanwhile is left as it was decided (and not answered).
    async fn expire_approvals(
        &self,
        sweep: ApprovalSweep,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        let mut lease = self
            .conns
            .lease()
            .await
            .map_err(fault("find expired approvals"))?;
        let expired = expire_on(lease.conn(), sweep.now_ms, sweep.limit).await;
        lease.finish(expired).await
    }

    async fn reject_claimed(
        &self,
        rejection: ClaimedRejection<'_>,
    ) -> Result<ApprovalRecord, StoreError> {
        let mut lease = self
            .conns
            .lease()
            .await
            .map_err(fault("begin a rejection"))?;
        let rejected = reject_claimed_on(lease.conn(), rejection).await;
        lease.finish(rejected).await
    }
}
