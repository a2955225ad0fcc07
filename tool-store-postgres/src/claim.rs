//! A claim of a key ([`ClaimStore::claim`](toolgate_core::store::ClaimStore::claim)):
//! one statement for a new key or a record answered as it stands, a transaction under the
//! record's row lock (and its approval's) for a record the claim changes.

use async_trait::async_trait;
use sqlx::postgres::{PgConnection, PgQueryResult};
use toolgate_core::store::{
    ApprovalRecord, AttemptFailure, Claim, ClaimRequest, ClaimStep, ClaimStore, ClaimToken,
    Journal, OperationRecord, OperationState, RetryNote, StoreError, Success,
};

use crate::connections::Connections;
use crate::error::store_error;
use crate::row::{self, append_error, columns};
use crate::statement::{ExecuteOn, FetchOn};
use crate::take::take_to_run;
use crate::{PostgresStore, approval, audit, steps};

/// How many times a claim inserts again when the record it collided with was purged before it
/// could be read. Only retention deletes records, and only settled ones, so a second round
/// finds either a record or room for one; the bound keeps a misbehaving database from looping.
const CLAIM_ROUNDS: usize = 3;

/// Claims `request.key` following [`ClaimRequest::step`], as
/// [`ClaimStore::claim`](toolgate_core::store::ClaimStore::claim) says.
pub(crate) async fn claim(
    conns: &Connections,
    request: &ClaimRequest<'_>,
) -> Result<Claim, StoreError> {
    let mut lease = conns.lease().await.map_err(backend)?;
    let claim = claim_on(lease.conn(), request).await;
    lease.finish(claim).await
}

/// Claims `request.key` on `conn`: a connection of the store's own, where each statement commits on
/// its own and a change to an existing record runs in a transaction; or a connection inside
/// an open transaction ([`OutboxStore::begin`](toolgate_core::store::OutboxStore::begin)),
/// where that change runs in a savepoint and everything commits or rolls back with the
/// transaction, whose row lock on the record holds concurrent claims of the key until it ends.
pub(crate) async fn claim_on(
    conn: &mut PgConnection,
    request: &ClaimRequest<'_>,
) -> Result<Claim, StoreError> {
    claim_after(conn, request, None).await
}

/// [`claim_on`], whose first insert of a new record (for a claim that asks for no approval) was
/// `first`, made by the statement that began the claim's turn (see `turn_claim`).
pub(crate) async fn claim_after(
    conn: &mut PgConnection,
    request: &ClaimRequest<'_>,
    mut first: Option<Inserted>,
) -> Result<Claim, StoreError> {
    for _ in 0..CLAIM_ROUNDS {
        if let Some(new) = request.approval {
            // Over the threshold: the record and its approval are inserted together, or the
            // record under the key is settled under its lock.
            if approval::insert_awaiting(conn, request, new).await? {
                return Ok(Claim::Approval(new.clone()));
            }
        } else {
            let inserted = match first.take() {
                Some(inserted) => inserted,
                None => insert_or_read(conn, request).await?,
            };
            match inserted {
                Inserted::Acquired => {
                    return Ok(Claim::Acquired {
                        attempt: 1,
                        approved: None,
                    });
                }
                // The step is read without the approval: a conflict is one whatever the
                // approval, and a record that has to do with one is settled under its lock.
                // The journal is read (under the row lock) only for a record the claim changes:
                // it never turns a record answered as it stands into another step.
                Inserted::Existing(record) => {
                    match request.step(&record, None, Journal::Empty) {
                        ClaimStep::Conflict => return Ok(Claim::Conflict { tool: record.tool }),
                        ClaimStep::Existing
                            if !matches!(
                                record.state,
                                OperationState::AwaitingApproval | OperationState::Rejected
                            ) =>
                        {
                            return Ok(Claim::Existing(record));
                        }
                        // The record must change, or its approval be read: under a row lock,
                        // from its latest version.
                        _ => {}
                    }
                }
                // Claimed by a worker that committed while this claim waited on it, or
                // purged.
                Inserted::Unseen => {}
            }
        }
        if let Some(claim) = claim_existing(conn, request).await? {
            return Ok(claim);
        }
    }
    Err(StoreError::backend(format!(
        "the record of {} was deleted under every claim of it ({CLAIM_ROUNDS} rounds)",
        request.key
    )))
}

/// Inserts a new record in `processing`, attempt 1, or reads the record under the key, in
/// one statement. The insert skips a key that exists (no error, no dead row), and the
/// statement's snapshot, taken before it, cannot see its own insert: the record read is
/// always one that was there before.
async fn insert_or_read(
    conn: &mut PgConnection,
    request: &ClaimRequest<'_>,
) -> Result<Inserted, StoreError> {
    let row = row::bind_new_record(
        sqlx::query(concat!(
            "WITH inserted AS (",
            "INSERT INTO toolgate_operations (tenant_id, idempotency_key, tool, request_hash, \
             arguments, state, attempt, lease_until_ms, created_ms, updated_ms) \
             VALUES ($1, $2, $3, $4, $5, 'processing', 1, $6, $7, $7) \
             ON CONFLICT (tenant_id, idempotency_key) DO NOTHING RETURNING 1) \
             SELECT EXISTS (SELECT FROM inserted) AS acquired, ",
            columns!(),
            " FROM (VALUES (1)) AS one LEFT JOIN toolgate_operations \
             ON tenant_id = $1 AND idempotency_key = $2"
        )),
        request,
    )
    .fetch_one(&mut *conn)
    .await
    .map_err(backend)?;
    if row::get(&row, "acquired")? {
        return Ok(Inserted::Acquired);
    }
    match row::get::<Option<String>>(&row, "tenant_id")? {
        Some(_) => Ok(Inserted::Existing(row::record(&row)?)),
        None => Ok(Inserted::Unseen),
    }
}

/// Settles a claim of a key that exists, under the lock of its row and then of its latest
/// approval's, reading its step journal when the step depends on it
/// ([`ClaimRequest::needs_journal`]). `None` when the record vanished (purged) since the insert
/// collided with it.
async fn claim_existing(
    conn: &mut PgConnection,
    request: &ClaimRequest<'_>,
) -> Result<Option<Claim>, StoreError> {
    let mut tx = sqlx::Connection::begin(conn).await.map_err(backend)?;
    let Some((record, approval)) = lock_operation(&mut tx, request.tenant, request.key).await?
    else {
        return Ok(None);
    };
    let journal = if request.needs_journal(&record) {
        steps::journal(&mut tx, request.tenant, request.key).await?
    } else {
        Journal::Empty
    };
    let step = request.step(&record, approval.as_ref(), journal);
    if matches!(step, ClaimStep::Reclaim | ClaimStep::Await)
        && !request.same_request(&record.request_hash)
    {
        // Taken over for other arguments: their steps are never answered to these.
        steps::clear(&mut tx, request.tenant, request.key).await?;
    }
    let claim = match step {
        ClaimStep::Conflict => Claim::Conflict { tool: record.tool },
        ClaimStep::Existing => Claim::Existing(record),
        ClaimStep::Await
        | ClaimStep::RunApproved
        | ClaimStep::ExpireApproval
        | ClaimStep::AnswerApproval => {
            approval::claim_step(&mut tx, request, &record, approval, step)
                .await?
                .ok_or_else(|| {
                    StoreError::backend(format!(
                        "the claim of {} found no approval for the step {step:?}",
                        request.key
                    ))
                })?
        }
        ClaimStep::Reclaim => Claim::Acquired {
            attempt: take_to_run(&mut tx, request).await?,
            approved: None,
        },
        ClaimStep::ExpireToUnknown => {
            // The worker's lease ran out while it may have acted: from now on nobody knows.
            let row = sqlx::query(concat!(
                "UPDATE toolgate_operations SET state = 'outcome_unknown', updated_ms = $3 \
                 WHERE tenant_id = $1 AND idempotency_key = $2 RETURNING ",
                columns!()
            ))
            .bind(request.tenant)
            .bind(request.key)
            .bind(request.now_ms)
            .fetch_one(&mut *tx)
            .await
            .map_err(backend)?;
            Claim::Existing(row::record(&row)?)
        }
    };
    tx.commit().await.map_err(backend)?;
    Ok(Some(claim))
}

/// The operation under a claim's key, locked, with its latest approval locked after it. `None`
/// when the key has no record (purged since the claim's insert collided with it).
async fn lock_operation(
    conn: &mut PgConnection,
    tenant: &str,
    key: &str,
) -> Result<Option<(OperationRecord, Option<ApprovalRecord>)>, StoreError> {
    let row = sqlx::query(concat!(
        "SELECT ",
        columns!(),
        " FROM toolgate_operations WHERE tenant_id = $1 AND idempotency_key = $2 FOR UPDATE"
    ))
    .bind(tenant)
    .bind(key)
    .fetch_optional(&mut *conn)
    .await
    .map_err(backend)?;
    let Some(row) = row else {
        return Ok(None);
    };
    let record = row::record(&row)?;
    let approval = match &record.approval_id {
        Some(id) => approval::read(conn, id, true).await?,
        None => None,
    };
    Ok(Some((record, approval)))
}

/// What the claim's insert found.
#[expect(
    clippy::large_enum_variant,
    reason = "matched once, right where it is made: boxing would allocate on every claim"
)]
pub(crate) enum Inserted {
    /// No record: this claim inserted it.
    Acquired,
    /// The record under the key, as the statement's snapshot saw it.
    Existing(OperationRecord),
    /// A record exists that the statement's snapshot does not show.
    Unseen,
}

/// A failed statement of a claim in the store's words (see `error::store_error`).
fn backend(error: sqlx::Error) -> StoreError {
    store_error("claim a key", error)
}

impl PostgresStore {
    /// Turns the result of an owner-checked `UPDATE` into `LostClaim` when no row matched.
    fn owned(owner: &ClaimToken, done: PgQueryResult) -> Result<(), StoreError> {
        if done.rows_affected() == 0 {
            return Err(StoreError::LostClaim {
                key: owner.key.clone(),
                attempt: owner.attempt,
            });
        }
        Ok(())
    }

    /// Moves the owned `processing` record of `failure` to `state`, appending its error.
    async fn settle_with_error(
        &self,
        failure: AttemptFailure<'_>,
        state: OperationState,
    ) -> Result<(), StoreError> {
        let owner = failure.owner;
        let done = sqlx::query(concat!(
            "UPDATE toolgate_operations SET state = $4, errors = ",
            append_error!("$5"),
            ", updated_ms = $6 \
             WHERE tenant_id = $1 AND idempotency_key = $2 \
             AND state = 'processing' AND attempt = $3"
        ))
        .bind(&owner.tenant)
        .bind(&owner.key)
        .bind(row::attempt(owner.attempt))
        .bind(state.as_str())
        .bind(row::error_list(failure.error)?)
        .bind(failure.now_ms)
        .execute_on(&self.conns)
        .await
        .map_err(backend)?;
        Self::owned(owner, done)
    }
}

#[async_trait]
impl ClaimStore for PostgresStore {
    async fn claim(&self, request: ClaimRequest<'_>) -> Result<Claim, StoreError> {
        claim(&self.conns, &request).await
    }

    async fn succeed(&self, success: Success<'_>) -> Result<Option<i64>, StoreError> {
        if let Some(entry) = success.audit {
            return audit::succeed(&self.conns, success, entry).await;
        }
        let owner = success.owner;
        let done = sqlx::query(
            "UPDATE toolgate_operations SET state = 'succeeded', result = $4, updated_ms = $5 \
             WHERE tenant_id = $1 AND idempotency_key = $2 \
             AND state = 'processing' AND attempt = $3",
        )
        .bind(&owner.tenant)
        .bind(&owner.key)
        .bind(row::attempt(owner.attempt))
        .bind(success.result)
        .bind(success.now_ms)
        .execute_on(&self.conns)
        .await
        .map_err(backend)?;
        Self::owned(owner, done).map(|()| None)
    }

    async fn fail(&self, failure: AttemptFailure<'_>) -> Result<(), StoreError> {
        self.settle_with_error(failure, OperationState::Failed)
            .await
    }

    async fn mark_unknown(&self, failure: AttemptFailure<'_>) -> Result<(), StoreError> {
        self.settle_with_error(failure, OperationState::OutcomeUnknown)
            .await
    }

    async fn record_retry(&self, retry: RetryNote<'_>) -> Result<(), StoreError> {
        let owner = retry.owner;
        let done = sqlx::query(concat!(
            "UPDATE toolgate_operations SET errors = ",
            append_error!("$4"),
            ", lease_until_ms = $5 \
             WHERE tenant_id = $1 AND idempotency_key = $2 \
             AND state = 'processing' AND attempt = $3"
        ))
        .bind(&owner.tenant)
        .bind(&owner.key)
        .bind(row::attempt(owner.attempt))
        .bind(row::error_list(retry.error)?)
        .bind(retry.lease_until_ms)
        .execute_on(&self.conns)
        .await
        .map_err(backend)?;
        Self::owned(owner, done)
    }

    async fn get(&self, tenant: &str, key: &str) -> Result<Option<OperationRecord>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM toolgate_operations WHERE tenant_id = $1 AND idempotency_key = $2"
        ))
        .bind(tenant)
        .bind(key)
        .fetch_optional_on(&self.conns)
        .await
        .map_err(backend)?;
        row.as_ref().map(row::record).transpose()
    }
}
