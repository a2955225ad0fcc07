//! The claim: one immediate transaction that inserts the record, or inspects the one there and
//! moves it on as [`OperationStore::claim`](tool_core::store::OperationStore::claim) says.

use sqlx::SqlitePool;
use tool_core::store::{Claim, ClaimRequest, OperationRecord, OperationState, StoreError};

use crate::error::backend;
use crate::row;

/// What a claim does with the record already under its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Another request under the key: answer the conflict, write nothing.
    Conflict,
    /// `failed`, or an expired lease the tool lets us take over: attempt + 1, new lease.
    Reclaim,
    /// An expired lease that may not be taken over: store `outcome_unknown`.
    ExpireToUnknown,
    /// Anything else: answer the record as it is.
    Existing,
}

/// The rules of the trait, on the record found.
fn step(record: &OperationRecord, request: &ClaimRequest<'_>) -> Step {
    if record.request_hash != request.request_hash {
        return Step::Conflict;
    }
    let expired =
        record.state == OperationState::Processing && record.lease_until_ms <= request.now_ms;
    match record.state {
        OperationState::Failed => Step::Reclaim,
        _ if expired && request.takeover => Step::Reclaim,
        _ if expired => Step::ExpireToUnknown,
        _ => Step::Existing,
    }
}

/// Claims `request.key`. `BEGIN IMMEDIATE` takes the write lock before the first read, so no
/// other writer can change the record between the inspection and the update.
pub(crate) async fn claim(
    writer: &SqlitePool,
    request: &ClaimRequest<'_>,
) -> Result<Claim, StoreError> {
    let mut tx = writer
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(backend("begin a claim"))?;
    let inserted = sqlx::query(
        "INSERT INTO operations (tenant_id, idempotency_key, tool, request_hash, arguments, \
                                 state, attempt, lease_until_ms, created_ms, updated_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, 'processing', 1, ?6, ?7, ?7) \
         ON CONFLICT (tenant_id, idempotency_key) DO NOTHING",
    )
    .bind(request.tenant)
    .bind(request.key)
    .bind(request.tool)
    .bind(request.request_hash)
    .bind(request.arguments)
    .bind(request.lease_until_ms())
    .bind(request.now_ms)
    .execute(&mut *tx)
    .await
    .map_err(backend("insert a claim"))?
    .rows_affected();

    let claim = if inserted == 1 {
        Claim::Acquired { attempt: 1 }
    } else {
        let found =
            sqlx::query("SELECT * FROM operations WHERE tenant_id = ?1 AND idempotency_key = ?2")
                .bind(request.tenant)
                .bind(request.key)
                .fetch_optional(&mut *tx)
                .await
                .map_err(backend("read a claimed record"))?
                .ok_or_else(|| {
                    StoreError::Backend(format!(
                        "the record {}/{} conflicted on insert but cannot be read",
                        request.tenant, request.key
                    ))
                })?;
        let record = row::record(&found)?;
        match step(&record, request) {
            Step::Conflict => Claim::Conflict { tool: record.tool },
            Step::Existing => Claim::Existing(record),
            Step::Reclaim => {
                let attempt: i64 = sqlx::query_scalar(
                    "UPDATE operations \
                     SET state = 'processing', attempt = attempt + 1, \
                         lease_until_ms = ?3, updated_ms = ?4 \
                     WHERE tenant_id = ?1 AND idempotency_key = ?2 \
                     RETURNING attempt",
                )
                .bind(request.tenant)
                .bind(request.key)
                .bind(request.lease_until_ms())
                .bind(request.now_ms)
                .fetch_one(&mut *tx)
                .await
                .map_err(backend("claim a record again"))?;
                let attempt = u32::try_from(attempt).map_err(|_| {
                    StoreError::Corrupt(format!(
                        "{}/{}: attempt {attempt} is out of range",
                        request.tenant, request.key
                    ))
                })?;
                Claim::Acquired { attempt }
            }
            Step::ExpireToUnknown => {
                let updated = sqlx::query(
                    "UPDATE operations SET state = 'outcome_unknown', updated_ms = ?3 \
                     WHERE tenant_id = ?1 AND idempotency_key = ?2 \
                     RETURNING *",
                )
                .bind(request.tenant)
                .bind(request.key)
                .bind(request.now_ms)
                .fetch_one(&mut *tx)
                .await
                .map_err(backend("store an expired claim's unknown outcome"))?;
                Claim::Existing(row::record(&updated)?)
            }
        }
    };
    tx.commit().await.map_err(backend("commit a claim"))?;
    Ok(claim)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const NOW: i64 = 1_000_000;

    fn record(state: OperationState, lease_until_ms: i64) -> OperationRecord {
        OperationRecord {
            tenant: "acme".into(),
            key: "k".into(),
            tool: "issue_refund".into(),
            request_hash: "h1".into(),
            arguments: "{}".into(),
            state,
            attempt: 1,
            lease_until_ms,
            result: None,
            errors: Vec::new(),
            reconcile_tries: 0,
            created_ms: 0,
            updated_ms: 0,
        }
    }

    fn request(hash: &str, takeover: bool) -> ClaimRequest<'_> {
        ClaimRequest {
            tenant: "acme",
            key: "k",
            tool: "issue_refund",
            request_hash: hash,
            arguments: "{}",
            now_ms: NOW,
            lease: Duration::from_secs(30),
            takeover,
        }
    }

    #[test]
    fn another_hash_is_a_conflict_whatever_the_state() {
        for state in [
            OperationState::Processing,
            OperationState::Succeeded,
            OperationState::Failed,
            OperationState::OutcomeUnknown,
        ] {
            for takeover in [false, true] {
                assert_eq!(
                    step(&record(state, 0), &request("h2", takeover)),
                    Step::Conflict,
                    "{state:?}"
                );
            }
        }
    }

    #[test]
    fn failed_is_claimed_again_and_settled_states_are_answered() {
        for takeover in [false, true] {
            let req = request("h1", takeover);
            assert_eq!(
                step(&record(OperationState::Failed, 0), &req),
                Step::Reclaim
            );
            for state in [OperationState::Succeeded, OperationState::OutcomeUnknown] {
                assert_eq!(step(&record(state, 0), &req), Step::Existing, "{state:?}");
            }
        }
    }

    #[test]
    fn a_lease_ends_at_its_last_millisecond() {
        let live = record(OperationState::Processing, NOW + 1);
        let ended = record(OperationState::Processing, NOW);
        assert_eq!(step(&live, &request("h1", true)), Step::Existing);
        assert_eq!(step(&ended, &request("h1", false)), Step::ExpireToUnknown);
        assert_eq!(step(&ended, &request("h1", true)), Step::Reclaim);
    }
}
