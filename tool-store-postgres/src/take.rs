//! Taking a locked record to run it again: a claim that takes a record over, and the run of an
//! approved operation.

use sqlx::postgres::PgConnection;
use toolgate_core::store::{ClaimRequest, StoreError};

use crate::error::store_error;
use crate::row;

/// Takes the locked record under `request.key` to run it for `request`: `processing`, the
/// attempt counted up, a new lease, this request's hash and arguments. Answers the attempt
/// claimed. Shared by a reclaim and the run of an approved operation.
pub(crate) async fn take_to_run(
    conn: &mut PgConnection,
    request: &ClaimRequest<'_>,
) -> Result<u32, StoreError> {
    let attempt: i64 = sqlx::query_scalar(
        "UPDATE toolgate_operations SET state = 'processing', attempt = attempt + 1, \
         lease_until_ms = $3, updated_ms = $4, request_hash = $5, arguments = $6 \
         WHERE tenant_id = $1 AND idempotency_key = $2 RETURNING attempt",
    )
    .bind(request.tenant)
    .bind(request.key)
    .bind(request.lease_until_ms())
    .bind(request.now_ms)
    .bind(request.request_hash)
    .bind(request.arguments)
    .fetch_one(conn)
    .await
    .map_err(backend)?;
    row::count(attempt, "attempt")
}

fn backend(error: sqlx::Error) -> StoreError {
    store_error("claim a key", error)
}
