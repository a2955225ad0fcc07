//! A row of `operations` read back as an [`OperationRecord`].

use sqlx::sqlite::SqliteRow;
use sqlx::{Decode, Row, Sqlite, Type};
use toolgate_core::store::{AttemptError, OperationRecord, OperationState, StoreError};

/// Decodes a row selected with `*` (or returned with `RETURNING *`).
pub(crate) fn record(row: &SqliteRow) -> Result<OperationRecord, StoreError> {
    let tenant: String = column(row, "tenant_id")?;
    let key: String = column(row, "idempotency_key")?;
    let corrupt = |what: String| StoreError::Corrupt(format!("{tenant}/{key}: {what}"));
    let state: String = column(row, "state")?;
    let state =
        OperationState::parse(&state).ok_or_else(|| corrupt(format!("unknown state {state:?}")))?;
    let errors: String = column(row, "errors")?;
    let errors: Vec<AttemptError> = serde_json::from_str(&errors)
        .map_err(|err| corrupt(format!("unreadable attempt errors: {err}")))?;
    let attempt = count(row, "attempt").map_err(&corrupt)?;
    let reconcile_tries = count(row, "reconcile_tries").map_err(&corrupt)?;
    Ok(OperationRecord {
        tool: column(row, "tool")?,
        request_hash: column(row, "request_hash")?,
        arguments: column(row, "arguments")?,
        state,
        attempt,
        lease_until_ms: column(row, "lease_until_ms")?,
        result: column(row, "result")?,
        errors,
        reconcile_tries,
        created_ms: column(row, "created_ms")?,
        updated_ms: column(row, "updated_ms")?,
        approval_id: column(row, "approval_id")?,
        tenant,
        key,
    })
}

/// The column `name` of `row`, or why it cannot be read.
pub(crate) fn column<'r, T>(row: &'r SqliteRow, name: &str) -> Result<T, StoreError>
where
    T: Decode<'r, Sqlite> + Type<Sqlite>,
{
    row.try_get(name)
        .map_err(|err| StoreError::Corrupt(format!("column {name}: {err}")))
}

/// A counter stored as an INTEGER that must fit a `u32`.
pub(crate) fn count(row: &SqliteRow, name: &str) -> Result<u32, String> {
    let value: i64 = row
        .try_get(name)
        .map_err(|err| format!("column {name}: {err}"))?;
    u32::try_from(value).map_err(|_| format!("{name} {value} is out of range"))
}
