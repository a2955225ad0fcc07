//! Reading a stored row back into an [`OperationRecord`], and the values written into one.

use sqlx::Row;
use sqlx::postgres::PgRow;
use toolgate_core::store::{AttemptError, OperationRecord, OperationState, StoreError};

/// The columns of a record, in the order [`record`] reads them; `errors` as JSON text.
macro_rules! columns {
    () => {
        "tenant_id, idempotency_key, tool, request_hash, arguments, state, attempt, \
         lease_until_ms, result, errors::text AS errors, reconcile_tries, created_ms, updated_ms"
    };
}
pub(crate) use columns;

/// The record in `row`, selected with [`columns!`].
pub(crate) fn record(row: &PgRow) -> Result<OperationRecord, StoreError> {
    let state: String = get(row, "state")?;
    let errors: String = get(row, "errors")?;
    Ok(OperationRecord {
        tenant: get(row, "tenant_id")?,
        key: get(row, "idempotency_key")?,
        tool: get(row, "tool")?,
        request_hash: get(row, "request_hash")?,
        arguments: get(row, "arguments")?,
        state: OperationState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown state {state:?}")))?,
        attempt: count(get(row, "attempt")?, "attempt")?,
        lease_until_ms: get(row, "lease_until_ms")?,
        result: get(row, "result")?,
        errors: serde_json::from_str(&errors)
            .map_err(|e| StoreError::Corrupt(format!("errors {errors:?}: {e}")))?,
        reconcile_tries: count(get(row, "reconcile_tries")?, "reconcile_tries")?,
        created_ms: get(row, "created_ms")?,
        updated_ms: get(row, "updated_ms")?,
        approval_id: None,
    })
}

/// `error` as a one-element JSON array, to append to the `errors` column.
pub(crate) fn error_list(error: &AttemptError) -> Result<String, StoreError> {
    serde_json::to_string(&[error]).map_err(|e| {
        StoreError::backend_with_source(format!("cannot encode an attempt error: {e}"), e)
    })
}

/// An attempt number as stored (`BIGINT`).
pub(crate) fn attempt(attempt: u32) -> i64 {
    i64::from(attempt)
}

pub(crate) fn get<'r, T>(row: &'r PgRow, column: &str) -> Result<T, StoreError>
where
    T: sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    row.try_get(column)
        .map_err(|e| StoreError::Corrupt(format!("column {column}: {e}")))
}

/// A counter as stored (`BIGINT`) that must fit a `u32`.
pub(crate) fn count(value: i64, column: &str) -> Result<u32, StoreError> {
    u32::try_from(value)
        .map_err(|_| StoreError::Corrupt(format!("{column} {value} is out of range")))
}
